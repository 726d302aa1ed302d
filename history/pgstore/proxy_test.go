package pgstore

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/cairnflow/cairn/history"
)

// proxy forwards TCP connections to the database and can cut one: the
// next reply the database sends after cut is armed is dropped and the
// connection closed, as a network failure would.
type proxy struct {
	ln     net.Listener
	target string
	armed  atomic.Bool
	cuts   atomic.Int32
	mu     sync.Mutex
	conns  []net.Conn
	wg     sync.WaitGroup
}

// startProxy proxies the database of dbURL and returns the URL that goes
// through it.
func startProxy(t *testing.T, dbURL string) (*proxy, string) {
	t.Helper()
	u, err := url.Parse(dbURL)
	if err != nil || u.Host == "" {
		t.Skipf("the test database URL is not a postgres:// URL with a host: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: u.Host}
	p.wg.Go(p.serve)
	t.Cleanup(p.close)
	u.Host = ln.Addr().String()
	return p, u.String()
}

func (p *proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.handle(c) })
	}
}

func (p *proxy) handle(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = client.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, client, server)
	p.mu.Unlock()
	p.wg.Go(func() {
		_, _ = io.Copy(server, client)
		_ = server.Close()
	})
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if n > 0 && p.armed.CompareAndSwap(true, false) {
			p.cuts.Add(1)
			break
		}
		if n > 0 {
			if _, werr := client.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	_ = client.Close()
	_ = server.Close()
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}

// notAmbiguous reports whether the engine would take err for a refusal
// that wrote nothing (engine/resync.go, ambiguousCommit).
func notAmbiguous(err error) bool {
	return errors.Is(err, history.ErrConflict) || errors.Is(err, history.ErrInvalid) ||
		errors.Is(err, history.ErrTooLarge) || errors.Is(err, history.ErrClosed)
}

// TestCommitOutcomeUnknown: the connection drops after COMMIT was sent and
// before its answer arrived. The batch is in fact committed, and Commit
// says it does not know: ErrCommitUnknown, which the engine treats as an
// ambiguous commit and reads the run back.
func TestCommitOutcomeUnknown(t *testing.T) {
	opts := testOptions(t)
	direct := mustOpen(t, opts) // creates the schema; reads behind the proxy's back
	p, proxied := startProxy(t, opts.URL)
	opts.URL = proxied
	var arm atomic.Bool
	s := openHooks(t, opts, testHooks{beforeCommit: func() {
		if arm.Load() {
			p.armed.Store(true)
		}
	}})
	run := runRef("wf-unknown")
	arm.Store(true)
	err := s.Commit(bg, appendTo(run, 1, "x"))
	arm.Store(false)
	if !errors.Is(err, ErrCommitUnknown) || notAmbiguous(err) || errors.Is(err, ErrUnavailable) {
		t.Fatalf("Commit whose COMMIT answer was lost: %v, want ErrCommitUnknown (ambiguous)", err)
	}
	if p.cuts.Load() != 1 {
		t.Fatalf("the proxy cut %d connections", p.cuts.Load())
	}
	wantLast(t, direct, run, 1) // committed after all
	// The store goes on with a new connection.
	if err := s.Commit(bg, appendTo(run, 2, "y")); err != nil {
		t.Fatalf("Commit after the lost connection: %v", err)
	}
	wantLast(t, direct, run, 2)
}

// TestCommitFailsBeforeCommit: the connection drops before COMMIT was
// sent: nothing is written and the error says so (ErrUnavailable, not
// ErrCommitUnknown).
func TestCommitFailsBeforeCommit(t *testing.T) {
	opts := testOptions(t)
	direct := mustOpen(t, opts)
	p, proxied := startProxy(t, opts.URL)
	opts.URL = proxied
	var arm atomic.Bool
	s := openHooks(t, opts, testHooks{beforeRound: func() {
		if arm.Load() {
			p.armed.Store(true)
		}
	}})
	run := runRef("wf-before")
	arm.Store(true)
	err := s.Commit(bg, appendTo(run, 1, "x"))
	arm.Store(false)
	if !errors.Is(err, ErrUnavailable) || errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("Commit whose pipeline answer was lost: %v, want ErrUnavailable", err)
	}
	wantLast(t, direct, run, 0)
	if err := s.Commit(bg, appendTo(run, 1, "x")); err != nil {
		t.Fatalf("Commit after the lost connection: %v", err)
	}
	wantLast(t, direct, run, 1)
}

// TestCommitSessionKilled: the session is terminated (a FATAL error) with
// the transaction open: the answer to COMMIT is that error, which ends the
// session whether or not the commit record was written, so Commit says it
// does not know (here it was not written).
func TestCommitSessionKilled(t *testing.T) {
	opts := testOptions(t)
	opts.URL = withParam(opts.URL, "application_name", opts.Schema)
	var arm atomic.Bool
	var killed atomic.Int32
	var s *Store
	s = openHooks(t, opts, testHooks{beforeCommit: func() {
		if !arm.Load() {
			return
		}
		var n int32
		err := s.pool.QueryRow(bg, `SELECT count(pg_terminate_backend(pid))::int FROM pg_stat_activity
WHERE application_name = $1 AND state LIKE 'idle in transaction%'`, opts.Schema).Scan(&n)
		if err != nil {
			t.Error(err)
		}
		killed.Store(n)
		// Wait until the session is gone, so that its FATAL is what
		// COMMIT reads.
		poll(t, func() bool {
			var left int
			_ = s.pool.QueryRow(bg, `SELECT count(*) FROM pg_stat_activity WHERE application_name = $1
AND state LIKE 'idle in transaction%'`, opts.Schema).Scan(&left)
			return left == 0
		})
	}})
	run := runRef("wf-killed")
	arm.Store(true)
	err := s.Commit(bg, appendTo(run, 1, "x"))
	arm.Store(false)
	if killed.Load() != 1 {
		t.Fatalf("terminated %d sessions, want the committer's", killed.Load())
	}
	if !errors.Is(err, ErrCommitUnknown) || notAmbiguous(err) {
		t.Fatalf("Commit on a terminated session: %v, want ErrCommitUnknown", err)
	}
	wantLast(t, s, run, 0)
	if err := s.Commit(bg, appendTo(run, 1, "x")); err != nil {
		t.Fatalf("Commit after the terminated session: %v", err)
	}
}
