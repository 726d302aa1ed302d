package llm_test

import (
	"net"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/history"
)

// closedURL is a loopback endpoint nothing listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return "http://" + addr + "/v1"
}

// hangUpURL is a loopback endpoint that accepts connections and closes
// them without an answer.
func hangUpURL(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.Close()
		}
	}()
	return "http://" + ln.Addr().String() + "/v1"
}

// An endpoint that refuses the connection, or hangs up without an answer,
// is unavailable — retried, and said so — not a malformed answer.
func TestUnreachableEndpointIsUnavailable(t *testing.T) {
	chunks := history.MemChunks{}
	for _, c := range []struct {
		name, url string
	}{
		{"refused", closedURL(t)},
		{"hung up", hangUpURL(t)},
	} {
		for _, stream := range []bool{false, true} {
			in := transcript(t, chunks, []history.TranscriptEntry{settings(stream), msg("user", "hi")})
			m, err := llm.New(llm.Config{BaseURL: c.url, RequestTimeout: 30 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			r := &recorder{}
			_, err = chat(m, r.ctx(chunks), in)
			app := appErr(t, err)
			if app.Type != llm.FailureUnavailable || app.NonRetryable || !strings.Contains(app.Message, "unreachable") {
				t.Errorf("%s (stream %v): %s: %q (non-retryable %v)", c.name, stream, app.Type, app.Message, app.NonRetryable)
			}
		}
	}
}
