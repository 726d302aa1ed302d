package ui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/sdk/client"
)

// A request for the API's paths — a client given the UI's address — is
// answered 421 with where the API is; an API listening on every interface
// is named by the host the request came to.
func TestTheUITellsWhereTheAPIIs(t *testing.T) {
	eng := newEngine(t)
	for _, c := range []struct{ listen, want string }{
		{"127.0.0.1:7233", "127.0.0.1:7233"},
		{"0.0.0.0:7301", "localhost:7301"},
		{"https://[::]:7302", "https://localhost:7302"},
	} {
		h := New(eng, Options{APIAddress: c.listen})
		for _, req := range []*http.Request{
			httptest.NewRequest("GET", "http://localhost:8233/api/v1/session", nil),
			httptest.NewRequest("POST", "http://localhost:8233/api/v1/DescribeWorkflow", strings.NewReader("{}")),
		} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code != http.StatusMisdirectedRequest || rec.Header().Get(client.UIAPIAddressHeader) != c.want ||
				!strings.Contains(rec.Body.String(), "the API is on "+c.want) {
				t.Errorf("%s %s (API on %s): %d %q %s", req.Method, req.URL.Path, c.listen, rec.Code, rec.Header().Get(client.UIAPIAddressHeader), rec.Body)
			}
		}
	}
}
