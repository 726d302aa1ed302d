package main

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/cmd/cairn/internal/ui"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
)

// The web UI's address given as --address: the error says so and where
// the API is, in a line (it dumped the UI's 2 KB page); any other web page
// is named as one.
func TestUIAddressGivenAsTheAPI(t *testing.T) {
	s := newTestServer(t, false)
	uiSrv := httptest.NewServer(ui.New(s.eng, ui.Options{APIAddress: s.addr}))
	t.Cleanup(uiSrv.Close)
	page := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		_, _ = w.Write([]byte("<!doctype html><html><body>" + strings.Repeat("<p>a web app</p>", 200) + "</body></html>"))
	}))
	t.Cleanup(page.Close)
	for _, c := range []struct {
		addr, says string
	}{
		{uiSrv.URL, "is Cairn's web UI; the API is on " + s.addr + " (use --address " + s.addr},
		{page.URL, "answered HTTP 200 with a web page, not Cairn's API"},
	} {
		var out, errb bytes.Buffer
		code := cli([]string{"workflow", "list", "--address", c.addr}, strings.NewReader(""), &out, &errb)
		errs := errb.String()
		if code != 1 || !strings.Contains(errs, c.says) || strings.Contains(errs, "<") || len(errs) > 400 {
			t.Errorf("--address %s: exit %d, %d bytes: %s", c.addr, code, len(errs), errs)
		}
	}
	cl, err := client.Dial(uiSrv.URL, client.Options{}, client.DialOptions{})
	check(t, err)
	defer cl.Close()
	_, err = cl.DescribeWorkflow(context.Background(), "x", "")
	if !errors.Is(err, client.ErrNotTheAPI) || !errors.Is(err, api.ErrInvalidArgument) {
		t.Fatalf("a client dialing the UI: %v", err)
	}
}
