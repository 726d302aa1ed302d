package client_test

import (
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/client/clienttest"
)

const testToken = "conformance-token"

// openEngine returns a fresh engine over an in-memory Badger store, closed
// when the test ends.
func openEngine(t *testing.T) *engine.Engine {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true, MemTableSize: 8 << 20, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	// A short drift margin: the suite makes attempts lose their lease and
	// does not wait the default's seconds for the next one.
	eng, err := engine.Open(engine.Options{Store: st, LeaseDriftMargin: 50 * time.Millisecond})
	if err != nil {
		_ = st.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
		if err := st.Close(); err != nil {
			t.Errorf("store close: %v", err)
		}
	})
	return eng
}

func waitingPollers(eng *engine.Engine) func(string) int {
	return func(queue string) int {
		_, _, wft, _ := eng.QueueDepths(queue)
		return wft
	}
}

// TestConformanceLocal runs the suite over an embedded engine.
func TestConformanceLocal(t *testing.T) {
	clienttest.Run(t, func(t *testing.T) clienttest.Env {
		eng := openEngine(t)
		return clienttest.Env{Client: client.NewLocal(eng, client.Options{}), WaitingPollers: waitingPollers(eng)}
	})
}

// TestConformanceHTTP runs the same suite over the network: client.Dial
// against the engine served by engine/httpapi, with bearer-token auth, on
// the multiplexed session (the default) and with a plain HTTP request per
// call.
func TestConformanceHTTP(t *testing.T) {
	t.Run("session", func(t *testing.T) { conformanceRemote(t, false) })
	t.Run("plain", func(t *testing.T) { conformanceRemote(t, true) })
}

func conformanceRemote(t *testing.T, plain bool) {
	clienttest.Run(t, func(t *testing.T) clienttest.Env {
		eng := openEngine(t)
		srv := httptest.NewServer(httpapi.NewHandler(eng, httpapi.Options{Token: testToken}))
		c, err := client.Dial(srv.URL, client.Options{}, client.DialOptions{Token: testToken, PlainHTTP: plain})
		if err != nil {
			t.Fatal(err)
		}
		// Runs before the engine's cleanup (registered earlier).
		t.Cleanup(func() {
			_ = c.Close()
			srv.CloseClientConnections()
			srv.Close()
		})
		return clienttest.Env{Client: c, WaitingPollers: waitingPollers(eng)}
	})
}
