package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
)

// engineWithPayloadLimit returns an engine whose payload limit is limit.
func engineWithPayloadLimit(t *testing.T, limit int) *engine.Engine {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true, MemTableSize: 8 << 20, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st, Limits: engine.Limits{MaxPayloadBytes: limit}})
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

// TestOversizedInputNamesThePayloadLimit: an input too large for the
// request to be read (5 MB, over the 4 MiB a request may have) is refused
// as limit_exceeded naming the engine's payload limit and the request's
// size — over plain requests (JSON and msgpack) and over a session — not
// as a transport limit the caller cannot know about.
func TestOversizedInputNamesThePayloadLimit(t *testing.T) {
	for _, limit := range []int{0, 1 << 20} { // the default (2 MiB), and an engine configured otherwise
		eng := engineWithPayloadLimit(t, limit)
		want := limit
		if want == 0 {
			want = 2 << 20
		}
		h := NewHandler(eng, Options{Token: token})
		req := api.StartWorkflowRequest{WorkflowID: "big", WorkflowType: "W", TaskQueue: "q",
			Input: history.Payload{Encoding: "json", Data: bytes.Repeat([]byte("x"), 5_000_000)}}
		check := func(how, msg string, size int) {
			t.Helper()
			for _, part := range []string{"payload too large: the request is ", fmt.Sprintf(
				", and a payload may be at most %d bytes (the engine's Limits.MaxPayloadBytes", want)} {
				if !strings.Contains(msg, part) {
					t.Errorf("payload limit %d, %s: %q, want it to contain %q", want, how, msg, part)
				}
			}
			if size >= 0 && !strings.Contains(msg, fmt.Sprintf("the request is %d bytes", size)) {
				t.Errorf("payload limit %d, %s: %q does not give the request's size %d", want, how, msg, size)
			}
		}
		srv := newTestServer(t, h)
		jsonReq, _ := json.Marshal(req)
		mpReq, _ := msgpack.Marshal(&req)
		for _, c := range []struct {
			name    string
			body    []byte
			headers []string
		}{{"JSON request", jsonReq, jsonBody}, {"msgpack request", mpReq, mpBody}} {
			r := do(t, srv, "POST", Prefix+"StartWorkflow", c.body, c.headers...)
			eb := r.errorBody(t)
			if r.status != http.StatusRequestEntityTooLarge || eb.Code != api.CodeLimitExceeded {
				t.Fatalf("%s: %d %+v, want 413 limit_exceeded", c.name, r.status, eb)
			}
			check(c.name, eb.Message, len(c.body))
		}
		addr, _ := sessionServer(t, h)
		_, err := remote(t, addr).StartWorkflow(context.Background(), &req)
		if !errors.Is(err, api.ErrLimitExceeded) {
			t.Fatalf("session: %v, want ErrLimitExceeded", err)
		}
		check("session", err.Error(), -1)
		c, err := client.NewRemoteService(addr, client.DialOptions{Token: token, PlainHTTP: true})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.StartWorkflow(context.Background(), &req)
		_ = c.Close()
		if !errors.Is(err, api.ErrLimitExceeded) {
			t.Fatalf("plain client: %v, want ErrLimitExceeded", err)
		}
		check("plain client", err.Error(), -1)
	}
}
