package ui

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
)

func newEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	return eng
}

type browser struct {
	t    *testing.T
	base string
	c    *http.Client
	csrf string
}

func newBrowser(t *testing.T, h http.Handler) *browser {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: srv.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

func (b *browser) do(method, path, body string, hdr map[string]string) (int, string, http.Header) {
	b.t.Helper()
	req, err := http.NewRequest(method, b.base+path, strings.NewReader(body))
	if err != nil {
		b.t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header
}

func (b *browser) session() {
	b.t.Helper()
	code, body, _ := b.do("GET", "/api/session", "", nil)
	if code != 200 {
		b.t.Fatalf("/api/session: %d %s", code, body)
	}
	var s struct{ CSRF string }
	if err := json.Unmarshal([]byte(body), &s); err != nil || s.CSRF == "" {
		b.t.Fatalf("/api/session: %s %v", body, err)
	}
	b.csrf = s.CSRF
}

func (b *browser) action(path, body string) (int, string) {
	code, out, _ := b.do("POST", path, body, map[string]string{"Content-Type": "application/json", "X-Cairn-CSRF": b.csrf})
	return code, out
}

func TestSignInWithTheToken(t *testing.T) {
	eng := newEngine(t)
	b := newBrowser(t, New(eng, Options{Token: "s3cret"}))
	for _, p := range []string{"/runs", "/runs/x/y", "/paused"} {
		if code, _, hdr := b.do("GET", p, "", nil); code != http.StatusSeeOther || !strings.HasPrefix(hdr.Get("Location"), "/login?next=") {
			t.Fatalf("GET %s signed out: %d %s", p, code, hdr.Get("Location"))
		}
	}
	if code, _, _ := b.do("GET", "/api/runs", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("API signed out: %d", code)
	}
	if code, _, _ := b.do("GET", "/static/app.js", "", nil); code != 200 {
		t.Fatalf("static files are public (the sign-in page needs them): %d", code)
	}
	form := func(token string) (int, string, http.Header) {
		return b.do("POST", "/login", url.Values{"token": {token}, "next": {"/paused"}}.Encode(),
			map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	}
	if code, body, _ := form("wrong"); code != http.StatusUnauthorized || !strings.Contains(body, "not the server") {
		t.Fatalf("wrong token: %d", code)
	}
	code, _, hdr := form("s3cret")
	if code != http.StatusSeeOther || hdr.Get("Location") != "/paused" {
		t.Fatalf("right token: %d %s", code, hdr.Get("Location"))
	}
	cookie := hdr.Get("Set-Cookie")
	for _, want := range []string{"cairn_ui=v1.", "HttpOnly", "SameSite=Strict", "Path=/"} {
		if !strings.Contains(cookie, want) {
			t.Fatalf("session cookie %q lacks %s", cookie, want)
		}
	}
	if code, _, _ := b.do("GET", "/runs", "", nil); code != 200 {
		t.Fatalf("signed in: %d", code)
	}
	if code, _, _ := b.do("GET", "/api/runs", "", nil); code != 200 {
		t.Fatalf("API signed in: %d", code)
	}
	// A bearer token works for scripts; a forged cookie does not.
	other := newBrowser(t, New(eng, Options{Token: "s3cret"}))
	if code, _, _ := other.do("GET", "/api/runs", "", map[string]string{"Authorization": "Bearer s3cret"}); code != 200 {
		t.Fatalf("bearer: %d", code)
	}
	if code, _, _ := other.do("GET", "/api/runs", "", map[string]string{"Cookie": "cairn_ui=v1.99999999999.forged"}); code != http.StatusUnauthorized {
		t.Fatalf("forged cookie: %d", code)
	}
	// The redirect after sign-in stays on the site.
	if code, _, hdr := b.do("POST", "/login", url.Values{"token": {"s3cret"}, "next": {"//evil.example/x"}}.Encode(),
		map[string]string{"Content-Type": "application/x-www-form-urlencoded"}); code != http.StatusSeeOther || hdr.Get("Location") != "/" {
		t.Fatalf("open redirect: %s", hdr.Get("Location"))
	}
}

func TestSessionsExpire(t *testing.T) {
	now := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	h := New(newEngine(t), Options{Token: "s3cret", SessionTTL: time.Hour, Now: func() time.Time { return now }})
	b := newBrowser(t, h)
	b.do("POST", "/login", url.Values{"token": {"s3cret"}}.Encode(), map[string]string{"Content-Type": "application/x-www-form-urlencoded"})
	if code, _, _ := b.do("GET", "/api/runs", "", nil); code != 200 {
		t.Fatalf("fresh session: %d", code)
	}
	now = now.Add(time.Hour)
	if code, _, _ := b.do("GET", "/api/runs", "", nil); code != http.StatusUnauthorized {
		t.Fatalf("expired session: %d", code)
	}
}

func TestActionsNeedTheCSRFToken(t *testing.T) {
	eng := newEngine(t)
	c := client.NewLocal(eng, client.Options{})
	ctx := context.Background()
	if _, err := c.StartWorkflow(ctx, client.StartOptions{ID: "w", TaskQueue: "q"}, "Anything", nil); err != nil {
		t.Fatal(err)
	}
	b := newBrowser(t, New(eng, Options{}))
	body := `{"workflowId":"w","reason":"test","by":"Ann"}`
	for _, tc := range []struct {
		what string
		hdr  map[string]string
		want int
	}{
		{"no token", map[string]string{"Content-Type": "application/json"}, http.StatusForbidden},
		{"a form", map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Cairn-CSRF": "x"}, http.StatusUnsupportedMediaType},
		{"a wrong token", map[string]string{"Content-Type": "application/json", "X-Cairn-CSRF": "nope"}, http.StatusForbidden},
		{"another origin", map[string]string{"Content-Type": "application/json", "Origin": "http://evil.example"}, http.StatusForbidden},
	} {
		if code, out, _ := b.do("POST", "/api/terminate", body, tc.hdr); code != tc.want {
			t.Errorf("terminate with %s: %d %s, want %d", tc.what, code, out, tc.want)
		}
	}
	if d, _ := c.DescribeWorkflow(ctx, "w", ""); !d.Info.Status.Open() {
		t.Fatal("a refused action acted")
	}
	b.session()
	if code, out := b.action("/api/terminate", body); code != 200 {
		t.Fatalf("terminate with the token: %d %s", code, out)
	}
	d, err := c.DescribeWorkflow(ctx, "w", "")
	if err != nil || d.Info.Status.String() != "terminated" {
		t.Fatalf("after terminate: %+v %v", d, err)
	}
	h, _ := c.GetHistory(ctx, "w", "")
	if last, _ := json.Marshal(h[len(h)-1]); !strings.Contains(string(last), `"identity":"Ann (web UI)"`) || !strings.Contains(string(last), `"reason":"test"`) {
		t.Fatalf("the history does not record who and why: %s", last)
	}
	// The closed run's Delete: gone from describe afterwards; a second
	// delete is a not-found.
	if code, out := b.action("/api/delete", `{"workflowId":"w","by":"Ann"}`); code != 200 {
		t.Fatalf("delete: %d %s", code, out)
	}
	if _, err := c.DescribeWorkflow(ctx, "w", ""); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("describe after delete: %v", err)
	}
	if code, out := b.action("/api/delete", `{"workflowId":"w","by":"Ann"}`); code != http.StatusNotFound {
		t.Fatalf("delete again: %d %s", code, out)
	}
}

func TestLoopbackOnlyWithoutAToken(t *testing.T) {
	h := New(newEngine(t), Options{})
	for host, want := range map[string]int{"127.0.0.1:8233": 200, "localhost:8233": 200, "[::1]:8233": 200, "evil.example": 403, "10.0.0.5:8233": 403} {
		req := httptest.NewRequest("GET", "/api/session", nil)
		req.Host = host
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			t.Errorf("Host %s: %d, want %d", host, rec.Code, want)
		}
	}
}

func TestAPIErrorsAreJSON(t *testing.T) {
	b := newBrowser(t, New(newEngine(t), Options{}))
	code, body, _ := b.do("GET", "/api/run?id=nobody", "", nil)
	var eb struct{ Code, Message string }
	if code != 404 || json.Unmarshal([]byte(body), &eb) != nil || eb.Code != "not_found" {
		t.Fatalf("run of nobody: %d %s", code, body)
	}
	if code, body, _ := b.do("GET", "/api/runs?status=bogus", "", nil); code != 400 || !strings.Contains(body, "invalid_argument") {
		t.Fatalf("bad filter: %d %s", code, body)
	}
}
