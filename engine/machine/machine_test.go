package machine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// script drives a Machine directly, recording every event and what the
// machine asked for, as text compared with testdata/<name>.golden.
type script struct {
	t   *testing.T
	m   *Machine
	st  *RunState
	now time.Time
	out strings.Builder
	ids int
	eps int64
}

func newScript(t *testing.T) *script {
	s := &script{t: t, now: testStart}
	s.m = &Machine{Limits: DefaultLimits(), Defaults: DefaultDefaults(), NewRunID: func() string {
		s.ids++
		return fmt.Sprintf("run-%d", s.ids)
	}}
	return s
}

func (s *script) start(req api.StartWorkflowRequest) {
	if req.WorkflowID == "" {
		req.WorkflowID, req.WorkflowType, req.TaskQueue = "wf", "Agent", "q"
	}
	st, out := s.m.Start(StartParams{Request: req, RunID: s.m.NewRunID()}, s.now)
	s.st = st
	s.record("start", out, nil)
}

func (s *script) step(name string, f func() (Output, error)) Output {
	s.t.Helper()
	out, err := f()
	s.record(name, out, err)
	return out
}

// dispatchWFT hands the workflow task out and returns its epoch.
func (s *script) dispatchWFT() int64 {
	s.eps++
	s.m.WFTDispatched(s.st, s.eps, s.now)
	fmt.Fprintf(&s.out, "-- workflow task dispatched (epoch %d, sees events < %d)\n", s.eps, s.st.NextEventID)
	return s.eps
}

func (s *script) complete(cmds ...api.Command) Output {
	s.t.Helper()
	s.dispatchWFT()
	return s.step("complete workflow task", func() (Output, error) {
		return s.m.CompleteWFT(s.st, WFTCompletion{Commands: cmds, Identity: "w1"}, s.now)
	})
}

func (s *script) dispatchActivity(id int64) int64 {
	s.t.Helper()
	s.eps++
	ep := s.eps
	s.step(fmt.Sprintf("dispatch activity %d (epoch %d)", id, ep), func() (Output, error) {
		return s.m.ActivityDispatched(s.st, id, ep, "w1", s.now)
	})
	return ep
}

func (s *script) advance(d time.Duration) { s.now = s.now.Add(d) }

// fire fires every deadline of the state that is due.
func (s *script) fireDue() {
	for _, d := range s.m.Deadlines(s.st) {
		if !d.At.After(s.now) {
			d := d
			s.step("deadline "+kindName(d.Kind), func() (Output, error) { return s.m.Fire(s.st, d, s.now), nil })
		}
	}
}

func kindName(k DeadlineKind) string {
	return [...]string{"?", "user-timer", "activity-lease", "schedule-to-start", "schedule-to-close", "activity-retry",
		"wft-timeout", "wft-backoff", "sticky-fallback", "run-timeout", "execution-timeout"}[k]
}

func (s *script) record(name string, out Output, err error) {
	fmt.Fprintf(&s.out, "-- %s at +%s", name, s.now.Sub(testStart))
	if err != nil {
		fmt.Fprintf(&s.out, ": error: %v\n", err)
		return
	}
	s.out.WriteString("\n")
	for _, ev := range out.Events {
		fmt.Fprintf(&s.out, "%4d %s\n", ev.ID, renderAttrs(ev.Attrs))
	}
	var notes []string
	if out.WFTReady {
		notes = append(notes, "workflow task ready")
	}
	for _, id := range out.ActivitiesReady {
		notes = append(notes, fmt.Sprintf("activity %d ready", id))
	}
	for _, d := range out.Deadlines {
		notes = append(notes, fmt.Sprintf("deadline %s at +%s", kindName(d.Kind), d.At.Sub(testStart)))
	}
	for _, l := range out.Ledger {
		notes = append(notes, fmt.Sprintf("ledger %s=%d", l.Key[:8], l.State))
	}
	if out.Closed {
		notes = append(notes, "closed "+s.st.Status.String())
	}
	if len(notes) > 0 {
		fmt.Fprintf(&s.out, "     => %s\n", strings.Join(notes, "; "))
	}
}

// renderAttrs prints an event's non-zero attributes as key=value pairs.
func renderAttrs(a history.Attributes) string {
	v := reflect.ValueOf(a).Elem()
	parts := []string{a.EventType().String()}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.IsZero() {
			continue
		}
		parts = append(parts, v.Type().Field(i).Name+"="+renderValue(f.Interface()))
	}
	return strings.Join(parts, " ")
}

func renderValue(x any) string {
	switch x := x.(type) {
	case history.Payload:
		return string(x.Data)
	case *history.Payload:
		return string(x.Data)
	case time.Time:
		return "+" + x.Sub(testStart).String()
	case history.Failure:
		return fmt.Sprintf("{%s: %s nonretryable=%v}", x.Type, x.Message, x.NonRetryable)
	case *history.Failure:
		return renderValue(*x)
	case history.ActivityOptions:
		r := fmt.Sprintf("{queue=%s start-to-close=%s", x.TaskQueue, x.StartToCloseTimeout)
		if x.HeartbeatTimeout > 0 {
			r += fmt.Sprintf(" heartbeat=%s", x.HeartbeatTimeout)
		}
		if p := x.RetryPolicy; p != nil {
			r += fmt.Sprintf(" retry={%s×%g max=%d nonretryable=%v}", p.InitialInterval, p.BackoffCoefficient, p.MaximumAttempts, p.NonRetryableErrorTypes)
		}
		return r + "}"
	case string:
		if len(x) == 32 && !strings.ContainsAny(x, " :") {
			return x[:8] + "…" // idempotency keys: short and stable
		}
		return fmt.Sprintf("%q", x)
	}
	return fmt.Sprintf("%v", x)
}

func (s *script) golden() {
	s.t.Helper()
	path := filepath.Join("testdata", s.t.Name()+".golden")
	got := s.out.String()
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			s.t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			s.t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		s.t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		s.t.Errorf("history differs from %s (run with -update to accept):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

var minute = history.ActivityOptions{StartToCloseTimeout: time.Minute}

func TestMachineOneActivity(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(schedule("1", "Greet", history.Read, minute))
	ep := s.dispatchActivity(3)
	s.advance(time.Second)
	s.step("activity completed", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, ep, jsonPayload(`"hi"`), "", "w1", history.Usage{}, s.now)
	})
	s.complete(completeWF(`"done"`))
	s.golden()
}

func TestMachineRetryThenSuccess(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(schedule("1", "Flaky", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5}}))
	for i := 0; i < 2; i++ {
		ep := s.dispatchActivity(3)
		s.step("activity failed", func() (Output, error) {
			return s.m.ActivityFailed(s.st, 3, ep, history.Failure{Type: "Unavailable", Message: "try later"}, FailureReport{}, s.now)
		})
		s.advance(time.Duration(1<<i) * time.Second)
		s.fireDue()
	}
	ep := s.dispatchActivity(3)
	s.step("activity completed", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, ep, jsonPayload(`"ok"`), "", "w1", history.Usage{}, s.now)
	})
	s.step("stale completion from attempt 1", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, 1, jsonPayload(`"late"`), "", "w1", history.Usage{}, s.now)
	})
	s.golden()
}

func TestMachineNonRetryable(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(schedule("1", "Charge", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &history.RetryPolicy{NonRetryableErrorTypes: []string{"CardDeclined"}}}))
	ep := s.dispatchActivity(3)
	s.step("activity failed", func() (Output, error) {
		return s.m.ActivityFailed(s.st, 3, ep, history.Failure{Type: "CardDeclined", Message: "declined"}, FailureReport{}, s.now)
	})
	s.golden()
}

func TestMachineTimers(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.complete(startTimer("a", time.Hour), startTimer("b", 24*time.Hour))
	s.advance(time.Hour - time.Millisecond)
	s.fireDue() // nothing is due a millisecond early
	s.advance(time.Millisecond)
	s.fireDue()
	s.complete(api.Command{Type: api.CommandCancelTimer, CancelTimer: &api.CancelTimerCommand{TimerID: "b"}}, completeWF(`null`))
	s.golden()
}

func TestMachineSignalDuringTask(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	s.dispatchWFT()
	s.step("signal while the task runs", func() (Output, error) {
		return s.m.Signal(s.st, "approve", jsonPayload(`true`), "alice", s.now)
	})
	s.step("complete closing the run (refused)", func() (Output, error) {
		return s.m.CompleteWFT(s.st, WFTCompletion{Commands: []api.Command{completeWF(`"early"`)}}, s.now)
	})
	s.step("complete scheduling a timer (accepted; the signal gets a new task)", func() (Output, error) {
		return s.m.CompleteWFT(s.st, WFTCompletion{Commands: []api.Command{startTimer("t", time.Minute)}}, s.now)
	})
	s.golden()
}

func TestMachineSideEffectPausesAndResolves(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "invoice-INV-9", WorkflowType: "PayInvoice", TaskQueue: "q"})
	s.complete(schedule("1", "SendPayment", history.SideEffect, minute))
	s.dispatchActivity(3)
	s.advance(time.Minute)
	s.fireDue()
	if got := s.st.EffectiveStatus(); got != api.StatusPaused {
		t.Fatalf("status %s, want paused", got)
	}
	s.step("resolve: happened", func() (Output, error) {
		return s.m.Resolve(s.st, &api.ResolveActivityRequest{ScheduledEventID: 3, Resolution: history.ResolvedHappened,
			Result: jsonPayload(`{"paid":4200}`), Identity: "alice", Reason: "ACME confirmed the transfer"}, s.now)
	})
	s.golden()
}

func TestMachineReconcile(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	c := schedule("1", "SendPayment", history.SideEffect, minute)
	c.ScheduleActivity.HasReconcile = true
	s.complete(c)
	s.dispatchActivity(3)
	s.advance(time.Minute)
	s.fireDue()
	ep := s.dispatchActivity(3) // the Reconcile lookup
	s.step("reconcile: not happened", func() (Output, error) {
		return s.m.ActivityFailed(s.st, 3, ep, history.Failure{Message: "no such payment"}, FailureReport{Kind: FailedNotHappened}, s.now)
	})
	ep = s.dispatchActivity(3)
	s.step("activity completed", func() (Output, error) {
		return s.m.ActivityCompleted(s.st, 3, ep, jsonPayload(`"paid"`), "", "w1", history.Usage{}, s.now)
	})
	s.golden()
}

func TestMachineIdempotencyKeys(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	// The same payment twice in one run: two actions, two keys.
	s.complete(schedule("1", "SendPayment", history.SideEffect, minute), schedule("2", "SendPayment", history.SideEffect, minute))
	k1 := s.st.Activities[3].IdempotencyKey
	k2 := s.st.Activities[4].IdempotencyKey
	if k1 == k2 {
		t.Fatal("identical calls in one run must get distinct keys")
	}
	if want := IdempotencyKey("wf", "SendPayment", []byte(`{"invoice":"INV-9"}`), 1); k1 != want {
		t.Fatalf("key %s, want %s", k1, want)
	}
	s.golden()
}

func TestMachineWorkflowTaskFailures(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{})
	for i := 0; i < 4; i++ {
		s.dispatchWFT()
		s.step("workflow task failed", func() (Output, error) {
			return s.m.FailWFT(s.st, "panic", history.Failure{Type: "PanicError", Message: "boom"}, "w1", s.now)
		})
	}
	s.advance(time.Second)
	s.fireDue()
	s.golden()
}

func TestMachineContinueAsNewAndTerminate(t *testing.T) {
	s := newScript(t)
	s.start(api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "Agent", TaskQueue: "q", RunTimeout: time.Hour})
	out := s.complete(api.Command{Type: api.CommandContinueAsNew, ContinueAsNew: &api.ContinueAsNewCommand{Input: jsonPayload(`{"turn":2}`)}})
	if out.ContinueAsNew == nil || out.ContinueAsNew.ContinuedFrom != "run-1" {
		t.Fatalf("continue-as-new: %+v", out.ContinueAsNew)
	}
	st, first := s.m.Start(*out.ContinueAsNew, s.now)
	s.st = st
	s.record("next run "+st.RunID, first, nil)
	s.step("terminate", func() (Output, error) { return s.m.Terminate(s.st, "operator", history.Payload{}, "bob", s.now) })
	s.step("signal after close", func() (Output, error) { return s.m.Signal(s.st, "x", history.Payload{}, "", s.now) })
	s.golden()
}
