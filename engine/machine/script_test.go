package machine

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// script drives a Machine directly, recording every event and what the
// machine asked for, as text compared with testdata/<name>.golden.
//
// A script made by newScript hands the machine its one state and lets the
// test fire deadlines (fireDue). One made by newServiceScript drives the
// machine as the service in package engine does, so that a scenario
// written against the engine reads the same here: every input runs on a
// Clone that is kept only when the input succeeds; the deadlines of every
// Output (and of workflow-task dispatches) are armed on a timer heap that
// fires them, in order, as the time passes (wait); ready activities wait
// on a FIFO queue whose stale entries polls skip (poll); ledger changes
// are folded into entries (LedgerEntry.Apply) that a report of an action
// no longer pending is judged against; occurrence counts are committed to
// a map that Machine.Occurrence reads; and the drift margin is the
// engine's default.
type script struct {
	t   *testing.T
	m   *Machine
	st  *RunState
	now time.Time
	out strings.Builder
	ids int
	eps int64

	// service: the script drives the machine as the service does (see
	// newServiceScript).
	service bool
	// history is the current run's history.
	history []history.Event
	// armed is the timer heap: deadlines in the order they were armed.
	armed []armedDeadline
	// ready is the activity queue: scheduled attempts in the order they
	// became ready.
	ready []readyActivity
	// ledger is the effects ledger: entries by idempotency key.
	ledger map[string]*LedgerEntry
	// reports are the judged late reports the run recorded.
	reports []api.EffectReport
	// counts are the committed occurrence counts.
	counts map[string]int32
}

type armedDeadline struct {
	d   Deadline
	run string
}

type readyActivity struct {
	id      int64
	attempt int32
}

// driftMargin is the engine's default Options.LeaseDriftMargin.
const driftMargin = 5 * time.Second

func newScript(t *testing.T) *script {
	s := &script{t: t, now: testStart}
	s.m = &Machine{Limits: DefaultLimits(), Defaults: DefaultDefaults(), NewRunID: func() string {
		s.ids++
		return fmt.Sprintf("run-%d", s.ids)
	}}
	return s
}

// newServiceScript returns a script that drives the machine as the
// service does (see script).
func newServiceScript(t *testing.T) *script {
	s := newScript(t)
	s.service = true
	s.m.DriftMargin = driftMargin
	s.ledger = map[string]*LedgerEntry{}
	s.counts = map[string]int32{}
	s.m.Occurrence = func(_ history.RunRef, okey string) (int32, error) { return s.counts[okey], nil }
	return s
}

func (s *script) start(req api.StartWorkflowRequest) {
	if req.WorkflowID == "" {
		req.WorkflowID, req.WorkflowType, req.TaskQueue = "wf", "Agent", "q"
	}
	st, out := s.m.Start(StartParams{Request: req, RunID: s.m.NewRunID()}, s.now)
	s.st = st
	s.history = nil
	s.armed, s.ready, s.reports = nil, nil, nil
	s.record("start", out, nil)
}

// step runs an input on the script's state itself (newScript's scripts).
func (s *script) step(name string, f func() (Output, error)) Output {
	s.t.Helper()
	out, err := f()
	s.record(name, out, err)
	return out
}

// do runs an input as the service does: on a copy of the state, kept only
// when the input succeeds; its occurrence counts are then committed.
func (s *script) do(name string, f func(st *RunState) (Output, error)) (Output, error) {
	s.t.Helper()
	st := s.st.Clone()
	out, err := f(st)
	if err == nil {
		s.st = st
		for k, n := range st.UncommittedOccurrences() {
			s.counts[k] = n
		}
		st.OccurrencesCommitted()
	}
	s.record(name, out, err)
	return out, err
}

// must is do for an input that must succeed.
func (s *script) must(name string, f func(st *RunState) (Output, error)) Output {
	s.t.Helper()
	out, err := s.do(name, f)
	if err != nil {
		s.t.Fatalf("%s: %v", name, err)
	}
	return out
}

// dispatchWFT hands the workflow task out and returns its epoch. A
// service script checks first that the task is ready.
func (s *script) dispatchWFT() int64 {
	s.t.Helper()
	if s.service {
		if w := s.st.WFT; !w.Scheduled || w.Started || w.BackoffUntil.After(s.now) {
			s.t.Fatalf("no workflow task ready at +%s: %+v", s.now.Sub(testStart), w)
		}
	}
	s.eps++
	s.arm(s.m.WFTDispatched(s.st, s.eps, s.now))
	fmt.Fprintf(&s.out, "-- workflow task dispatched (epoch %d, sees events < %d)\n", s.eps, s.st.NextEventID)
	return s.eps
}

// completeTask completes the dispatched workflow task with cmds.
func (s *script) completeTask(cmds ...api.Command) Output {
	s.t.Helper()
	if !s.st.WFT.Started {
		s.t.Fatalf("no workflow task was dispatched")
	}
	return s.must("complete workflow task", func(st *RunState) (Output, error) {
		return s.m.CompleteWFT(st, WFTCompletion{Commands: cmds, Identity: "w1"}, s.now)
	})
}

// signal delivers a signal, as the engine tests' signal does.
func (s *script) signal(name, input string) {
	s.t.Helper()
	s.must("signal "+name, func(st *RunState) (Output, error) {
		return s.m.Signal(st, name, jsonPayload(input), "", s.now)
	})
}

// resolve applies a person's resolution.
func (s *script) resolve(req api.ResolveActivityRequest) {
	s.t.Helper()
	s.must("resolve: "+req.Resolution.String(), func(st *RunState) (Output, error) { return s.m.Resolve(st, &req, s.now) })
}

// startWithActivity starts run id and completes its first task by
// scheduling one activity with opts; the activity is event 3.
func (s *script) startWithActivity(id string, effect history.EffectClass, opts history.ActivityOptions) {
	s.t.Helper()
	s.start(api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q", Input: jsonPayload(`"in"`)})
	s.complete(schedule("a", "Act", effect, opts))
}

// describedState is the state DescribeWorkflow reports for a.
func describedState(a *ActivityInfo) api.ActivityState {
	if a.Reconciling {
		return api.ActivityStateReconciling
	}
	return a.State
}

// noWFT fails the test if a workflow task is ready to be dispatched.
func (s *script) noWFT() {
	s.t.Helper()
	if w := s.st.WFT; w.Scheduled && !w.Started && !w.BackoffUntil.After(s.now) {
		s.t.Fatalf("a workflow task is ready at +%s, want none", s.now.Sub(testStart))
	}
}

func (s *script) complete(cmds ...api.Command) Output {
	s.t.Helper()
	s.dispatchWFT()
	if s.service {
		return s.must("complete workflow task", func(st *RunState) (Output, error) {
			return s.m.CompleteWFT(st, WFTCompletion{Commands: cmds, Identity: "w1"}, s.now)
		})
	}
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

// task is an activity task as a worker holds it: what its token says and
// what the task told the worker.
type task struct {
	sched    int64
	epoch    int64
	attempt  int32
	lookup   bool
	keyTask  bool
	key      string
	deadline time.Time
	details  history.Payload
}

// poll takes the first ready activity off the queue and dispatches it, as
// a worker's poll does; the queue's stale entries (the attempt is no
// longer waiting for a worker) are skipped.
func (s *script) poll() task {
	s.t.Helper()
	for len(s.ready) > 0 {
		r := s.ready[0]
		s.ready = s.ready[1:]
		if a, ok := s.st.Activities[r.id]; !ok || a.State != api.ActivityStateScheduled || a.Attempt != r.attempt {
			continue
		}
		s.eps++
		ep := s.eps
		s.must(fmt.Sprintf("poll: activity %d (epoch %d)", r.id, ep), func(st *RunState) (Output, error) {
			return s.m.DispatchDeclared(st, r.id, ep, "w1", nil, s.now)
		})
		a := s.st.Activities[r.id]
		return task{sched: r.id, epoch: ep, attempt: a.Attempt, lookup: a.Reconciling, keyTask: a.KeyPending, key: a.IdempotencyKey,
			deadline: a.LeaseDeadline, details: a.HeartbeatDetails}
	}
	s.t.Fatalf("no activity task ready at +%s", s.now.Sub(testStart))
	return task{}
}

// noActivity fails the test if an activity task is ready to be dispatched.
func (s *script) noActivity() {
	s.t.Helper()
	for _, r := range s.ready {
		if a, ok := s.st.Activities[r.id]; ok && a.State == api.ActivityStateScheduled && a.Attempt == r.attempt {
			s.t.Fatalf("activity %d is ready at +%s, want none", r.id, s.now.Sub(testStart))
		}
	}
}

// report sends an attempt's report as the service's CompleteActivity and
// FailActivity do: result is the result of a success, else the failure's
// message. A report for an action no longer pending is judged against its
// ledger entry.
func (s *script) report(tk task, kind ReportKind, result string) error {
	s.t.Helper()
	r := tk.report(kind)
	r.Identity = "w"
	if kind == ReportCompleted {
		r.Result = jsonPayload(result)
	} else {
		r.Failure = history.Failure{Message: result}
	}
	return s.send(r)
}

// report is a report of kind by tk's attempt, as the service fills it in
// from the task token.
func (tk task) report(kind ReportKind) AttemptReport {
	return AttemptReport{ScheduledEventID: tk.sched, Epoch: tk.epoch, Attempt: tk.attempt, Lookup: tk.lookup, Kind: kind}
}

// succeed completes tk's attempt with result, as the engine tests'
// completeActivity does.
func (s *script) succeed(tk task, result string) error {
	s.t.Helper()
	r := tk.report(ReportCompleted)
	r.Result = jsonPayload(result)
	return s.send(r)
}

// fail fails tk's attempt with f, as the engine tests' failActivity does.
func (s *script) fail(tk task, f history.Failure) error {
	s.t.Helper()
	r := tk.report(ReportFailed)
	r.Failure = f
	return s.send(r)
}

// send applies report r as the service does (its ScheduledEventID, Epoch,
// Attempt and Lookup are the task token's).
func (s *script) send(r AttemptReport) error {
	s.t.Helper()
	if !s.st.Status.Open() {
		s.t.Fatalf("a report for a closed run is the service's (engine.closedRunReport)")
	}
	var (
		key string
		le  *LedgerEntry
	)
	if _, pending := s.st.Activities[r.ScheduledEventID]; !pending {
		key = s.scheduled(r.ScheduledEventID).IdempotencyKey
		le = s.ledger[key] // the service reads the stored entry
	}
	name := fmt.Sprintf("report %s of attempt %d (epoch %d)", r.Kind, r.Attempt, r.Epoch)
	if r.Lookup {
		name = fmt.Sprintf("lookup reports %s (epoch %d)", r.Kind, r.Epoch)
	}
	var ack ReportAck
	_, err := s.do(name, func(st *RunState) (Output, error) {
		out, a, err := s.m.Report(st, r, key, le, s.now)
		ack = a
		return out, err
	})
	if err == nil && ack == AckStale {
		// The transition is committed; the worker is answered as stale
		// (the service's words).
		err = api.Errorf(api.ErrStaleAttempt, "activity %d of workflow %q: lease %d (attempt %d) is not current; its report was recorded",
			r.ScheduledEventID, s.st.WorkflowID, r.Epoch, r.Attempt)
		fmt.Fprintf(&s.out, "     (answered: %v)\n", err)
	}
	return err
}

func (s *script) mustReport(tk task, kind ReportKind, result string) {
	s.t.Helper()
	if err := s.report(tk, kind, result); err != nil {
		s.t.Fatalf("report %s of attempt %d: %v", kind, tk.attempt, err)
	}
}

// heartbeat records a heartbeat of tk's attempt as the service does (in
// memory, on the state itself); it returns the lease deadline and whether
// cancellation was requested.
func (s *script) heartbeat(tk task, details string) (time.Time, bool, error) {
	s.t.Helper()
	var p history.Payload
	if details != "" {
		p = jsonPayload(details)
	}
	deadline, cancel, err := s.m.Heartbeat(s.st, tk.sched, tk.epoch, p, s.now)
	fmt.Fprintf(&s.out, "-- heartbeat of epoch %d at +%s", tk.epoch, s.now.Sub(testStart))
	if err != nil {
		fmt.Fprintf(&s.out, ": error: %v\n", err)
	} else {
		fmt.Fprintf(&s.out, " => lease to +%s, cancel requested %v\n", deadline.Sub(testStart), cancel)
	}
	return deadline, cancel, err
}

// wait lets d pass: every armed deadline that comes due fires, in the
// order of its time (then of its arming), at the new time, as the
// service's timer heap fires them. A deadline that changes nothing is not
// recorded.
func (s *script) wait(d time.Duration) {
	s.t.Helper()
	s.now = s.now.Add(d)
	for {
		i := -1
		for j, a := range s.armed {
			if !a.d.At.After(s.now) && (i < 0 || a.d.At.Before(s.armed[i].d.At)) {
				i = j
			}
		}
		if i < 0 {
			return
		}
		a := s.armed[i]
		s.armed = slices.Delete(s.armed, i, i+1)
		if a.run != s.st.RunID {
			continue
		}
		st := s.st.Clone()
		out := s.m.Fire(st, a.d, s.now)
		s.st = st
		if !reflect.ValueOf(out).IsZero() {
			s.record("deadline "+kindName(a.d.Kind), out, nil)
		}
	}
}

// scheduled returns the ActivityScheduled event with id.
func (s *script) scheduled(id int64) *history.ActivityScheduled {
	s.t.Helper()
	for _, ev := range s.history {
		if a, ok := ev.Attrs.(*history.ActivityScheduled); ok && ev.ID == id {
			return a
		}
	}
	s.t.Fatalf("event %d is no ActivityScheduled", id)
	return nil
}

func (s *script) arm(d Deadline) {
	if !d.At.IsZero() && s.st != nil {
		s.armed = append(s.armed, armedDeadline{d: d, run: s.st.RunID})
	}
}

// applied does with a successful input's Output what the service does once
// it is committed: the events join the history, the deadlines are armed,
// the ready activities queued, the ledger changes folded into their
// entries and the judged reports recorded.
func (s *script) applied(out Output) {
	s.history = append(s.history, out.Events...)
	if !s.service {
		return
	}
	for _, d := range out.Deadlines {
		s.arm(d)
	}
	for _, id := range out.ActivitiesReady {
		s.ready = append(s.ready, readyActivity{id: id, attempt: s.st.Activities[id].Attempt})
	}
	for _, c := range out.Ledger {
		if c.Key == "" {
			continue
		}
		le := s.ledger[c.Key]
		if le == nil {
			le = &LedgerEntry{}
			s.ledger[c.Key] = le
		}
		le.Apply(c, s.st.RunID, s.now)
	}
	s.reports = append(s.reports, out.Reports...)
	for _, ev := range out.Events {
		if a, ok := ev.Attrs.(*history.ActivityScheduled); ok && a.IdempotencyKey != "" && s.ledger[a.IdempotencyKey] != nil {
			s.t.Fatalf("event %d schedules an action the ledger knows: deduplicating it is the service's (engine's txn.dedupe)", ev.ID)
		}
	}
}

func (s *script) advance(d time.Duration) { s.now = s.now.Add(d) }

// fireDue fires every deadline of the state that is due.
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
		"wft-timeout", "wft-backoff", "sticky-fallback", "run-timeout", "execution-timeout", "quiet"}[k]
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
	for _, c := range out.CancelChildren {
		notes = append(notes, fmt.Sprintf("cancel child %s run %s (%s)", c.WorkflowID, c.RunID, c.Reason))
	}
	for _, r := range out.Reports {
		notes = append(notes, fmt.Sprintf("report %s of attempt %d (other %d)", r.Verdict, r.Attempt, r.OtherAttempt))
	}
	if out.Closed {
		notes = append(notes, "closed "+s.st.Status.String())
	}
	if len(notes) > 0 {
		fmt.Fprintf(&s.out, "     => %s\n", strings.Join(notes, "; "))
	}
	s.applied(out)
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
		var v any
		if x.Encoding == "msgpack" && msgpack.Unmarshal(x.Data, &v) == nil {
			b, _ := json.Marshal(v) // decoded msgpack: maps with string keys (markers' data)
			return string(b)
		}
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
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
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

// Assertions on the history, as the engine's tests make them.

// wantTypes fails the test unless evs are of the given types, in order.
func wantTypes(t *testing.T, evs []history.Event, want string) {
	t.Helper()
	var got []string
	for _, ev := range evs {
		got = append(got, ev.Type().String())
	}
	if g, w := strings.Join(got, " "), strings.Join(strings.Fields(want), " "); g != w {
		t.Fatalf("event types:\n got %s\nwant %s", g, w)
	}
}

// find returns the first event of type T in evs.
func find[T history.Attributes](t *testing.T, evs []history.Event) (T, history.Event) {
	t.Helper()
	for _, ev := range evs {
		if a, ok := ev.Attrs.(T); ok {
			return a, ev
		}
	}
	var zero T
	t.Fatalf("no %T in the history", zero)
	return zero, history.Event{}
}

// count counts the events of type typ in evs.
func count(evs []history.Event, typ history.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

// types renders a history as its event type names, one per line.
func types(evs []history.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "%d %s\n", ev.ID, ev.Type())
	}
	return b.String()
}

// wantErr fails the test unless err is sentinel.
func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("error %v, want %v", err, sentinel)
	}
}
