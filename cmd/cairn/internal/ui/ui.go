// Package ui is Cairn's web UI: the runs, a run's history and pending work,
// the runs waiting for a person and the forms that decide them (resolve an
// unknown outcome, raise a budget, approve or reject an agent's tool call), the
// effects ledger, the task queues and their workers, the servers of a
// cluster and who serves which shard, the agent's conversation, and two
// runs side by side (where they diverge, what each did) —
// served by `cairn server` and `cairn dev` on a listener of
// their own, from files embedded in the binary (plain HTML, CSS and
// JavaScript modules: no build step, no Node toolchain).
//
//	h := ui.New(eng, ui.Options{Token: token})  // any api.Service: the engine, or a remote one
//	srv := &http.Server{Addr: "127.0.0.1:8233", Handler: h}
//
// The UI talks to the engine only through api.Service. Its pages load JSON
// from /api/… (internal/view's convention, the CLI's --json) and follow a
// run live over server-sent events (/api/stream/run).
//
// Auth is the API's: with a Token, a person signs in with it once (POST
// /login) and then carries an HttpOnly, SameSite=Strict session cookie
// signed with the token; without one (a loopback listener) nobody signs
// in, but the UI answers only requests addressed to a loopback name, so a
// web page elsewhere cannot reach it through DNS rebinding. Every action
// (signal, cancel, terminate, resolve, budget, approve) is a POST with a
// JSON body and an X-Cairn-CSRF header carrying a token the page reads
// from /api/session: a cross-site form or script can send neither.
package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/base64"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
)

//go:embed static
var staticFiles embed.FS

// Options configure the UI.
type Options struct {
	// Token, when set, is required: the sign-in form asks for it.
	Token string
	// Secure marks the session cookie Secure (set it when serving TLS).
	Secure bool
	// SessionTTL is how long a sign-in lasts (default 12 h).
	SessionTTL time.Duration
	// Logger receives request errors (default: discarded).
	Logger *zerolog.Logger
	// Now is the clock of session expiry (default time.Now).
	Now func() time.Time
	// APIAddress is where the server's API listens (host:port, or an
	// https:// URL), which the UI tells a client that mistook it for the
	// API: a request for the API's paths (/api/v1/…) is answered 421 with
	// the address, in the body and in client.UIAPIAddressHeader.
	APIAddress string
}

// Handler serves the UI.
type Handler struct {
	svc    api.Service
	opts   Options
	log    zerolog.Logger
	mux    *http.ServeMux
	key    []byte // signs session cookies and CSRF tokens
	static http.Handler
}

// cookieName is the session cookie's name.
const cookieName = "cairn_ui"

// New returns the UI's handler over svc.
func New(svc api.Service, opts Options) *Handler {
	if opts.SessionTTL <= 0 {
		opts.SessionTTL = 12 * time.Hour
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		l := zerolog.Nop()
		opts.Logger = &l
	}
	h := &Handler{svc: svc, opts: opts, log: *opts.Logger, mux: http.NewServeMux()}
	if opts.Token != "" {
		sum := sha256.Sum256([]byte("cairn-ui-session\x00" + opts.Token))
		h.key = sum[:]
	} else {
		h.key = make([]byte, 32)
		_, _ = rand.Read(h.key) // CSRF tokens of this process only
	}
	sub, _ := fs.Sub(staticFiles, "static") // the directory is embedded: cannot fail
	h.static = http.StripPrefix("/static/", http.FileServer(http.FS(sub)))
	h.routes()
	return h
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'")
	if h.opts.Token == "" && !loopbackHost(r.Host) {
		http.Error(w, "this UI answers only on a loopback address (127.0.0.1, localhost): start the server with a token to reach it from elsewhere", http.StatusForbidden)
		return
	}
	h.mux.ServeHTTP(w, r)
}

// pages are the paths that load the app (it routes in the browser).
var pages = []string{"/", "/runs", "/runs/", "/paused", "/effects", "/queues", "/cluster", "/agent/", "/compare", "/schedules", "/schedules/"}

func (h *Handler) routes() {
	for _, p := range pages {
		h.mux.Handle("GET "+p, h.signedIn(http.HandlerFunc(h.serveApp)))
	}
	h.mux.Handle("GET /static/", h.static)
	h.mux.HandleFunc("GET /login", h.serveLogin)
	h.mux.HandleFunc("POST /login", h.login)
	h.mux.HandleFunc("POST /logout", h.logout)
	h.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
	h.mux.HandleFunc("GET "+api.HTTPPrefix, h.notTheAPI)
	h.mux.HandleFunc("POST "+api.HTTPPrefix, h.notTheAPI)
	h.apiRoutes()
}

// notTheAPI answers a request meant for the API (a client given the UI's
// address): 421, and where the API is.
func (h *Handler) notTheAPI(w http.ResponseWriter, r *http.Request) {
	msg := "This is Cairn's web UI, not its API."
	if a := h.apiAddress(r); a != "" {
		w.Header().Set(client.UIAPIAddressHeader, a)
		msg = "This is Cairn's web UI; the API is on " + a + " (cairn … --address " + a + ")."
	}
	http.Error(w, msg, http.StatusMisdirectedRequest)
}

// apiAddress is Options.APIAddress as a client of r reaches it: an
// unspecified host (0.0.0.0, ::) becomes the host r was addressed to.
func (h *Handler) apiAddress(r *http.Request) string {
	a := h.opts.APIAddress
	scheme, hostport := "", a
	if i := strings.Index(a, "://"); i >= 0 {
		scheme, hostport = a[:i+3], a[i+3:]
	}
	host, port, err := net.SplitHostPort(hostport)
	if err != nil {
		return a
	}
	if ip := net.ParseIP(host); host == "" || ip != nil && ip.IsUnspecified() {
		reqHost := r.Host
		if hh, _, err := net.SplitHostPort(r.Host); err == nil {
			reqHost = hh
		}
		return scheme + net.JoinHostPort(strings.Trim(reqHost, "[]"), port)
	}
	return a
}

func (h *Handler) serveApp(w http.ResponseWriter, r *http.Request) {
	b, err := staticFiles.ReadFile("static/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(b)
}

// loopbackHost reports whether a Host header names this machine by a
// loopback name or address.
func loopbackHost(hostport string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if host == "localhost" || strings.HasSuffix(host, ".localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// session returns the valid session cookie's value, or "".
func (h *Handler) session(r *http.Request) string {
	c, err := r.Cookie(cookieName)
	if err != nil {
		return ""
	}
	parts := strings.Split(c.Value, ".")
	if len(parts) != 3 || parts[0] != "v1" {
		return ""
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || h.opts.Now().Unix() >= exp {
		return ""
	}
	if !hmac.Equal([]byte(parts[2]), []byte(h.sign("session", parts[1]))) {
		return ""
	}
	return c.Value
}

func (h *Handler) sign(purpose, msg string) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(purpose + "\x00" + msg))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// authorized reports whether the request may see the UI: no token is set,
// the session cookie is valid, or it carries the bearer token (scripts).
func (h *Handler) authorized(r *http.Request) bool {
	if h.opts.Token == "" || h.session(r) != "" {
		return true
	}
	got := []byte(r.Header.Get("Authorization"))
	return subtle.ConstantTimeCompare(got, []byte("Bearer "+h.opts.Token)) == 1
}

// csrfToken is the token actions must carry: bound to the session (or, with
// no token, to this process).
func (h *Handler) csrfToken(r *http.Request) string {
	return h.sign("csrf", h.session(r))
}

// signedIn sends a person who is not signed in to the sign-in form.
func (h *Handler) signedIn(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			http.Redirect(w, r, "/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// sameOrigin reports whether a state-changing request comes from this
// origin: its Origin header, when sent, must name this host.
func sameOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return r.Header.Get("Sec-Fetch-Site") == "" || r.Header.Get("Sec-Fetch-Site") == "same-origin"
	}
	u, err := url.Parse(o)
	return err == nil && u.Host == r.Host
}

const loginPage = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Sign in · Cairn</title><link rel="stylesheet" href="/static/style.css"></head>
<body class="login"><main class="login-box">
<h1><span class="logo" aria-hidden="true">▲</span> Cairn</h1>
<form method="post" action="/login">
<input type="hidden" name="next" value="%s">
<label for="token">Server token</label>
<input id="token" name="token" type="password" autocomplete="current-password" autofocus required>
%s
<button type="submit">Sign in</button>
</form>
<p class="hint">The token is the server's (its --token-file, or CAIRN_TOKEN).</p>
</main></body></html>`

func (h *Handler) serveLogin(w http.ResponseWriter, r *http.Request) {
	h.loginForm(w, r.URL.Query().Get("next"), "", http.StatusOK)
}

func (h *Handler) loginForm(w http.ResponseWriter, next, msg string, status int) {
	if msg != "" {
		msg = `<p class="error" role="alert">` + htmlEscape(msg) + `</p>`
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	fmt.Fprintf(w, loginPage, htmlEscape(safeNext(next)), msg)
}

// safeNext keeps a redirect target on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.HasPrefix(next, "/\\") {
		return "/"
	}
	return next
}

func (h *Handler) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site sign-in refused", http.StatusForbidden)
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 64<<10)
	if err := r.ParseForm(); err != nil {
		h.loginForm(w, "/", "malformed form", http.StatusBadRequest)
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	if h.opts.Token == "" {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("token")), []byte(h.opts.Token)) != 1 {
		h.loginForm(w, next, "That is not the server's token.", http.StatusUnauthorized)
		return
	}
	exp := strconv.FormatInt(h.opts.Now().Add(h.opts.SessionTTL).Unix(), 10)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "v1." + exp + "." + h.sign("session", exp), Path: "/",
		HttpOnly: true, Secure: h.opts.Secure, SameSite: http.SameSiteStrictMode, MaxAge: int(h.opts.SessionTTL.Seconds())})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		http.Error(w, "cross-site sign-out refused", http.StatusForbidden)
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, Secure: h.opts.Secure,
		SameSite: http.SameSiteStrictMode, MaxAge: -1})
	http.Redirect(w, r, "/login", http.StatusSeeOther)
}

func htmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#39;")
	return r.Replace(s)
}
