package client_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/client/clienttest"
)

const testToken = "conformance-token"

// TestMain says in one line when the Postgres suites were skipped.
func TestMain(m *testing.M) { pgtest.Main(m) }

// openEngine returns a fresh engine over an in-memory Badger store, or
// with CAIRN_TEST_STORE=postgres over a schema of the test's own, serving
// every shard under a lease (internal/storetest); closed when the test
// ends.
func openEngine(t *testing.T) *engine.Engine {
	t.Helper()
	// A short drift margin: the suite makes attempts lose their lease and
	// does not wait the default's seconds for the next one.
	opts := engine.Options{LeaseDriftMargin: 50 * time.Millisecond}
	st, owner := storetest.Embedded(t, "clienttest") // closed by its own cleanup, after the engine's
	if st == nil {
		mem, err := badgerstore.Open(badgerstore.Options{InMemory: true, MemTableSize: 8 << 20, BlockCacheSize: 1 << 20, IndexCacheSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := mem.Close(); err != nil {
				t.Errorf("store close: %v", err)
			}
		})
		st = mem
	} else {
		opts.Shards = owner
	}
	opts.Store = st
	eng, err := engine.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := eng.Close(); err != nil {
			t.Errorf("engine close: %v", err)
		}
	})
	if owner != nil {
		if err := eng.Acquire(context.Background(), owner.All()); err != nil {
			t.Fatalf("acquire the shards: %v", err)
		}
	}
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
