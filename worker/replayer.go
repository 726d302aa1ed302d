package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
)

// ErrBadHistory is wrapped when a history cannot be replayed at all (empty,
// not starting with WorkflowStarted).
var ErrBadHistory = errors.New("worker: history cannot be replayed")

// Replayer replays recorded histories through registered workflow code on
// the same runtime the live worker uses. A replay that succeeds proves the
// code still produces the recorded decisions; one that fails returns the
// *sdk.NondeterminismError (or panic) that a live worker would hit.
//
//	r := worker.NewReplayer(worker.ReplayerOptions{})
//	r.RegisterWorkflow(PayInvoice)
//	err := r.ReplayFile("invoice-INV-9.json", worker.ReplayOptions{Trace: os.Stdout})
type Replayer struct {
	reg  *sdk.Registry
	opts ReplayerOptions
}

// ReplayerOptions configure a Replayer.
type ReplayerOptions struct {
	// Converter decodes payloads (default sdk.DefaultConverter()).
	Converter sdk.Converter
	// Registry, when set, is used instead of a new one (share a worker's).
	Registry *sdk.Registry
	// SuggestContinueAsNewAt is the engine's continue-as-new suggestion
	// threshold the history was recorded under (default
	// api.DefaultSuggestContinueAsNewAt).
	SuggestContinueAsNewAt int64
	// SuggestContinueAsNewBytes is its size threshold (default
	// api.DefaultSuggestContinueAsNewBytes).
	SuggestContinueAsNewBytes int64
}

// ReplayOptions configure one replay.
type ReplayOptions struct {
	// Trace, when set, receives a step-by-step account: for each decision,
	// the events delivered to the code, the commands it produced, and the
	// line of workflow code each coroutine was then waiting at.
	Trace io.Writer
	// Chunks resolves payloads the history records by reference (large
	// results, signals). ReplayFile uses the chunks of a self-contained
	// export (cairn history export --inline) and ReplayWorkflow the
	// server's; without either, a replay that must decode such a payload
	// fails naming it. Transcripts (model-call inputs) are never read: the
	// replay compares their references.
	Chunks history.ChunkSource
}

// NewReplayer returns a Replayer with its own registry (or opts.Registry).
func NewReplayer(opts ReplayerOptions) *Replayer {
	if opts.Converter == nil {
		opts.Converter = sdk.DefaultConverter()
	}
	if opts.SuggestContinueAsNewAt == 0 {
		opts.SuggestContinueAsNewAt = api.DefaultSuggestContinueAsNewAt
	}
	if opts.SuggestContinueAsNewBytes == 0 {
		opts.SuggestContinueAsNewBytes = api.DefaultSuggestContinueAsNewBytes
	}
	reg := opts.Registry
	if reg == nil {
		reg = sdk.NewRegistry()
	}
	return &Replayer{reg: reg, opts: opts}
}

// RegisterWorkflow registers a workflow function to replay.
func (r *Replayer) RegisterWorkflow(fn any, opts ...sdk.RegisterOptions) error {
	var o sdk.RegisterOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return r.reg.RegisterWorkflow(fn, o)
}

// RegisterActivity registers an activity's declaration (its effect class
// and business key shape the commands workflow code produces); the activity
// itself never runs during replay.
func (r *Replayer) RegisterActivity(fn any, opts ...activities.Options) error {
	var o activities.Options
	if len(opts) > 0 {
		o = opts[0]
	}
	return r.reg.RegisterActivity(fn, sdk.RegisterActivityOptions{Name: o.Name, Effect: o.Effect, BusinessKey: o.BusinessKey,
		HasReconcile: o.Reconcile != nil, Metered: o.Metered})
}

// ReplayFile replays a history exported as JSON (cairn history export).
func (r *Replayer) ReplayFile(path string, opts ReplayOptions) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("worker: replay: %w", err)
	}
	defer f.Close()
	doc, err := history.ImportDocument(f)
	if err != nil {
		return fmt.Errorf("worker: replay %s: %w", path, err)
	}
	if opts.Chunks == nil && doc.Chunks != nil {
		opts.Chunks = doc.Chunks
	}
	return r.ReplayHistory(doc.Run, doc.Events, opts)
}

// ReplayWorkflow fetches a run's history through c and replays it.
func (r *Replayer) ReplayWorkflow(ctx context.Context, c client.Client, workflowID, runID string, opts ReplayOptions) error {
	events, err := c.GetHistory(ctx, workflowID, runID)
	if err != nil {
		return err
	}
	if opts.Chunks == nil {
		opts.Chunks = client.NewChunkCache(c.Service(), 0)
	}
	return r.ReplayHistory(history.RunRef{WorkflowID: workflowID, RunID: runID}, events, opts)
}

// ReplayHistory replays events from the start, exactly as a worker
// rebuilds a run it does not have cached: every recorded decision is re-run
// (IsReplaying is true, GetVersion and SideEffect return what history
// recorded, logging is silent) and its commands are matched against the
// recorded ones. A history that ends with events no decision has seen yet
// (an open run) ends with a live decision, whose commands are not checked.
func (r *Replayer) ReplayHistory(run history.RunRef, events []history.Event, opts ReplayOptions) error {
	if len(events) == 0 {
		return fmt.Errorf("%w: no events", ErrBadHistory)
	}
	started, ok := events[0].Attrs.(*history.WorkflowStarted)
	if !ok || events[0].ID != 1 {
		return fmt.Errorf("%w: the first event is %s, not WorkflowStarted", ErrBadHistory, events[0])
	}
	task := &api.WorkflowTask{WorkflowID: run.WorkflowID, RunID: run.RunID, WorkflowType: started.WorkflowType,
		TaskQueue: started.TaskQueue, Attempt: 1, FirstEventID: 1, NextEventID: events[len(events)-1].ID + 1,
		SuggestContinueAsNewAt: r.opts.SuggestContinueAsNewAt, SuggestContinueAsNewBytes: r.opts.SuggestContinueAsNewBytes}
	eo := sdk.ExecutionOptions{Converter: r.opts.Converter}
	if opts.Trace != nil {
		n := 0
		paths := newTracePaths()
		eo.OnDecision = func(d *sdk.DecisionTrace) {
			n++
			r.trace(opts.Trace, n, d, paths)
		}
	}
	// The workflow type first: a history of a type this replayer does not
	// know fails saying so, whatever else it lacks.
	exec, err := sdk.NewExecution(r.reg, task, eo)
	if err != nil {
		return err
	}
	defer exec.Close()
	task.Events = append([]history.Event(nil), events...) // resolved copies go here, not into the caller's slice
	if err := sdk.ResolveEventPayloads(context.Background(), opts.Chunks, task.Events); err != nil {
		return fmt.Errorf("%w: %w (export it with --inline to carry its chunks)", ErrBadHistory, err)
	}
	_, err = exec.ProcessTask(task)
	return err
}

func (r *Replayer) trace(w io.Writer, n int, d *sdk.DecisionTrace, paths tracePaths) {
	if d.Replayed {
		fmt.Fprintf(w, "── decision %d: replayed, recorded at event %d\n", n, d.CompletedEventID)
	} else {
		fmt.Fprintf(w, "── decision %d: live (not recorded in this history)\n", n)
	}
	for _, ev := range d.Events {
		fmt.Fprintf(w, "   event %4d  %s\n", ev.ID, describeEvent(ev))
	}
	for _, c := range d.Commands {
		fmt.Fprintf(w, "   command     %s\n", describeCommand(c))
	}
	if d.Err != nil {
		fmt.Fprintf(w, "   ERROR       %v\n", d.Err)
	}
	for _, line := range waitingLines(d.Stacks(), paths) {
		fmt.Fprintf(w, "   waiting at  %s\n", line)
	}
}

// tracePaths are the directories a trace's file paths are shown relative
// to: the working directory, then the root of the Go module holding it.
type tracePaths []string

func newTracePaths() tracePaths {
	wd, err := os.Getwd()
	if err != nil {
		return nil
	}
	out := tracePaths{wd}
	for dir := wd; ; {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if dir != wd {
				out = append(out, dir)
			}
			return out
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return out
		}
		dir = parent
	}
}

// show returns loc ("/abs/path/file.go:40") relative to the first of the
// directories that holds it, or as it is.
func (ps tracePaths) show(loc string) string {
	if !filepath.IsAbs(loc) {
		return loc // a binary built with -trimpath: module paths already
	}
	for _, dir := range ps {
		if rel, err := filepath.Rel(dir, loc); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return rel
		}
	}
	return loc
}

func describeEvent(ev history.Event) string {
	switch a := ev.Attrs.(type) {
	case *history.ActivityScheduled:
		return fmt.Sprintf("%s %s (id %s)", ev.Type(), a.ActivityType, a.ActivityID)
	case *history.ActivityCompleted:
		return fmt.Sprintf("%s of %d", ev.Type(), a.ScheduledEventID)
	case *history.ActivityFailed:
		return fmt.Sprintf("%s of %d: %s", ev.Type(), a.ScheduledEventID, a.Failure.Error())
	case *history.ActivityTimedOut:
		return fmt.Sprintf("%s of %d (%s)", ev.Type(), a.ScheduledEventID, a.Timeout)
	case *history.ActivityCanceled:
		return fmt.Sprintf("%s of %d", ev.Type(), a.ScheduledEventID)
	case *history.ActivityResolved:
		return fmt.Sprintf("%s of %d (%s by %s)", ev.Type(), a.ScheduledEventID, a.Resolution, a.By)
	case *history.ActivityDeduplicated:
		return fmt.Sprintf("%s of %d", ev.Type(), a.ScheduledEventID)
	case *history.TimerStarted:
		return fmt.Sprintf("%s %s (%s)", ev.Type(), a.TimerID, a.Duration)
	case *history.TimerFired:
		return fmt.Sprintf("%s %s", ev.Type(), a.TimerID)
	case *history.SignalReceived:
		return fmt.Sprintf("%s %s", ev.Type(), a.Name)
	case *history.WorkflowUpdateAccepted:
		return fmt.Sprintf("%s %s (id %s)", ev.Type(), a.Name, a.UpdateID)
	case *history.WorkflowUpdateCompleted:
		return fmt.Sprintf("%s %s (accepted at %d)", ev.Type(), a.UpdateID, a.AcceptedEventID)
	case *history.ChildWorkflowCompleted:
		return fmt.Sprintf("%s of %d", ev.Type(), a.InitiatedEventID)
	case *history.ChildWorkflowCancelRequested:
		return fmt.Sprintf("%s of %d", ev.Type(), a.InitiatedEventID)
	case *history.ChildWorkflowFailed:
		return fmt.Sprintf("%s of %d: %s", ev.Type(), a.InitiatedEventID, a.Failure.Error())
	case *history.WorkflowCancelRequested:
		return fmt.Sprintf("%s (%s)", ev.Type(), a.Reason)
	case *history.WorkflowTaskCompleted:
		return fmt.Sprintf("%s (decided having seen event %d)", ev.Type(), a.SeenEventID)
	}
	return ev.Type().String()
}

func describeCommand(c api.Command) string {
	switch {
	case c.ScheduleActivity != nil:
		return fmt.Sprintf("%s %s (id %s)", c.Type, c.ScheduleActivity.ActivityType, c.ScheduleActivity.ActivityID)
	case c.RequestCancelActivity != nil:
		return fmt.Sprintf("%s of %d", c.Type, c.RequestCancelActivity.ScheduledEventID)
	case c.RequestCancelChildWorkflow != nil:
		return fmt.Sprintf("%s of %d (%s)", c.Type, c.RequestCancelChildWorkflow.InitiatedEventID, c.RequestCancelChildWorkflow.WorkflowID)
	case c.StartTimer != nil:
		return fmt.Sprintf("%s %s (%s)", c.Type, c.StartTimer.TimerID, c.StartTimer.Duration)
	case c.CancelTimer != nil:
		return fmt.Sprintf("%s %s", c.Type, c.CancelTimer.TimerID)
	case c.RecordMarker != nil:
		return fmt.Sprintf("%s %s/%s", c.Type, c.RecordMarker.Name, c.RecordMarker.ID)
	case c.StartChildWorkflow != nil:
		return fmt.Sprintf("%s %s (%s)", c.Type, c.StartChildWorkflow.WorkflowType, c.StartChildWorkflow.WorkflowID)
	case c.SignalExternalWorkflow != nil:
		return fmt.Sprintf("%s %s to %s", c.Type, c.SignalExternalWorkflow.SignalName, c.SignalExternalWorkflow.WorkflowID)
	case c.ContinueAsNew != nil:
		return fmt.Sprintf("%s %s", c.Type, c.ContinueAsNew.WorkflowType)
	case c.CompleteUpdate != nil:
		return fmt.Sprintf("%s %s", c.Type, c.CompleteUpdate.UpdateID)
	}
	return c.Type.String()
}

// waitingLines picks, from each coroutine's stack, the coroutine's name and
// the first frame in workflow code (outside the SDK and the runtime).
func waitingLines(stack string, paths tracePaths) []string {
	var out []string
	name := ""
	lines := strings.Split(stack, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if strings.HasPrefix(l, "coroutine ") {
			name = strings.TrimSuffix(strings.TrimPrefix(l, "coroutine "), ":")
			continue
		}
		if name == "" || strings.HasPrefix(l, "\t") || strings.TrimSpace(l) == "" || i+1 >= len(lines) {
			continue
		}
		fn := l
		if strings.HasPrefix(fn, "github.com/cairnflow/cairn/sdk.") || strings.HasPrefix(fn, "runtime.") ||
			strings.HasPrefix(fn, "goroutine ") || strings.HasPrefix(fn, "created by") {
			continue
		}
		loc := strings.TrimSpace(lines[i+1])
		if j := strings.LastIndex(loc, " +0x"); j > 0 {
			loc = loc[:j]
		}
		if j := strings.LastIndex(fn, "("); j > 0 {
			fn = fn[:j]
		}
		out = append(out, fmt.Sprintf("%s: %s (%s)", name, fn, paths.show(loc)))
		name = ""
	}
	return out
}
