package crash_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/internal/crashpoint"
	"github.com/cairnflow/cairn/sdk/client"
)

// node is one life of the engine in this process.
type node struct {
	st   *badgerstore.Store
	fs   *faultstore.Store
	eng  *engine.Engine
	c    client.Client
	stop func()
}

func engineOptions(st *faultstore.Store) engine.Options {
	return engine.Options{Store: st, PollTimeout: 5 * time.Second, Defaults: engine.Defaults{StickyTimeout: 100 * time.Millisecond,
		RetryInitialInterval: 20 * time.Millisecond}}
}

// boot opens the store and the engine over dir and starts a worker; an
// engine that cannot open (it died at a point inside Open) is nil. opened,
// if set, gets the node before the engine opens.
func boot(t *testing.T, dir string, p *provider, opened func(*node)) *node {
	t.Helper()
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	n := &node{st: st, fs: faultstore.New(st)}
	if opened != nil {
		opened(n)
	}
	if n.eng, err = engine.Open(engineOptions(n.fs)); err != nil {
		return n
	}
	n.c = client.NewLocal(n.eng, client.Options{Identity: "crash-test"})
	n.stop = runWorker(t, n.c, p)
	return n
}

// down ends this life: the worker, the engine, the store.
func (n *node) down() {
	if n.stop != nil {
		n.stop()
	}
	if n.eng != nil {
		_ = n.eng.Close()
	}
	_ = n.st.Close()
}

// listPoints runs the workload once without crashing and returns the
// crash points it passed.
func listPoints(t *testing.T) []string {
	t.Helper()
	var mu sync.Mutex
	seen := map[string]bool{}
	crashpoint.Observe(func(name string) {
		mu.Lock()
		seen[name] = true
		mu.Unlock()
	})
	p := newProvider()
	n := boot(t, t.TempDir(), p, nil)
	a := &acks{ids: map[string]string{}}
	startAll(n.c, a)
	finishAndCheck(t, n.c, p, a)
	crashpoint.Observe(nil)
	n.down()
	mu.Lock()
	defer mu.Unlock()
	return sorted(seen)
}

// TestCrashPointsInProcess: at every crash point the workload passes, the
// store dies (every later call fails, as if the process had died there);
// the engine is then closed and reopened over the directory and the
// workload finishes.
func TestCrashPointsInProcess(t *testing.T) {
	points := listPoints(t)
	if len(points) < 10 {
		t.Fatalf("the workload passes only %d crash points: %v", len(points), points)
	}
	t.Logf("%d crash points: %v", len(points), points)
	for _, tr := range trials(t, points) {
		t.Run(tr.String(), func(t *testing.T) {
			dir := t.TempDir()
			p := newProvider()
			a := &acks{ids: map[string]string{}}
			died := make(chan struct{})
			var victim atomic.Pointer[node]
			crashpoint.Arm(tr.point, tr.at, func() {
				victim.Load().fs.Kill(nil)
				close(died)
			})
			defer crashpoint.Disarm()
			n := boot(t, dir, p, func(opened *node) { victim.Store(opened) })
			finished := make(chan struct{})
			if n.c != nil {
				go workload(n.c, a, finished)
			}
			select {
			case <-died:
			case <-finished:
				n.down()
				t.Skipf("the workload finished without reaching %s", tr)
			case <-time.After(waitFor):
				t.Fatalf("the workload never reached %s", tr)
			}
			crashpoint.Disarm()
			n.down()
			n = boot(t, dir, p, nil)
			if n.eng == nil {
				t.Fatal("the engine does not open after the crash")
			}
			defer n.down()
			finishAndCheck(t, n.c, p, a)
		})
	}
}
