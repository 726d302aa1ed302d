package main

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// TestMain lets the test binary be cairn itself (a server process for
// the tests that restart one).
func TestMain(m *testing.M) {
	if os.Getenv("CAIRN_TEST_AS_CAIRN") == "1" {
		os.Exit(cli(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
	}
	pgtest.Main(m) // says in one line when the Postgres tests were skipped
}

// serverProc is `cairn server` as a process of its own.
type serverProc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

// startServer runs `cairn server` on data and addr and waits until it is
// ready.
func startServer(t *testing.T, data, addr string) *serverProc {
	t.Helper()
	self, err := os.Executable()
	check(t, err)
	cmd := exec.Command(self, "server", "--data", data, "--listen", addr, "--ui-listen", "off")
	cmd.Env = append(os.Environ(), "CAIRN_TEST_AS_CAIRN=1", "CAIRN_TOKEN=")
	out, err := cmd.StderrPipe()
	check(t, err)
	check(t, cmd.Start())
	p := &serverProc{cmd: cmd, done: make(chan struct{})}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "cairn server ready") {
				close(ready)
			}
		}
		_ = cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-p.done
	})
	select {
	case <-ready:
	case <-p.done:
		t.Fatal("the server exited before it was ready")
	case <-time.After(time.Minute):
		t.Fatal("the server was not ready within a minute")
	}
	return p
}

// stop stops the server with SIGTERM and waits until it exited.
func (p *serverProc) stop(t *testing.T) {
	t.Helper()
	check(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
	case <-time.After(time.Minute):
		t.Fatal("the server did not stop within a minute of SIGTERM")
	}
}

// result and watch wait through a server restart — SIGTERM, then a new
// server on the same data directory and port — and end with the run's
// outcome (they gave up with the connection).
func TestResultAndWatchSurviveAServerRestart(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	check(t, err)
	addr := ln.Addr().String()
	check(t, ln.Close())
	srv := startServer(t, data, addr)

	c, err := client.Dial(addr, client.Options{}, client.DialOptions{})
	check(t, err)
	defer c.Close()
	w, err := worker.New(c, worker.Options{TaskQueue: testQueue, Identity: "restart-worker", GracefulStop: time.Second})
	check(t, err)
	check(t, w.RegisterWorkflow(Hold))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	wctx, stopWorker := context.WithCancel(ctx)
	workerDone := make(chan error, 1)
	go func() { workerDone <- w.Run(wctx) }()
	defer func() {
		stopWorker()
		<-workerDone
	}()
	_, err = c.StartWorkflow(ctx, client.StartOptions{ID: "hold-r", TaskQueue: testQueue}, "Hold", "box")
	check(t, err)

	resOut, resErr := newSyncBuffer(), newSyncBuffer()
	resDone := runCLI([]string{"workflow", "result", "hold-r", "--address", addr}, resOut, resErr)
	watchOut, watchErr := newSyncBuffer(), newSyncBuffer()
	watchDone := runCLI([]string{"workflow", "watch", "hold-r", "--address", addr}, watchOut, watchErr)

	srv.stop(t)
	// Both notice (their long polls fail, or their next call does) and
	// keep trying while no server answers.
	resErr.waitFor(t, "lost the server")
	watchErr.waitFor(t, "lost the server")
	startServer(t, data, addr)

	c2, err := client.Dial(addr, client.Options{}, client.DialOptions{})
	check(t, err)
	defer c2.Close()
	check(t, c2.SignalWorkflow(ctx, "hold-r", "", "go", "ann"))
	for _, cmd := range []struct {
		name      string
		done      chan int
		out, errs *syncBuffer
		want      string
	}{
		{"result", resDone, resOut, resErr, `"box released by ann"`},
		{"watch", watchDone, watchOut, watchErr, "[run closed]"},
	} {
		select {
		case code := <-cmd.done:
			if code != 0 || !strings.Contains(cmd.out.String(), cmd.want) || !strings.Contains(cmd.errs.String(), "reconnected") {
				t.Errorf("%s: exit %d\nstdout: %s\nstderr: %s", cmd.name, code, cmd.out, cmd.errs)
			}
		case <-ctx.Done():
			t.Fatalf("%s did not end after the restart\nstdout: %s\nstderr: %s", cmd.name, cmd.out, cmd.errs)
		}
	}
}
