package worker_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/clock"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// lockedLog is a log the test reads while the worker writes it.
type lockedLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// lines returns the warnings logged so far.
func (l *lockedLog) lines() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range strings.Split(strings.TrimSpace(l.b.String()), "\n") {
		if strings.Contains(line, `"level":"warn"`) {
			out = append(out, line)
		}
	}
	return out
}

// away is a server nobody reaches: every poll fails, as a refused
// connection does, and is announced on polled.
type away struct {
	api.Service // nil: the worker calls nothing else while it has no task
	polled      chan struct{}
}

func (a *away) fail() error {
	select {
	case a.polled <- struct{}{}:
	default:
	}
	return fmt.Errorf("%w: session with 127.0.0.1:7233: dial tcp 127.0.0.1:7233: connect: connection refused", api.ErrUnavailable)
}

func (a *away) PollWorkflowTask(context.Context, *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	return nil, a.fail()
}

func (a *away) PollActivityTask(context.Context, *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	return nil, a.fail()
}

// waitPolls waits (a minute at most) until the worker's failed polls
// reach n, on each poll's announcement.
func waitPolls(t *testing.T, w *worker.Worker, a *away, n int64) {
	t.Helper()
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for w.Stats().PollFailures.Load() < n {
		select {
		case <-a.polled:
		case <-deadline.C:
			t.Fatalf("%d failed polls within a minute, want %d", w.Stats().PollFailures.Load(), n)
		}
	}
}

// A worker whose server is unreachable logs the first failure, then a
// summary at most every UnreachableSummaryEvery — not one line per failed
// poll of each of its pollers (about a hundred lines in 7 s).
func TestUnreachableServerIsLoggedOnceThenSummedUp(t *testing.T) {
	a := &away{polled: make(chan struct{}, 1)}
	c := client.NewLocal(a, client.Options{})
	var log lockedLog
	logger := zerolog.New(&log)
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	w, err := worker.New(c, worker.Options{TaskQueue: "away", Identity: "lonely", Logger: &logger, Clock: clk})
	must(t, err)
	must(t, w.RegisterWorkflow(Hello))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		<-done
	}()

	waitPolls(t, w, a, 40)
	if lines := log.lines(); len(lines) != 1 || !strings.Contains(lines[0], "the server is unreachable") {
		t.Fatalf("after %d failed polls the log has %d lines:\n%s", w.Stats().PollFailures.Load(), len(lines), strings.Join(lines, "\n"))
	}
	clk.Advance(worker.UnreachableSummaryEvery)
	waitPolls(t, w, a, w.Stats().PollFailures.Load()+10)
	lines := log.lines()
	if len(lines) != 2 || !strings.Contains(lines[1], "still unreachable after") || !strings.Contains(lines[1], "failed polls over 30s; last error:") ||
		!strings.Contains(lines[1], "connection refused") {
		t.Fatalf("after the summary interval the log has %d lines:\n%s", len(lines), strings.Join(lines, "\n"))
	}
}
