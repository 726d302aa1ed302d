package sdk

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

func FlowV1(ctx Context, _ string) (string, error) {
	a, _ := ExecuteActivity(ctx, Fetch, "a").Get(ctx)
	b, _ := ExecuteActivity(ctx, Fetch, "b").Get(ctx)
	return a + b, nil
}

// FlowOtherType calls another activity second.
func FlowOtherType(ctx Context, _ string) (string, error) {
	a, _ := ExecuteActivity(ctx, Fetch, "a").Get(ctx)
	b, _ := ExecuteActivity(ctx, Summarize, []string{"b"}).Get(ctx)
	return a + b, nil
}

// FlowOtherArgs passes other arguments second.
func FlowOtherArgs(ctx Context, _ string) (string, error) {
	a, _ := ExecuteActivity(ctx, Fetch, "a").Get(ctx)
	b, _ := ExecuteActivity(ctx, Fetch, "B").Get(ctx)
	return a + b, nil
}

// FlowFewer returns after the first activity.
func FlowFewer(ctx Context, _ string) (string, error) {
	return ExecuteActivity(ctx, Fetch, "a").Get(ctx)
}

// FlowMore starts two activities where history has one.
func FlowMore(ctx Context, _ string) (string, error) {
	a, _ := ExecuteActivity(ctx, Fetch, "a").Get(ctx)
	f1, f2 := ExecuteActivity(ctx, Fetch, "b"), ExecuteActivity(ctx, Fetch, "c")
	b, _ := f1.Get(ctx)
	c, _ := f2.Get(ctx)
	return a + b + c, nil
}

// FlowSideEffect asks for a side-effect value history does not hold.
func FlowSideEffect(ctx Context, _ string) (string, error) {
	a, _ := ExecuteActivity(ctx, Fetch, "a").Get(ctx)
	n := SideEffect(ctx, func(Context) int { return 4 })
	b, _ := ExecuteActivity(ctx, Fetch, "b").Get(ctx)
	return fmt.Sprint(a, n, b), nil
}

func TestNondeterminismNamesTheEvent(t *testing.T) {
	v1 := NewRegistry()
	mustRegister(t, v1, []any{FlowV1}, Fetch)
	f := newFake(t, v1, FlowV1, "")
	f.task()
	f.completeActivity("1", "A")
	f.task()
	f.completeActivity("2", "B")
	wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	f.checkReplay()
	second := f.sched("2") // 1 WorkflowStarted, 2 WTC, 3 Scheduled, 4 Started, 5 Completed, 6 WTC, 7 Scheduled

	cases := []struct {
		wf                 any
		eventID            int64
		recorded, produced string
	}{
		{FlowOtherType, second, "ActivityScheduled Fetch id=2", "ActivityScheduled Summarize id=2"},
		{FlowOtherArgs, second, "ActivityScheduled Fetch id=2 args#", "ActivityScheduled Fetch id=2 args#"},
		{FlowFewer, second, "ActivityScheduled Fetch id=2", "WorkflowCompleted"},
		{FlowMore, second + 1, "no command event", "ActivityScheduled Fetch id=3"},
		{FlowSideEffect, second, "ActivityScheduled Fetch id=2", "MarkerRecorded SideEffect/1"},
	}
	for _, c := range cases {
		t.Run(funcName(c.wf), func(t *testing.T) {
			reg := NewRegistry()
			if err := reg.RegisterWorkflow(c.wf, RegisterOptions{Name: "FlowV1"}); err != nil {
				t.Fatal(err)
			}
			mustRegister(t, reg, nil, Fetch, Summarize)
			_, exec, err := f.replayAll(reg)
			var nd *NondeterminismError
			if !errors.As(err, &nd) || !errors.Is(err, ErrNondeterminism) {
				t.Fatalf("replay error %v, want a NondeterminismError", err)
			}
			if nd.EventID != c.eventID || !strings.HasPrefix(nd.Recorded, c.recorded) || !strings.HasPrefix(nd.Produced, c.produced) {
				t.Fatalf("got event %d recorded %q produced %q; want %d %q… %q…", nd.EventID, nd.Recorded, nd.Produced, c.eventID, c.recorded, c.produced)
			}
			if nd.Recorded == nd.Produced {
				t.Fatalf("recorded and produced read alike: %q", nd.Recorded)
			}
			msg := err.Error()
			if !strings.Contains(msg, fmt.Sprint("event ", c.eventID)) || !strings.Contains(msg, nd.Recorded) || !strings.Contains(msg, nd.Produced) {
				t.Fatalf("message %q does not name event, recorded and produced", msg)
			}
			if cause, _ := TaskFailure(err); cause != "nondeterminism" {
				t.Fatalf("task failure cause %q", cause)
			}
			// The Execution is unusable from now on.
			if _, err2 := exec.ProcessTask(f.newTask(f.exec.LastEventID() + 1)); !errors.Is(err2, ErrNondeterminism) {
				t.Fatalf("second ProcessTask: %v", err2)
			}
		})
	}
}

func Panicky(ctx Context, _ string) (string, error) {
	if _, err := ExecuteActivity(ctx, Fetch, "x").Get(ctx); err != nil {
		return "", err
	}
	var m map[string]int
	//lint:ignore SA5000 the test needs a runtime panic inside workflow code
	m["boom"]++ // panics: assignment to entry in nil map
	return "", nil
}

func TestPanicFailsTheTask(t *testing.T) {
	base := runtime.NumGoroutine()
	reg := NewRegistry()
	mustRegister(t, reg, []any{Panicky}, Fetch)
	f := newFake(t, reg, Panicky, "")
	f.task()
	f.completeActivity("1", "x")
	_, err := f.tryTask(nil)
	var pe *PanicError
	if !errors.As(err, &pe) || !strings.Contains(pe.Value, "nil map") || !strings.Contains(pe.Stack, "sdk.Panicky") {
		t.Fatalf("got %v", err)
	}
	if cause, fail := TaskFailure(err); cause != "panic" || fail.Stack == "" || fail.Type != FailureTypePanic {
		t.Fatalf("task failure %q %+v", cause, fail)
	}
	if _, err := f.tryTask(nil); !errors.As(err, &pe) {
		t.Fatalf("a failed execution must keep failing, got %v", err)
	}
	f.exec.Close()
	settleGoroutines(t, base)

	// Panics in a Go coroutine and in an Await condition fail the task too.
	for name, wf := range map[string]func(Context) error{
		"coroutine": func(ctx Context) error {
			Go(ctx, func(Context) { panic("in a coroutine") })
			return Await(ctx, func() bool { return false })
		},
		"condition": func(ctx Context) error {
			n := 0
			Go(ctx, func(ctx Context) { _ = Sleep(ctx, time.Hour) })
			return Await(ctx, func() bool {
				n++
				if n > 1 {
					panic("in a condition")
				}
				return false
			})
		},
	} {
		reg := NewRegistry()
		if err := reg.RegisterWorkflow(wf, RegisterOptions{Name: "P"}); err != nil {
			t.Fatal(err)
		}
		f := newFake(t, reg, "P", nil)
		_, err := f.tryTask(nil)
		if !errors.As(err, &pe) || !strings.Contains(pe.Value, "in a") {
			t.Fatalf("%s: got %v", name, err)
		}
	}
}

func TestDeadlockDetected(t *testing.T) {
	base := runtime.NumGoroutine()
	block := make(chan struct{})
	reg := NewRegistry()
	stuck := func(ctx Context) error {
		Go(ctx, func(ctx Context) { _ = Sleep(ctx, time.Hour) }) // a healthy coroutine, unwound by Close
		<-block                                                  // a native channel: not allowed
		return nil
	}
	if err := reg.RegisterWorkflow(stuck, RegisterOptions{Name: "Stuck"}); err != nil {
		t.Fatal(err)
	}
	f := newFake(t, reg, "Stuck", nil)
	f.opts.DeadlockTimeout = 20 * time.Millisecond
	_, err := f.tryTask(nil)
	var de *DeadlockError
	if !errors.As(err, &de) || !errors.Is(err, ErrDeadlock) || de.Coroutine != "root" {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(de.Stack, "chan receive") || !strings.Contains(de.Stack, "TestDeadlockDetected") {
		t.Fatalf("stack does not show where it blocked:\n%s", de.Stack)
	}
	if cause, _ := TaskFailure(err); cause != "blocked" {
		t.Fatalf("cause %q", cause)
	}
	f.exec.Close() // the stuck goroutine is abandoned; the other is unwound
	close(block)   // released, it finishes and exits
	settleGoroutines(t, base)
}

// Leaky leaves coroutines blocked in every kind of SDK call, some with
// deferred calls that block again while Close unwinds them.
func Leaky(ctx Context, _ string) (string, error) {
	ch := NewChannel[int](ctx)
	buf := NewBufferedChannel[int](ctx, 1)
	buf.Send(ctx, 1)
	Go(ctx, func(ctx Context) { ch.Receive(ctx) })
	Go(ctx, func(ctx Context) { buf.Send(ctx, 2) })
	Go(ctx, func(ctx Context) {
		defer func() { _ = Sleep(ctx, time.Minute) }() // blocks again while unwinding
		defer Go(ctx, func(Context) {})                // spawns while unwinding
		_ = Await(ctx, func() bool { return false })
	})
	Go(ctx, func(ctx Context) { NewSelector(ctx).AddReceive(ch, func(bool) {}).Select(ctx) })
	Go(ctx, func(ctx Context) { _, _ = ExecuteActivity(ctx, Fetch, "x").Get(ctx) })
	Go(ctx, func(ctx Context) { GetSignalChannel[string](ctx, "never").Receive(ctx) })
	return "", Sleep(ctx, time.Hour)
}

func TestNoGoroutineLeakAfterClose(t *testing.T) {
	base := runtime.NumGoroutine()
	reg := NewRegistry()
	mustRegister(t, reg, []any{Leaky, Parallel}, Fetch, LongTool)
	for i := 0; i < 20; i++ {
		f := newFake(t, reg, Leaky, "")
		f.task()
		if n := len(f.exec.coros); n != 7 {
			t.Fatalf("%d coroutines alive, want 7", n)
		}
		f.exec.Close()
		f.exec.Close() // idempotent
		if _, err := f.exec.ProcessTask(f.newTask(1)); !errors.Is(err, ErrClosed) {
			t.Fatalf("ProcessTask after Close: %v", err)
		}
		f.exec = nil
	}
	settleGoroutines(t, base)

	// Coroutines blocked on futures and a selector, too.
	f := newFake(t, reg, Parallel, []string{"a", "b"})
	f.task()
	f.exec.Close()
	f.exec = nil
	settleGoroutines(t, base)
}

func TestHistoryGap(t *testing.T) {
	reg := NewRegistry()
	mustRegister(t, reg, []any{Hello}, Greet)

	t.Run("skipped events", func(t *testing.T) {
		f := newFake(t, reg, Hello, "x")
		f.task()
		f.completeActivity("1", "y")
		task := f.newTask(f.seen + 2) // skips one event
		if _, err := f.exec.ProcessTask(task); !errors.Is(err, ErrHistoryGap) {
			t.Fatalf("got %v", err)
		}
		task = f.newTask(f.seen + 1)
		task.FirstEventID = f.seen + 5 // lies about its events
		if _, err := f.exec.ProcessTask(task); !errors.Is(err, ErrHistoryGap) {
			t.Fatalf("got %v", err)
		}
		// Nothing changed: the right task still works.
		wantTypes(t, f.task(), api.CommandCompleteWorkflow)
	})

	t.Run("decision not recorded", func(t *testing.T) {
		f := newFake(t, reg, Hello, "x")
		exec, err := NewExecution(reg, f.newTask(1), f.opts)
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Close()
		cmds, err := exec.ProcessTask(f.newTask(1))
		if err != nil {
			t.Fatal(err)
		}
		// The engine refused the completion; a signal arrived; a new task
		// carries it with no WorkflowTaskCompleted for this decision.
		f.signal("s", 1)
		if _, err := exec.ProcessTask(f.newTask(2)); !errors.Is(err, ErrHistoryGap) {
			t.Fatalf("got %v", err)
		}
		// Another worker decided having seen more events.
		f.complete(2, cmds)
		if _, err := exec.ProcessTask(f.newTask(2)); !errors.Is(err, ErrHistoryGap) {
			t.Fatalf("got %v", err)
		}
		// A fresh Execution over the full history is fine.
		if _, _, err := f.replayAll(nil); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("bad first event", func(t *testing.T) {
		if _, err := NewExecution(reg, &api.WorkflowTask{WorkflowType: "Nope"}, ExecutionOptions{}); !errors.Is(err, ErrUnknownWorkflowType) {
			t.Fatalf("got %v", err)
		}
		exec, err := NewExecution(reg, &api.WorkflowTask{WorkflowType: "Hello"}, ExecutionOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer exec.Close()
		_, err = exec.ProcessTask(&api.WorkflowTask{Events: []history.Event{{ID: 1, Attrs: &history.SignalReceived{Name: "x"}}}})
		if err == nil {
			t.Fatal("event 1 must be WorkflowStarted")
		}
	})
}

// ReplayBench runs n activities one after another: four events each.
func ReplayBench(ctx Context, n int) (int, error) {
	sum := 0
	for i := 0; i < n; i++ {
		v, err := ExecuteActivity(ctx, LongTool, i).Get(ctx)
		if err != nil {
			return 0, err
		}
		sum += v
	}
	return sum, nil
}

// benchHistory records a run of ReplayBench with about 10,000 events.
func benchHistory(tb testing.TB) *fakeEngine {
	reg := NewRegistry()
	mustRegister(tb, reg, []any{ReplayBench}, LongTool)
	const n = 2500
	f := newFake(tb, reg, ReplayBench, n)
	for i := 0; i < n; i++ {
		f.task()
		f.completeActivity(fmt.Sprint(i+1), i)
	}
	f.task()
	f.exec.Close()
	f.exec = nil
	return f
}

func TestReplay10k(t *testing.T) {
	f := benchHistory(t)
	var sum int
	f.result(&sum)
	if len(f.events) < 10_000 || sum != 2500*2499/2 {
		t.Fatalf("%d events, sum %d", len(f.events), sum)
	}
	cmds, exec, err := f.replayAll(nil)
	if err != nil || len(cmds) != 0 || !exec.WorkflowClosed() || exec.LastEventID() != int64(len(f.events)) {
		t.Fatalf("replay: %v %v closed=%v last=%d", err, cmds, exec.WorkflowClosed(), exec.LastEventID())
	}
	if st := exec.Stats(); st.ReplayedDecisions != 2501 || st.Events != int64(len(f.events)) || st.ReplayedFromStart != 1 {
		t.Fatalf("stats %+v", st)
	}
}

// BenchmarkReplay10k replays a finished 10,000-event history from scratch
// (new Execution, full replay, Close) and reports events/s.
func BenchmarkReplay10k(b *testing.B) {
	f := benchHistory(b)
	task := f.newTask(1)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		exec, err := NewExecution(f.reg, task, ExecutionOptions{})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := exec.ProcessTask(task); err != nil {
			b.Fatal(err)
		}
		exec.Close()
	}
	b.ReportMetric(float64(len(task.Events))*float64(b.N)/time.Since(start).Seconds(), "events/s")
}
