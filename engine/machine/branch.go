package machine

import (
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Resets and forks: a new run whose history begins with a copy of
// another run's history up to a workflow task (Branch).
//
// The prefix is the base run's events before a WorkflowTaskCompleted
// event: what that workflow task saw. It is not copied: the new run's
// history refers to it where it is stored (BaseRef.Sources), and the new
// run's own events are stored numbered from 1 at the point
// (RunState.StoredOffset); the service reads the two as one history. The task's own commands, and
// everything after, are not copied: the new run's first workflow task runs
// the (possibly changed) code from that point. A WorkflowReset event marks
// where the copy ends.
//
// Nothing the base run did after the point is done again behind the
// world's back. The occurrence counters of the new run are those of the
// prefix (rebuilt from the OccurrenceKey its keyed events carry), so an
// action the new run schedules again gets the key the base run gave it, and
// the effects ledger — which outlives runs — answers it
// (ActivityDeduplicated) or, when its outcome is unknown, pauses the run
// (the service's dedupe). A fork has a workflow id of its own: its keys
// are its own, and each action also carries its key in the base's key
// space (ActivityInfo.OriginKey), which the service looks up in the base's
// ledger; an action that ledger cannot answer is held for a person
// (HoldForFork) or sent to a sandbox task queue. A child the base started
// before the point and that closed since is answered from the base's
// history; one still running refuses the branch.

// The kinds of branch.
const (
	// BranchReset is a new run of the same workflow id; the base run is
	// terminated (when open) and linked to it.
	BranchReset = "reset"
	// BranchFork is a run of a new workflow id; the base run goes on.
	BranchFork = "fork"
)

// BaseRef names the run a reset or a fork copied its history from.
type BaseRef struct {
	Kind       string
	WorkflowID string
	RunID      string
	// AtEventID: the base's events before it were copied.
	AtEventID int64
	// SandboxQueue is set on a fork whose actions the base's ledger cannot
	// answer go to this task queue instead of being held.
	SandboxQueue string `msgpack:",omitempty"`
	// Sources say where the run's events before AtEventID are stored: in
	// the base run, or, when the base is itself a reset or a fork, in the
	// runs its history refers to. The run's own stored events are numbered
	// from 1 at AtEventID.
	Sources []HistorySource
}

// HistorySource is a stretch of a run's history stored as another run's
// events: the ids [From, To) of the history are the events of run
// (WorkflowID, RunID) stored from id Stored on.
type HistorySource struct {
	WorkflowID string
	RunID      string
	From, To   int64
	Stored     int64
}

// ForkOrigin is what makes a run a fork's: the workflow whose ledger
// answers the actions its own ledger does not know, and the sandbox queue
// its actions go to instead of being held ("" holds them).
type ForkOrigin struct {
	WorkflowID   string
	SandboxQueue string `msgpack:",omitempty"`
}

// Fork returns the fork origin of the run, or nil when the run is not a
// fork's (nor a reset of one, nor a run it continued as). A fork stored
// before ForkOf existed is known by its Base.
func (st *RunState) Fork() *ForkOrigin {
	if st.ForkOf != nil {
		return st.ForkOf
	}
	if st.Base != nil && st.Base.Kind == BranchFork {
		return &ForkOrigin{WorkflowID: st.Base.WorkflowID, SandboxQueue: st.Base.SandboxQueue}
	}
	return nil
}

// Ref returns the run whose events the source is.
func (s HistorySource) Ref() history.RunRef {
	return history.RunRef{WorkflowID: s.WorkflowID, RunID: s.RunID}
}

// HistorySources says where each stretch of st's history is stored, up to
// (not including) event to.
func (st *RunState) HistorySources(to int64) []HistorySource {
	var out []HistorySource
	own := HistorySource{WorkflowID: st.WorkflowID, RunID: st.RunID, From: 1, To: st.NextEventID, Stored: 1}
	if st.Base != nil {
		out = append(out, st.Base.Sources...)
		own.From = st.Base.AtEventID
	}
	out = append(out, own)
	clipped := out[:0:0]
	for _, s := range out {
		if s.From >= to {
			break
		}
		s.To = min(s.To, to)
		clipped = append(clipped, s)
	}
	return clipped
}

// StoredOffset is how much less than their ids in the run's history its
// own stored events are numbered: 0 for most runs, AtEventID-1 for a
// reset's or a fork's, whose history begins with its base's events.
func (st *RunState) StoredOffset() int64 {
	if st.Base == nil {
		return 0
	}
	return st.Base.AtEventID - 1
}

// BranchParams describe a reset or a fork.
type BranchParams struct {
	Kind string
	// Base is the base run's state; Events its whole history.
	Base   *RunState
	Events []history.Event
	// AtEventID must name a WorkflowTaskCompleted event of Events.
	AtEventID int64
	// WorkflowID and RunID name the new run (the base's workflow id for a
	// reset).
	WorkflowID string
	RunID      string
	// TaskQueue, for a fork, is the task queue of its workflow tasks (""
	// is the base's); SandboxQueue, when set, receives the fork's actions
	// the base's ledger cannot answer (else they are held).
	TaskQueue    string
	SandboxQueue string
	// Reapply copies the base's signals received after the point.
	Reapply          bool
	Reason, Identity string
}

// ErrChildRunning refuses a branch whose prefix started a child that has
// not closed: its outcome would go to the base run, never to the new one.
var ErrChildRunning = fmt.Errorf("%w: a child started before the point is still running", api.ErrFailedPrecondition)

// CheckBranchPoint checks that at names a workflow task's completion in
// events (a history numbered from 1).
func CheckBranchPoint(events []history.Event, at int64) error {
	if at < 2 || at > int64(len(events)) {
		return api.Errorf(api.ErrInvalidArgument, "event %d is not in the run's history (events 1 to %d)", at, len(events))
	}
	if _, ok := events[at-1].Attrs.(*history.WorkflowTaskCompleted); !ok {
		return api.Errorf(api.ErrInvalidArgument, "event %d is a %s, not a WorkflowTaskCompleted: a run is reset or forked to a workflow task",
			at, events[at-1].Attrs.EventType())
	}
	return nil
}

// Branch makes the state and the first events of a reset's or a fork's
// run: the base's history before p.AtEventID, a WorkflowReset event, the
// outcomes of children that closed after the point, the signals received
// after it (with Reapply), and a workflow task. The pending activities of
// the prefix are dispatched again; the service first consults the ledger
// for those with a key (PendingKeyed), as for any new schedule.
func (m *Machine) Branch(p BranchParams, now time.Time) (*RunState, Output, error) {
	if err := CheckBranchPoint(p.Events, p.AtEventID); err != nil {
		return nil, Output{}, err
	}
	for i, ev := range p.Events {
		if ev.ID != int64(i)+1 {
			return nil, Output{}, api.Errorf(api.ErrInternal, "base history is not numbered from 1 (event %d at %d)", ev.ID, i+1)
		}
	}
	st := branchState(p, now)
	t := m.begin(st, now)
	b := &brancher{t: t, p: p}
	for _, ev := range p.Events[:p.AtEventID-1] {
		if err := b.copy(ev); err != nil {
			return nil, Output{}, err
		}
	}
	after := p.Events[p.AtEventID-1:]
	mark := &history.WorkflowReset{Kind: p.Kind, BaseWorkflowID: p.Base.WorkflowID, BaseRunID: p.Base.RunID, AtEventID: p.AtEventID,
		Reason: p.Reason, Identity: p.Identity, Effects: forkEffects(p)}
	signals := laterSignals(after, p.Reapply)
	mark.Reapplied = int32(len(signals))
	t.add(mark)
	if err := b.answerChildren(after); err != nil {
		return nil, Output{}, err
	}
	for _, s := range signals {
		st.Signals++
		t.add(&history.SignalReceived{Name: s.Name, Input: s.Input, Identity: s.Identity})
	}
	b.resume()
	return st, t.out, nil
}

// forkEffects is WorkflowReset.Effects for p.
func forkEffects(p BranchParams) string {
	sandbox := p.SandboxQueue
	if p.Kind != BranchFork {
		f := p.Base.Fork()
		if f == nil {
			return ""
		}
		sandbox = f.SandboxQueue
	}
	if sandbox != "" {
		return "sandbox:" + sandbox
	}
	return "hold"
}

// branchState is the new run's state before its events: the base's
// settings, its deadlines counted from now.
func branchState(p BranchParams, now time.Time) *RunState {
	base := p.Base
	st := &RunState{
		WorkflowID:       p.WorkflowID,
		RunID:            p.RunID,
		FirstRunID:       p.RunID,
		WorkflowType:     base.WorkflowType,
		TaskQueue:        base.TaskQueue,
		Status:           api.StatusRunning,
		StartTime:        now,
		ExecutionTimeout: base.ExecutionTimeout,
		RunTimeout:       base.RunTimeout,
		TaskTimeout:      base.TaskTimeout,
		NextEventID:      1,
		Base: &BaseRef{Kind: p.Kind, WorkflowID: base.WorkflowID, RunID: base.RunID, AtEventID: p.AtEventID, SandboxQueue: p.SandboxQueue,
			Sources: base.HistorySources(p.AtEventID)},
	}
	switch {
	case p.Kind == BranchReset:
		st.FirstRunID = base.FirstRunID
		// A reset of a fork's run is still the fork: its actions are
		// answered from the same base ledger, or held, or sandboxed.
		if f := base.Fork(); f != nil {
			c := *f
			st.ForkOf = &c
		}
	case p.Kind == BranchFork:
		st.ForkOf = &ForkOrigin{WorkflowID: base.WorkflowID, SandboxQueue: p.SandboxQueue}
	}
	if p.TaskQueue != "" {
		st.TaskQueue = p.TaskQueue
	}
	if st.ExecutionTimeout > 0 {
		st.ExecutionDeadline = now.Add(st.ExecutionTimeout)
	}
	if st.RunTimeout > 0 {
		st.RunDeadline = now.Add(st.RunTimeout)
	}
	return st
}

// laterSignals returns the signals received after the point, when they
// are to be applied again.
func laterSignals(after []history.Event, reapply bool) []*history.SignalReceived {
	if !reapply {
		return nil
	}
	var out []*history.SignalReceived
	for _, ev := range after {
		if s, ok := ev.Attrs.(*history.SignalReceived); ok {
			out = append(out, s)
		}
	}
	return out
}

// brancher folds the copied prefix into the new run's state.
type brancher struct {
	t *transition
	p BranchParams
}

// copy takes one event of the prefix into the new run's history — by
// reference: it stays stored where it is (BaseRef.Sources) — and applies
// it to the state.
func (b *brancher) copy(ev history.Event) error {
	b.t.st.NextEventID++
	return b.apply(ev)
}

// apply changes the state as the event changed the base's.
func (b *brancher) apply(ev history.Event) error {
	st := b.t.st
	switch a := ev.Attrs.(type) {
	case *history.WorkflowStarted:
		st.Budget = a.Budget
	case *history.ActivityScheduled:
		return b.scheduled(ev.ID, a)
	case *history.ActivityKeyed:
		return b.keyed(ev.ID, a)
	case *history.ActivityCancelRequested:
		if act := st.Activities[a.ScheduledEventID]; act != nil {
			act.CancelRequested = true
		}
	case *history.ActivityHeld:
		// Held by the fork whose run this resets: its key in the base's
		// key space is the one the hold recorded.
		if act := st.Activities[a.ScheduledEventID]; act != nil && a.OriginKey != "" && st.Fork() != nil && b.p.Base.Fork() != nil &&
			st.Fork().WorkflowID == b.p.Base.Fork().WorkflowID {
			act.OriginKey = a.OriginKey
		}
	case *history.ActivityResolved:
		if a.Resolution == history.ResolvedHappened || a.Resolution == history.ResolvedFailed {
			delete(st.Activities, a.ScheduledEventID)
		}
	case *history.TimerStarted:
		if st.Timers == nil {
			st.Timers = map[string]*TimerInfo{}
		}
		st.Timers[a.TimerID] = &TimerInfo{TimerID: a.TimerID, StartedEventID: ev.ID, FireAt: a.FireAt}
	case *history.TimerFired:
		delete(st.Timers, a.TimerID)
	case *history.TimerCanceled:
		delete(st.Timers, a.TimerID)
	case *history.SignalReceived:
		st.Signals++
	case *history.WorkflowCancelRequested:
		st.CancelRequested = true
	case *history.BudgetUpdated:
		if !a.Stop {
			st.Budget = a.Budget
		}
	case *history.MarkerRecorded:
		b.t.approvalMarker(&api.RecordMarkerCommand{Name: a.Name, ID: a.ID, Data: a.Data}, ev.ID, nil)
		if w := lastApproval(st, a.ID); w != nil {
			w.Since = ev.Time
		}
	case *history.ChildWorkflowStarted:
		if st.Children == nil {
			st.Children = map[int64]*ChildInfo{}
		}
		st.Children[ev.ID] = &ChildInfo{InitiatedEventID: ev.ID, WorkflowID: a.WorkflowID, RunID: a.RunID, WorkflowType: a.WorkflowType,
			ParentClosePolicy: a.ParentClosePolicy}
	case *history.WorkflowUpdateAccepted:
		st.Updates = append(st.Updates, UpdateRecord{ID: a.UpdateID, AcceptedEventID: ev.ID, Name: a.Name})
	case *history.WorkflowUpdateCompleted:
		if u := st.Update(a.UpdateID); u != nil {
			u.CompletedEventID = ev.ID
		}
	case *history.ChildWorkflowCancelRequested:
		if c := st.Children[a.InitiatedEventID]; c != nil {
			c.CancelRequested = true
		}
	case *history.ChildWorkflowCompleted:
		delete(st.Children, a.InitiatedEventID)
	case *history.ChildWorkflowFailed:
		delete(st.Children, a.InitiatedEventID)
	default:
		b.closed(ev)
	}
	return nil
}

// lastApproval returns the approval wait of key, if the run has one.
func lastApproval(st *RunState, key string) *ApprovalWait {
	for i := range st.Approvals {
		if st.Approvals[i].Key == key {
			return &st.Approvals[i]
		}
	}
	return nil
}

// closed applies an event that ends an activity, counting its usage.
func (b *brancher) closed(ev history.Event) {
	var id int64
	var u history.Usage
	switch a := ev.Attrs.(type) {
	case *history.ActivityCompleted:
		id, u = a.ScheduledEventID, a.Usage
	case *history.ActivityFailed:
		id, u = a.ScheduledEventID, a.Usage
	case *history.ActivityTimedOut:
		id, u = a.ScheduledEventID, a.Usage
	case *history.ActivityCanceled:
		id, u = a.ScheduledEventID, a.Usage
	case *history.ActivityDeduplicated:
		id = a.ScheduledEventID
	default:
		return
	}
	st := b.t.st
	act := st.Activities[id]
	if act == nil {
		return
	}
	if u.Tokens() > 0 || u.CachedTokens > 0 || u.CostUSD > 0 {
		st.Usage = addTotal(st.Usage, u)
		addByModel(st, u)
	}
	delete(st.Activities, id)
}

// addByModel adds u to the run's usage of its model.
func addByModel(st *RunState, u history.Usage) {
	for i := range st.UsageByModel {
		if st.UsageByModel[i].Model == u.Model {
			st.UsageByModel[i] = st.UsageByModel[i].Add(u)
			return
		}
	}
	st.UsageByModel = append(st.UsageByModel, history.Usage{Model: u.Model}.Add(u))
}

// scheduled applies an ActivityScheduled event of the prefix: the
// activity is pending until an event of the prefix ends it.
func (b *brancher) scheduled(id int64, s *history.ActivityScheduled) error {
	st := b.t.st
	opts := s.Options
	if s.Effect != history.Read {
		opts.TaskQueue = st.sandboxQueue(opts.TaskQueue)
	}
	a := &ActivityInfo{ScheduledEventID: id, ActivityID: s.ActivityID, ActivityType: s.ActivityType, Options: opts,
		Effect: s.Effect, HasReconcile: s.HasReconcile, State: api.ActivityStateScheduled, Attempt: 1, Metered: s.Metered,
		ShareResult: s.ShareResult, KeyPending: s.Effect != history.Read && s.IdempotencyKey == ""}
	if s.Metered {
		st.Turns++
		a.Turn = st.Turns
	}
	if st.Activities == nil {
		st.Activities = map[int64]*ActivityInfo{}
	}
	st.Activities[id] = a
	return b.key(a, id, s.IdempotencyKey, s.OccurrenceKey)
}

// keyed applies an ActivityKeyed event of the prefix.
func (b *brancher) keyed(id int64, k *history.ActivityKeyed) error {
	a := b.t.st.Activities[k.ScheduledEventID]
	if a == nil {
		return nil
	}
	a.Effect, a.HasReconcile, a.KeyPending = k.Effect, k.HasReconcile, false
	return b.key(a, id, k.IdempotencyKey, k.OccurrenceKey)
}

// key gives a an action's key from the prefix and counts its occurrence.
// In a fork the prefix's key is the base's (OriginKey), and the fork's own
// key is derived from it.
func (b *brancher) key(a *ActivityInfo, id int64, key, digest string) error {
	if key == "" {
		return nil
	}
	if digest == "" {
		return api.Errorf(api.ErrFailedPrecondition,
			"event %d (%s) was recorded before Cairn kept occurrence keys: a reset or fork past it could not give the actions after it the keys the base run gave them",
			id, a.ActivityType)
	}
	st := b.t.st
	if st.occ == nil {
		st.occ = map[string]int32{}
	}
	st.occ[a.ActivityType+"\x00"+digest]++
	// The event's key is in the key space of the workflow that stored it:
	// the new run's own (a reset's prefix), or the base's (a fork's, or a
	// reset's of a fork, whose history begins with its base's events).
	src := b.storedBy(id)
	a.IdempotencyKey = keyIn(st.WorkflowID, src, a.ActivityType, key)
	if f := st.Fork(); f != nil {
		a.OriginKey = keyIn(f.WorkflowID, src, a.ActivityType, key)
	}
	return nil
}

// keyIn is the key in workflow wf's key space of an action that workflow
// src recorded under key: a fork's action copied from its base is keyed
// hash(fork, type, base's key, 0).
func keyIn(wf, src, activityType, key string) string {
	if wf == src {
		return key
	}
	return idempotencyKey(wf, activityType, []byte(key), 0)
}

// KeyOf returns, in the key space of workflowID (the run's), the key of
// an action that event id of the run's prefix recorded under key (the key
// space of the workflow that stored the event).
func (b *BaseRef) KeyOf(workflowID string, id int64, activityType, key string) string {
	src := b.WorkflowID
	for _, s := range b.Sources {
		if id >= s.From && id < s.To {
			src = s.WorkflowID
			break
		}
	}
	return keyIn(workflowID, src, activityType, key)
}

// storedBy returns the workflow id whose events hold the prefix's event id.
func (b *brancher) storedBy(id int64) string {
	for _, s := range b.p.Base.HistorySources(b.p.AtEventID) {
		if id >= s.From && id < s.To {
			return s.WorkflowID
		}
	}
	return b.p.Base.WorkflowID
}

// answerChildren records the outcome of every child still running at the
// point that has closed since (as the base recorded it); a child still
// running refuses the branch.
func (b *brancher) answerChildren(after []history.Event) error {
	st := b.t.st
	for _, id := range sortedKeys(st.Children) {
		c := st.Children[id]
		ev := childOutcome(after, id)
		if ev == nil {
			return fmt.Errorf("%w: child workflow %q (started at event %d) has not closed; reset or fork to a point before its start, or once it closed",
				ErrChildRunning, c.WorkflowID, id)
		}
		b.t.add(ev)
		delete(st.Children, id)
	}
	return nil
}

// childOutcome returns a copy of the event that closed the child started
// at initiated, or nil.
func childOutcome(after []history.Event, initiated int64) history.Attributes {
	for _, ev := range after {
		switch a := ev.Attrs.(type) {
		case *history.ChildWorkflowCompleted:
			if a.InitiatedEventID == initiated {
				c := *a
				return &c
			}
		case *history.ChildWorkflowFailed:
			if a.InitiatedEventID == initiated {
				c := *a
				return &c
			}
		}
	}
	return nil
}

// resume arms what the prefix left pending: its timers, its activities
// (each a new schedule of this run, dispatched as such), the run's
// deadlines, and a workflow task.
func (b *brancher) resume() {
	t, st := b.t, b.t.st
	for _, id := range sortedKeys(st.Timers) {
		ti := st.Timers[id]
		t.deadline(Deadline{At: ti.FireAt, Kind: DeadlineUserTimer, Name: ti.TimerID, Epoch: ti.StartedEventID})
	}
	for _, id := range sortedKeys(st.Activities) {
		a := st.Activities[id]
		a.ScheduledTime = t.now
		if a.Options.ScheduleToCloseTimeout > 0 {
			t.deadline(Deadline{At: t.now.Add(a.Options.ScheduleToCloseTimeout), Kind: DeadlineScheduleToClose, ID: id})
		}
		if a.Metered && t.holdIfOverBudget(a) {
			continue
		}
		t.readyActivity(a)
	}
	t.deadline(Deadline{At: st.ExecutionDeadline, Kind: DeadlineExecutionTimeout})
	t.deadline(Deadline{At: st.RunDeadline, Kind: DeadlineRunTimeout})
	t.needWFT()
}

// PendingKeyed returns the scheduled event ids of the activities with a
// key that a branch left pending, in order: the service consults the
// ledger for each before it dispatches them.
func PendingKeyed(st *RunState) []int64 {
	var ids []int64
	for _, id := range sortedKeys(st.Activities) {
		if a := st.Activities[id]; a.IdempotencyKey != "" && a.State == api.ActivityStateScheduled {
			ids = append(ids, id)
		}
	}
	return ids
}

// sandboxQueue is the task queue of an action of the run scheduled on
// queue: a fork with a sandbox sends its actions there.
func (st *RunState) sandboxQueue(queue string) string {
	if f := st.Fork(); f != nil && f.SandboxQueue != "" {
		return f.SandboxQueue
	}
	return queue
}

// HoldForFork holds a fork's action that its base's ledger could not
// answer: it is not performed, and the run waits for a person, who
// performs it (Resolve with history.ResolvedPerform) or gives the result
// to use instead (ResolvedHappened), or fails it.
func (m *Machine) HoldForFork(st *RunState, schedID int64, reason string, now time.Time) Output {
	t := m.begin(st, now)
	a, ok := st.Activities[schedID]
	if !ok || a.State != api.ActivityStateScheduled {
		return t.out
	}
	a.State, a.ForkHeld = api.ActivityStateUnknown, true
	a.UnknownReason, a.UnknownSince = "fork: effect held ("+reason+")", now
	t.add(&history.ActivityHeld{ScheduledEventID: schedID, OriginKey: a.OriginKey, Reason: reason})
	return t.out
}
