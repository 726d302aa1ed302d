package testkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/sdk/client"
)

// readyMessage is the log message `cairn server` writes once it listens.
const readyMessage = "cairn server ready"

// ServerOptions say how to run `cairn server`.
//
// The server's store is Store, else the Badger directory Data, else a
// fresh one: a directory in the test's temporary directory, or under
// CAIRN_TEST_STORE=postgres a schema of the test's own (storetest.New;
// the server holds every shard). A test restarts a server on the same
// data with the first one's Store; a test that needs Badger's files
// (damage, backup) names its directory with Data. On Postgres a server
// is a cluster of one: restarted after a kill, it serves the runs of its
// predecessor once that one's shard leases ran out (--lease-ttl, 10 s by
// default); calls about them wait meanwhile.
type ServerOptions struct {
	Data   string          // Badger data directory, whatever CAIRN_TEST_STORE says
	Store  *storetest.Data // the store's place (not with Data): a Server's Store, to restart it on the same data
	Listen string          // API address (default 127.0.0.1:0; FreeAddr for one that must survive a restart)
	UI     bool            // serve the web UI on a free loopback port (default: --ui-listen off)
	Args   []string        // more flags; a --log-level above info hides the ready line Ready waits for
	Env    []string        // added to the environment
	Name   string          // what failure messages call it (default "cairn server")
}

// Server is a `cairn server` process.
type Server struct {
	*Proc
	Data  string          // its Badger data directory ("" on Postgres)
	Store *storetest.Data // its store's place: give it to ServerOptions.Store to restart the server on the same data
	// Addr is the API address it bound ("127.0.0.1:port") and UI the web
	// UI's URL ("" when off), once Ready returned nil.
	Addr, UI string
}

// StartServer starts `cairn server` (LaunchServer) and waits until it is
// ready (Ready); it fails the test if the server exits first or ctx ends.
func StartServer(ctx context.Context, t testing.TB, o ServerOptions) *Server {
	t.Helper()
	s := LaunchServer(t, o)
	if err := s.Ready(ctx); err != nil {
		t.Fatalf("%v; the end of its output:\n%s", err, s.Tail(failureTail))
	}
	return s
}

// LaunchServer starts `cairn server --data DIR` (or `--store URL --schema
// S`: ServerOptions) `--listen … --ui-listen …` with o.Args and returns at
// once, for a test that expects it may not come up; Ready waits for it.
func LaunchServer(t testing.TB, o ServerOptions) *Server {
	t.Helper()
	if lvl := flagValue(o.Args, "--log-level"); lvl != "" && !slices.Contains([]string{"trace", "debug", "info"}, lvl) {
		t.Fatalf("testkit: a server with --log-level %s does not log that it is ready", lvl)
	}
	switch {
	case o.Store != nil && o.Data != "":
		t.Fatalf("testkit: ServerOptions.Data %s and Store: give one", o.Data)
	case o.Data != "":
		o.Store = storetest.Badger(o.Data)
	case o.Store == nil && storetest.Postgres():
		o.Store = storetest.New(t)
	case o.Store == nil:
		o.Store = storetest.Badger(filepath.Join(t.TempDir(), "data"))
	}
	if o.Listen == "" {
		o.Listen = "127.0.0.1:0"
	}
	ui := "off"
	if o.UI {
		ui = "127.0.0.1:0"
	}
	if o.Name == "" {
		o.Name = "cairn server"
	}
	args := append(append([]string{"server"}, o.Store.ServerArgs()...), "--listen", o.Listen, "--ui-listen", ui)
	args = append(args, o.Args...)
	return &Server{Proc: Start(t, Cmd{Path: Cairn(t), Args: args, Env: o.Env, Name: o.Name}), Data: o.Store.Dir(), Store: o.Store}
}

// flagValue is the value of flag in args ("--flag v" or "--flag=v"), or
// "".
func flagValue(args []string, flag string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, flag+"="); ok {
			return v
		}
		if a == flag && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// Ready waits for the server's ready line and sets Addr and UI from it. Its
// error wraps ErrExited when the server exited first (a damaged data
// directory, a crash point), or the context's error. It does not fail the
// test.
func (s *Server) Ready(ctx context.Context) error {
	var fields map[string]any
	if _, err := s.Next(ctx, func(l string) bool {
		fields = logLine(l, readyMessage)
		return fields != nil
	}); err != nil {
		return fmt.Errorf("waiting for %s to be ready: %w", s.name, err)
	}
	s.Addr, _ = fields["listen"].(string)
	s.UI, _ = fields["ui"].(string)
	if s.Addr == "" {
		return fmt.Errorf("%s: its ready line names no address: %v", s.name, fields)
	}
	return nil
}

// FreeAddr returns a loopback address nothing listens on now. Another
// process may take it before the test does: prefer 127.0.0.1:0 and the
// address the server reports, and use FreeAddr only for a server that
// must come back at the same address after a restart.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// Output is what a command that ran printed, and its exit code.
type Output struct {
	Stdout, Stderr string
	Combined       string // stdout and stderr as they arrived (two pipes: their order is close, not exact)
	Code           int    // the exit code; -1 when it did not exit by itself
}

// Run runs c to its end, bounded by ctx (WaitTimeout when ctx has no
// deadline). The error is nil when it exited with status 0; otherwise it
// says so, wrapping the *exec.ExitError (or why it did not run) and
// holding stderr. Run does not fail the test, and may be called from any
// goroutine.
func Run(ctx context.Context, c Cmd) (Output, error) {
	ctx, cancel := bounded(ctx)
	defer cancel()
	cmd := c.command(ctx)
	var out, errb, all bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout = lockedWriter{&mu, io.MultiWriter(&out, &all)}
	cmd.Stderr = lockedWriter{&mu, io.MultiWriter(&errb, &all)}
	err := cmd.Run()
	o := Output{Stdout: out.String(), Stderr: errb.String(), Combined: all.String(), Code: -1}
	if cmd.ProcessState != nil {
		o.Code = cmd.ProcessState.ExitCode()
	}
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", err, ctx.Err())
		}
		return o, fmt.Errorf("%s %s: %w\n%s", c.name(), strings.Join(c.Args, " "), err, o.Stderr)
	}
	return o, nil
}

// lockedWriter serialises the writes of a command's two streams into
// buffers they share.
type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (w lockedWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// CLI runs the cairn binary with args and, unless addr is "", --address
// addr (see Run). Cairn(t) builds the binary if no test did yet: the
// first call must come from the test's goroutine.
func CLI(ctx context.Context, t testing.TB, addr string, args ...string) (Output, error) {
	t.Helper()
	if addr != "" {
		args = append(args[:len(args):len(args)], "--address", addr)
	}
	return Run(ctx, Cmd{Path: Cairn(t), Args: args, Name: "cairn"})
}

// Dial returns a client of the server at addr, identified as identity,
// closed when the test ends.
func Dial(t testing.TB, addr, identity string) client.Client {
	t.Helper()
	c, err := client.Dial(addr, client.Options{Identity: identity}, client.DialOptions{})
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
