package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
)

const token = "t0ken"

// newTestServer serves h on a test server closed when the test ends.
func newTestServer(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return srv
}

// openEngine returns an engine over an in-memory store, closed when the
// test ends.
func openEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true, MemTableSize: 8 << 20, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	return eng
}

type reply struct {
	status int
	header http.Header
	body   []byte
}

func (r reply) errorBody(t *testing.T) api.ErrorBody {
	t.Helper()
	if ct := r.header.Get("Content-Type"); ct != ContentJSON {
		t.Fatalf("error response has Content-Type %q, want %s (body %q)", ct, ContentJSON, r.body)
	}
	var eb api.ErrorBody
	dec := json.NewDecoder(bytes.NewReader(r.body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&eb); err != nil {
		t.Fatalf("error body %q is not an api.ErrorBody: %v", r.body, err)
	}
	if eb.Code == "" || eb.Message == "" {
		t.Fatalf("error body %q lacks a code or a message", r.body)
	}
	return eb
}

// do sends one request; headers are name, value pairs.
func do(t *testing.T, srv *httptest.Server, method, path string, body []byte, headers ...string) reply {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, srv.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s: reading the response: %v", method, path, err)
	}
	return reply{status: resp.StatusCode, header: resp.Header, body: b}
}

var (
	auth     = []string{"Authorization", "Bearer " + token}
	jsonBody = []string{"Content-Type", ContentJSON, "Authorization", "Bearer " + token}
	mpBody   = []string{"Content-Type", ContentMsgpack, "Authorization", "Bearer " + token}
)

func TestAuth(t *testing.T) {
	srv := newTestServer(t, NewHandler(&stubService{}, Options{Token: token}))
	describe := Prefix + "DescribeWorkflow"
	for _, tc := range []struct {
		name, method, path string
		headers            []string
		want               int
	}{
		{"api without a token", "POST", describe, nil, 401},
		{"api with a wrong token", "POST", describe, []string{"Authorization", "Bearer wrong"}, 401},
		{"api with the token as a prefix", "POST", describe, []string{"Authorization", "Bearer " + token + "x"}, 401},
		{"api with a basic credential", "POST", describe, []string{"Authorization", "Basic " + token}, 401},
		{"api with the bare token", "POST", describe, []string{"Authorization", token}, 401},
		{"api with the token", "POST", describe, auth, 200},
		{"unknown api method without a token", "POST", Prefix + "Nope", nil, 401},
		{"healthz without a token", "GET", "/healthz", nil, 200},
		{"metrics without a token", "GET", "/metrics", nil, 401},
		{"metrics with a wrong token", "GET", "/metrics", []string{"Authorization", "Bearer wrong"}, 401},
		{"metrics with the token", "GET", "/metrics", auth, 200},
		{"pprof index without a token", "GET", "/debug/pprof/", nil, 401},
		{"pprof index with the token", "GET", "/debug/pprof/", auth, 200},
		{"pprof heap without a token", "GET", "/debug/pprof/heap", nil, 401},
		{"pprof heap with the token", "GET", "/debug/pprof/heap", auth, 200},
		{"pprof cmdline without a token", "GET", "/debug/pprof/cmdline", nil, 401},
		{"pprof symbol without a token", "GET", "/debug/pprof/symbol", nil, 401},
		{"pprof profile without a token", "GET", "/debug/pprof/profile?seconds=1", nil, 401},
		{"pprof trace without a token", "GET", "/debug/pprof/trace?seconds=1", nil, 401},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, srv, tc.method, tc.path, nil, tc.headers...)
			if r.status != tc.want {
				t.Fatalf("status %d, want %d (body %q)", r.status, tc.want, r.body)
			}
			if tc.want == 401 {
				if eb := r.errorBody(t); eb.Code != api.CodeUnauthenticated {
					t.Fatalf("code %q", eb.Code)
				}
				if !strings.HasPrefix(r.header.Get("WWW-Authenticate"), "Bearer") {
					t.Fatalf("WWW-Authenticate %q", r.header.Get("WWW-Authenticate"))
				}
			}
		})
	}
	if r := do(t, srv, "GET", "/healthz", nil); string(r.body) != "ok\n" {
		t.Fatalf("healthz body %q", r.body)
	}

	// The remote client maps a refused token onto api.ErrUnauthenticated.
	for _, tok := range []string{"", "wrong"} {
		rs, err := client.NewRemoteService(srv.URL, client.DialOptions{Token: tok})
		if err != nil {
			t.Fatal(err)
		}
		_, err = rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "x"})
		if !errors.Is(err, api.ErrUnauthenticated) {
			t.Fatalf("remote call with token %q: %v, want ErrUnauthenticated", tok, err)
		}
	}
}

func TestNoTokenServesOpen(t *testing.T) {
	srv := newTestServer(t, NewHandler(&stubService{}, Options{}))
	for _, path := range []string{"/metrics", "/debug/pprof/", "/healthz"} {
		if r := do(t, srv, "GET", path, nil); r.status != 200 {
			t.Fatalf("GET %s without a configured token: %d", path, r.status)
		}
	}
	if r := do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{}`), "Content-Type", ContentJSON); r.status != 200 {
		t.Fatalf("API without a configured token: %d %q", r.status, r.body)
	}
}

func TestOversizedBody(t *testing.T) {
	stub := &stubService{}
	const limit = 1 << 10
	srv := newTestServer(t, NewHandler(stub, Options{Token: token, MaxBodyBytes: limit}))
	big, _ := json.Marshal(api.StartWorkflowRequest{WorkflowID: "big", Input: api.Payload{Encoding: "json", Data: bytes.Repeat([]byte("x"), 64<<10)}})
	for _, headers := range [][]string{jsonBody, mpBody} {
		r := do(t, srv, "POST", Prefix+"StartWorkflow", big, headers...)
		if r.status != http.StatusRequestEntityTooLarge {
			t.Fatalf("oversized body: status %d (%q), want 413", r.status, r.body)
		}
		eb := r.errorBody(t)
		if eb.Code != api.CodeLimitExceeded || !strings.Contains(eb.Message, fmt.Sprint(limit)) {
			t.Fatalf("oversized body: %+v; want limit_exceeded naming the limit", eb)
		}
		// The server keeps serving.
		if r := do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{"WorkflowID":"after"}`), jsonBody...); r.status != 200 {
			t.Fatalf("request after an oversized one: %d %q", r.status, r.body)
		}
		if m, req := stub.lastCall(); m != "DescribeWorkflow" || req.(*api.DescribeWorkflowRequest).WorkflowID != "after" {
			t.Fatalf("last call %s %+v", m, req)
		}
	}
	// A body exactly at the limit is accepted.
	at := []byte(`{"WorkflowID":"` + strings.Repeat("y", limit-len(`{"WorkflowID":""}`)) + `"}`)
	if len(at) != limit {
		t.Fatalf("body of %d bytes", len(at))
	}
	if r := do(t, srv, "POST", Prefix+"DescribeWorkflow", at, jsonBody...); r.status != 200 {
		t.Fatalf("body at the limit: %d %q", r.status, r.body)
	}

	// Through the remote client: api.ErrLimitExceeded.
	rs, err := client.NewRemoteService(srv.URL, client.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	_, err = rs.StartWorkflow(context.Background(), &api.StartWorkflowRequest{WorkflowID: "big", Input: api.Payload{Data: make([]byte, 64<<10)}})
	if !errors.Is(err, api.ErrLimitExceeded) {
		t.Fatalf("remote oversized start: %v, want ErrLimitExceeded", err)
	}
	if _, err := rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "after"}); err != nil {
		t.Fatalf("remote call after an oversized one: %v", err)
	}
}

// TestOversizedBodyDefaultLimit sends more than the default 4 MiB over one
// connection and checks that the reply arrives and the server goes on.
func TestOversizedBodyDefaultLimit(t *testing.T) {
	srv := newTestServer(t, NewHandler(&stubService{}, Options{Token: token}))
	body := bytes.Repeat([]byte(" "), 5<<20)
	r := do(t, srv, "POST", Prefix+"StartWorkflow", body, jsonBody...)
	if r.status != http.StatusRequestEntityTooLarge || r.errorBody(t).Code != api.CodeLimitExceeded {
		t.Fatalf("5 MiB body: %d %q", r.status, r.body)
	}
	if r := do(t, srv, "POST", Prefix+"DescribeWorkflow", nil, jsonBody...); r.status != 200 {
		t.Fatalf("next request: %d %q", r.status, r.body)
	}
}

func TestMalformedBodies(t *testing.T) {
	stub := &stubService{}
	srv := newTestServer(t, NewHandler(stub, Options{Token: token}))
	for _, tc := range []struct {
		name    string
		headers []string
		body    string
		inMsg   string
	}{
		{"truncated JSON", jsonBody, `{"WorkflowID":`, "malformed"},
		{"JSON of the wrong shape", jsonBody, `["WorkflowID"]`, "malformed"},
		{"JSON field of the wrong type", jsonBody, `{"WorkflowID":42}`, "WorkflowID"},
		{"unknown JSON field", jsonBody, `{"WorkflowID":"x","Workflowid2":"y"}`, "Workflowid2"},
		{"trailing JSON", jsonBody, `{"WorkflowID":"x"} {"WorkflowID":"y"}`, "trailing"},
		{"trailing garbage", jsonBody, `{"WorkflowID":"x"} garbage`, "malformed"},
		{"not JSON at all", jsonBody, "\x00\x01\x02", "malformed"},
		{"truncated msgpack", mpBody, "\x81\xaaWorkflowID\xa5ab", "malformed"},
		{"msgpack of the wrong type", mpBody, "\x81\xaaWorkflowID\x2a", "malformed"},
		{"msgpack reserved byte", mpBody, "\xc1", "malformed"},
		{"JSON sent as msgpack", mpBody, `{"WorkflowID":"x"}`, "malformed"},
		{"no content type, bad JSON", []string{"Authorization", "Bearer " + token}, `{`, "malformed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(tc.body), tc.headers...)
			if r.status != http.StatusBadRequest {
				t.Fatalf("status %d (%q), want 400", r.status, r.body)
			}
			eb := r.errorBody(t)
			if eb.Code != api.CodeInvalidArgument || !strings.Contains(eb.Message, tc.inMsg) {
				t.Fatalf("error %+v, want invalid_argument mentioning %q", eb, tc.inMsg)
			}
		})
	}
	// None of them reached the service, and the server still serves.
	if m, _ := stub.lastCall(); m != "" {
		t.Fatalf("a malformed request reached the service: %s", m)
	}
	if r := do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{"WorkflowID":"fine"}`), jsonBody...); r.status != 200 {
		t.Fatalf("a good request after bad ones: %d %q", r.status, r.body)
	}
	// An empty body is the zero request.
	if r := do(t, srv, "POST", Prefix+"DescribeWorkflow", nil, jsonBody...); r.status != 200 {
		t.Fatalf("empty body: %d %q", r.status, r.body)
	}
	if m, req := stub.lastCall(); m != "DescribeWorkflow" || *req.(*api.DescribeWorkflowRequest) != (api.DescribeWorkflowRequest{}) {
		t.Fatalf("empty body decoded to %s %+v", m, req)
	}
}

func TestRoutingErrors(t *testing.T) {
	srv := newTestServer(t, NewHandler(&stubService{}, Options{Token: token}))
	r := do(t, srv, "POST", Prefix+"NoSuchMethod", []byte(`{}`), jsonBody...)
	if eb := r.errorBody(t); r.status != 404 || eb.Code != api.CodeNotFound || !strings.Contains(eb.Message, "NoSuchMethod") {
		t.Fatalf("unknown method: %d %+v", r.status, eb)
	}
	r = do(t, srv, "POST", Prefix+"describeworkflow", []byte(`{}`), jsonBody...)
	if r.status != 404 {
		t.Fatalf("method names are case-sensitive: %d", r.status)
	}
	for _, m := range []string{"GET", "PUT", "DELETE"} {
		r = do(t, srv, m, Prefix+"DescribeWorkflow", nil, auth...)
		if eb := r.errorBody(t); r.status != 405 || eb.Code != api.CodeInvalidArgument || r.header.Get("Allow") != "POST" {
			t.Fatalf("%s: %d %+v Allow %q", m, r.status, eb, r.header.Get("Allow"))
		}
	}
	for _, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml", "bad/content/type;;"} {
		r = do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{}`), "Content-Type", ct, "Authorization", "Bearer "+token)
		if eb := r.errorBody(t); r.status != 415 || eb.Code != api.CodeInvalidArgument {
			t.Fatalf("Content-Type %q: %d %+v", ct, r.status, eb)
		}
	}
	// Parameters on a supported type are fine.
	r = do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{}`), "Content-Type", "application/json; charset=utf-8", "Authorization", "Bearer "+token)
	if r.status != 200 {
		t.Fatalf("application/json; charset=utf-8: %d %q", r.status, r.body)
	}
}

// TestEveryMethodIsRouted checks that the routes cover api.Service exactly,
// that each route calls its own method, and that the remote client's
// methods reach the same names.
func TestEveryMethodIsRouted(t *testing.T) {
	svcType := reflect.TypeFor[api.Service]()
	var want []string
	for i := range svcType.NumMethod() {
		want = append(want, svcType.Method(i).Name)
	}
	got := Methods()
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("routes %v\nservice methods %v", got, want)
	}

	stub := &stubService{}
	srv := newTestServer(t, NewHandler(stub, Options{Token: token}))
	for _, m := range want {
		if r := do(t, srv, "POST", Prefix+m, []byte(`{}`), jsonBody...); r.status != 200 {
			t.Fatalf("%s: %d %q", m, r.status, r.body)
		}
		if called, _ := stub.lastCall(); called != m {
			t.Fatalf("POST %s called %s", m, called)
		}
	}

	rs, err := client.NewRemoteService(srv.URL, client.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	rv := reflect.ValueOf(rs)
	for _, m := range want {
		method := rv.MethodByName(m)
		reqType := method.Type().In(1).Elem()
		req := reflect.New(reqType)
		marker := "marker-" + m
		if !setMarker(req.Elem(), marker) {
			t.Fatalf("%s: no field to mark in %s", m, reqType)
		}
		out := method.Call([]reflect.Value{reflect.ValueOf(context.Background()), req})
		if err, _ := out[1].Interface().(error); err != nil {
			t.Fatalf("remote %s: %v", m, err)
		}
		if out[0].IsNil() {
			t.Fatalf("remote %s returned a nil response", m)
		}
		called, got := stub.lastCall()
		if called != m {
			t.Fatalf("remote %s called %s", m, called)
		}
		if !findMarker(reflect.ValueOf(got).Elem(), marker) {
			t.Fatalf("remote %s: request %+v lost its marker", m, got)
		}
	}
}

// setMarker sets the first string or []byte field of the struct v.
func setMarker(v reflect.Value, marker string) bool {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			f.SetString(marker)
			return true
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
			f.SetBytes([]byte(marker))
			return true
		case markable(f.Type()):
			return setMarker(f, marker)
		}
	}
	return false
}

// markable says whether a struct type has an exported field a marker can
// go in (a request whose first such field is nested, as SetActivityLimit's).
func markable(t reflect.Type) bool {
	if t.Kind() != reflect.Struct {
		return false
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if f.IsExported() && (f.Type.Kind() == reflect.String || f.Type.Kind() == reflect.Slice && f.Type.Elem().Kind() == reflect.Uint8 ||
			markable(f.Type)) {
			return true
		}
	}
	return false
}

func findMarker(v reflect.Value, marker string) bool {
	for i := range v.NumField() {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.String:
			return f.String() == marker
		case f.Kind() == reflect.Slice && f.Type().Elem().Kind() == reflect.Uint8:
			return string(f.Bytes()) == marker
		case markable(f.Type()):
			return findMarker(f, marker)
		}
	}
	return false
}

// TestErrorCodes maps every error the service may return onto its code and
// HTTP status, and checks that the remote client rebuilds the same error.
func TestErrorCodes(t *testing.T) {
	stub := &stubService{}
	srv := newTestServer(t, NewHandler(stub, Options{Token: token}))
	rs, err := client.NewRemoteService(srv.URL, client.DialOptions{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		err    error
		code   api.Code
		status int
	}{
		{api.ErrNotFound, api.CodeNotFound, 404},
		{api.ErrAlreadyStarted, api.CodeAlreadyStarted, 409},
		{api.ErrInvalidArgument, api.CodeInvalidArgument, 400},
		{api.ErrLimitExceeded, api.CodeLimitExceeded, 422},
		{api.ErrStaleTask, api.CodeStaleTask, 409},
		{api.ErrStaleAttempt, api.CodeStaleAttempt, 409},
		{api.ErrWorkflowClosed, api.CodeWorkflowClosed, 409},
		{api.ErrNotPaused, api.CodeNotPaused, 409},
		{api.ErrQueryFailed, api.CodeQueryFailed, 422},
		{api.ErrUnavailable, api.CodeUnavailable, 503},
		{api.ErrUnauthenticated, api.CodeUnauthenticated, 401},
		{api.ErrResourceExhausted, api.CodeResourceExhausted, 507},
		{api.ErrInternal, api.CodeInternal, 500},
		{api.ErrDataCorrupt, api.CodeDataCorrupt, 500},
		{errors.New("an error the contract does not name"), api.CodeInternal, 500},
		{context.DeadlineExceeded, api.CodeDeadlineExceeded, 504},
		{context.Canceled, api.CodeCanceled, 499},
	} {
		t.Run(string(tc.code)+"/"+tc.err.Error(), func(t *testing.T) {
			wrapped := fmt.Errorf("%w: details of workflow %q", tc.err, "wf-1")
			stub.setErr(wrapped)
			if got := StatusOf(tc.code); got != tc.status {
				t.Fatalf("StatusOf(%q) = %d, want %d", tc.code, got, tc.status)
			}
			for _, headers := range [][]string{jsonBody, append(slices.Clone(mpBody), "Accept", ContentMsgpack)} {
				body := []byte(`{}`)
				if headers[1] == ContentMsgpack {
					body, _ = msgpack.Marshal(&api.DescribeWorkflowRequest{})
				}
				r := do(t, srv, "POST", Prefix+"DescribeWorkflow", body, headers...)
				if r.status != tc.status {
					t.Fatalf("status %d, want %d", r.status, tc.status)
				}
				eb := r.errorBody(t)
				if eb.Code != tc.code || eb.Message != wrapped.Error() {
					t.Fatalf("error body %+v, want code %q message %q", eb, tc.code, wrapped.Error())
				}
			}
			// The remote client returns an error matching the same sentinel,
			// with the server's message.
			_, err := rs.DescribeWorkflow(context.Background(), &api.DescribeWorkflowRequest{WorkflowID: "wf-1"})
			if !errors.Is(err, tc.err) && !(tc.code == api.CodeInternal && errors.Is(err, api.ErrInternal)) {
				t.Fatalf("remote error %v does not match %v", err, tc.err)
			}
			if !strings.Contains(err.Error(), `details of workflow "wf-1"`) {
				t.Fatalf("remote error %q lost the server's message", err)
			}
			if tc.code != api.CodeDeadlineExceeded && tc.code != api.CodeCanceled && api.ErrorCode(err) != tc.code {
				t.Fatalf("remote error code %q, want %q", api.ErrorCode(err), tc.code)
			}
		})
	}
}

func TestJSONForPeople(t *testing.T) {
	eng := openEngine(t)
	srv := newTestServer(t, NewHandler(eng, Options{Token: token}))
	// What a person types: JSON in, JSON out.
	r := do(t, srv, "POST", Prefix+"StartWorkflow", []byte(`{
		"WorkflowID": "invoice-INV-9",
		"WorkflowType": "PayInvoice",
		"TaskQueue": "agents",
		"Input": {"encoding": "json", "data": "eyJpbnZvaWNlIjoiSU5WLTkifQ=="}
	}`), jsonBody...)
	if r.status != 200 || r.header.Get("Content-Type") != ContentJSON {
		t.Fatalf("start: %d %s %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	var started struct {
		RunID   string
		Started bool
	}
	if err := json.Unmarshal(r.body, &started); err != nil || started.RunID == "" || !started.Started {
		t.Fatalf("start reply %q: %v", r.body, err)
	}

	r = do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{"WorkflowID":"invoice-INV-9"}`), jsonBody...)
	if r.status != 200 || r.header.Get("Content-Type") != ContentJSON {
		t.Fatalf("describe: %d %q", r.status, r.body)
	}
	var d api.DescribeWorkflowResponse
	if err := json.Unmarshal(r.body, &d); err != nil {
		t.Fatalf("describe reply %q: %v", r.body, err)
	}
	if d.Info.WorkflowID != "invoice-INV-9" || d.Info.RunID != started.RunID || d.Info.Status != api.StatusRunning ||
		d.Info.WorkflowType != "PayInvoice" || d.Info.TaskQueue != "agents" {
		t.Fatalf("describe: %+v", d.Info)
	}

	r = do(t, srv, "POST", Prefix+"SignalWorkflow", []byte(`{"WorkflowID":"invoice-INV-9","SignalName":"approve"}`), jsonBody...)
	if r.status != 200 || string(bytes.TrimSpace(r.body)) != "{}" {
		t.Fatalf("signal: %d %q", r.status, r.body)
	}

	r = do(t, srv, "POST", Prefix+"GetHistory", []byte(`{"WorkflowID":"invoice-INV-9"}`), jsonBody...)
	if r.status != 200 {
		t.Fatalf("history: %d %q", r.status, r.body)
	}
	// Events read as the export format: a type name and named attributes.
	var raw struct {
		Events []map[string]any
	}
	if err := json.Unmarshal(r.body, &raw); err != nil || len(raw.Events) != 2 {
		t.Fatalf("history reply %q: %v", r.body, err)
	}
	if raw.Events[0]["type"] != "WorkflowStarted" || raw.Events[1]["type"] != "SignalReceived" {
		t.Fatalf("event types %v, %v", raw.Events[0]["type"], raw.Events[1]["type"])
	}
	attrs, _ := raw.Events[0]["attributes"].(map[string]any)
	input, _ := attrs["input"].(map[string]any)
	if attrs["workflowType"] != "PayInvoice" || attrs["taskQueue"] != "agents" || input["encoding"] != "json" {
		t.Fatalf("WorkflowStarted attributes %v", attrs)
	}
	if in, _ := input["json"].(map[string]any); in["invoice"] != "INV-9" {
		t.Fatalf("input shown as %v, want the JSON value", input)
	}
	// And they decode back into typed events.
	var h api.GetHistoryResponse
	if err := json.Unmarshal(r.body, &h); err != nil {
		t.Fatal(err)
	}
	if h.RunID != started.RunID || h.NextEventID != 3 || h.Closed || len(h.Events) != 2 {
		t.Fatalf("history: %+v", h)
	}
	if ws, ok := h.Events[0].Attrs.(*history.WorkflowStarted); !ok || ws.WorkflowType != "PayInvoice" {
		t.Fatalf("event 1: %+v", h.Events[0])
	}
	if sr, ok := h.Events[1].Attrs.(*history.SignalReceived); !ok || sr.Name != "approve" {
		t.Fatalf("event 2: %+v", h.Events[1])
	}

	// An engine error reads as JSON too.
	r = do(t, srv, "POST", Prefix+"StartWorkflow", []byte(`{"WorkflowID":"invoice-INV-9","WorkflowType":"PayInvoice","TaskQueue":"agents"}`), jsonBody...)
	if eb := r.errorBody(t); r.status != 409 || eb.Code != api.CodeAlreadyStarted || !strings.Contains(eb.Message, "invoice-INV-9") {
		t.Fatalf("second start: %d %+v", r.status, eb)
	}
	r = do(t, srv, "POST", Prefix+"TerminateWorkflow", []byte(`{"WorkflowID":"invoice-INV-9","Reason":"test"}`), jsonBody...)
	if r.status != 200 {
		t.Fatalf("terminate: %d %q", r.status, r.body)
	}
	r = do(t, srv, "POST", Prefix+"GetResult", []byte(`{"WorkflowID":"invoice-INV-9","Wait":true}`), jsonBody...)
	var res api.GetResultResponse
	if err := json.Unmarshal(r.body, &res); err != nil || r.status != 200 || !res.Closed || res.Status != api.StatusTerminated || res.Failure == nil {
		t.Fatalf("result: %d %q (%v)", r.status, r.body, err)
	}
}

func TestContentNegotiation(t *testing.T) {
	stub := &stubService{}
	srv := newTestServer(t, NewHandler(stub, Options{Token: token}))
	mp, _ := msgpack.Marshal(&api.DescribeWorkflowRequest{WorkflowID: "neg"})
	for _, tc := range []struct {
		name    string
		body    []byte
		headers []string
		want    string
	}{
		{"JSON in, JSON out", []byte(`{"WorkflowID":"neg"}`), jsonBody, ContentJSON},
		{"msgpack in, msgpack out", mp, mpBody, ContentMsgpack},
		{"no content type is JSON", []byte(`{"WorkflowID":"neg"}`), auth, ContentJSON},
		{"JSON in, msgpack accepted", []byte(`{"WorkflowID":"neg"}`), append(slices.Clone(jsonBody), "Accept", ContentMsgpack), ContentMsgpack},
		{"msgpack in, JSON accepted", mp, append(slices.Clone(mpBody), "Accept", ContentJSON), ContentJSON},
		{"msgpack in, any accepted", mp, append(slices.Clone(mpBody), "Accept", "*/*"), ContentMsgpack},
		{"JSON in, a list accepted", []byte(`{"WorkflowID":"neg"}`), append(slices.Clone(jsonBody), "Accept", "text/html, application/msgpack;q=0.9"), ContentMsgpack},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := do(t, srv, "POST", Prefix+"DescribeWorkflow", tc.body, tc.headers...)
			if r.status != 200 || r.header.Get("Content-Type") != tc.want {
				t.Fatalf("%d %s %q, want %s", r.status, r.header.Get("Content-Type"), r.body, tc.want)
			}
			var resp api.DescribeWorkflowResponse
			var err error
			if tc.want == ContentJSON {
				err = json.Unmarshal(r.body, &resp)
			} else {
				err = msgpack.Unmarshal(r.body, &resp)
			}
			if err != nil {
				t.Fatalf("decoding the %s reply: %v", tc.want, err)
			}
			if _, req := stub.lastCall(); req.(*api.DescribeWorkflowRequest).WorkflowID != "neg" {
				t.Fatalf("request decoded as %+v", req)
			}
		})
	}
}

func TestMetricsCountRequests(t *testing.T) {
	stub := &stubService{}
	srv := newTestServer(t, NewHandler(stub, Options{Token: token}))
	do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{}`), jsonBody...)
	stub.setErr(api.Errorf(api.ErrNotFound, "workflow %q", "x"))
	do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{}`), jsonBody...)
	do(t, srv, "POST", Prefix+"DescribeWorkflow", []byte(`{}`), jsonBody...)
	r := do(t, srv, "GET", "/metrics", nil, auth...)
	if r.status != 200 {
		t.Fatalf("metrics: %d", r.status)
	}
	for _, line := range []string{
		`cairn_api_requests_total{code="ok",method="DescribeWorkflow"} 1`,
		`cairn_api_requests_total{code="not_found",method="DescribeWorkflow"} 2`,
		`cairn_api_request_seconds_count{method="DescribeWorkflow"} 3`,
		`go_goroutines `,
	} {
		if !bytes.Contains(r.body, []byte(line)) {
			t.Errorf("metrics lack %q", line)
		}
	}
}

// The API's / points to the web UI, when there is one.
func TestRootPointsToTheUI(t *testing.T) {
	for url, want := range map[string]string{"http://127.0.0.1:8233/": "The web UI is at http://127.0.0.1:8233/", "": "no web UI"} {
		srv := newTestServer(t, NewHandler(&stubService{}, Options{UIURL: url}))
		resp, err := http.Get(srv.URL + "/")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Fatalf("GET / with UIURL %q: %d %q", url, resp.StatusCode, b)
		}
	}
}
