package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Declarations: the effect class, business key and Reconcile lookup of an
// activity are authoritative where the activity is registered — on the
// worker that runs it. Activity workers declare their activities with
// every poll (api.PollActivityTaskRequest.Activities); the engine keeps the
// latest declaration of each (task queue, activity type), in memory and
// durably (history.SpaceMeta), and applies it:
//
//   - when a workflow task schedules the activity: the stronger of the two
//     classes, the declared Reconcile lookup, and, when the workflow's
//     worker did not compute the key material the way the declaration
//     says, a key task first (engine/machine, keys.go);
//   - at the latest when the activity is dispatched to a declaring worker,
//     before any intent is recorded: an activity scheduled before the
//     engine knew the declaration is upgraded there.
//
// So a workflow-only worker needs no activity options, and a mismatch can
// never run an effect unguarded.

// declarations holds the known declarations: task queue → activity type.
type declarations struct {
	mu sync.RWMutex
	m  map[string]map[string]api.ActivityDeclaration
	// unsaved holds the (queue, activity type) pairs known in memory whose
	// durable record failed: the next poll of the queue writes them again.
	unsaved map[string]map[string]bool
}

func declarationKey(queue, activityType string) []byte {
	return history.Key().Str("decl").Str(queue).Str(activityType).Bytes()
}

// declared returns the declaration of activityType on queue, if any.
func (e *Engine) declared(queue, activityType string) (api.ActivityDeclaration, bool) {
	e.decls.mu.RLock()
	defer e.decls.mu.RUnlock()
	d, ok := e.decls.m[queue][activityType]
	return d, ok
}

// declare records what a poller declares, writing the declarations that
// changed. They are known in memory before the poller waits for a task, so
// a task handed straight to it (txn.handOffActivities) honours them too. A
// failure to write is logged and retried at the next poll: the declaration
// still applies at dispatch.
func (e *Engine) declare(ctx context.Context, queue string, ds []api.ActivityDeclaration) {
	if len(ds) == 0 {
		return
	}
	changed := e.decls.changed(queue, ds)
	if len(changed) == 0 {
		return
	}
	var b history.Batch
	var valid []api.ActivityDeclaration
	for _, d := range changed {
		if e.m.CheckID("activity type", d.ActivityType, true) != nil || d.Effect > history.SideEffect {
			continue
		}
		v, err := api.MarshalMsgpack(&d)
		if err != nil {
			continue
		}
		valid = append(valid, d)
		b.Puts = append(b.Puts, history.Record{Space: history.SpaceMeta, Key: declarationKey(queue, d.ActivityType), Value: v})
	}
	if len(valid) == 0 {
		return
	}
	err := e.store.Commit(context.WithoutCancel(ctx), &b)
	if err != nil {
		e.log.Warn().Err(err).Str("task_queue", queue).Msg("activity declarations not recorded; retried at the next poll")
	}
	e.decls.learn(queue, valid, err == nil)
}

// changed returns the declarations of ds that differ from the known ones
// of queue or were not recorded yet.
func (d *declarations) changed(queue string, ds []api.ActivityDeclaration) []api.ActivityDeclaration {
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []api.ActivityDeclaration
	for _, x := range ds {
		if old, ok := d.m[queue][x.ActivityType]; !ok || old != x || d.unsaved[queue][x.ActivityType] {
			out = append(out, x)
		}
	}
	return out
}

// learn makes ds the known declarations of queue; saved says whether their
// durable record was written.
func (d *declarations) learn(queue string, ds []api.ActivityDeclaration, saved bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = map[string]map[string]api.ActivityDeclaration{}
	}
	q := d.m[queue]
	if q == nil {
		q = map[string]api.ActivityDeclaration{}
		d.m[queue] = q
	}
	for _, x := range ds {
		q[x.ActivityType] = x
		switch {
		case !saved && d.unsaved == nil:
			d.unsaved = map[string]map[string]bool{queue: {x.ActivityType: true}}
		case !saved && d.unsaved[queue] == nil:
			d.unsaved[queue] = map[string]bool{x.ActivityType: true}
		case !saved:
			d.unsaved[queue][x.ActivityType] = true
		default:
			delete(d.unsaved[queue], x.ActivityType)
		}
	}
}

// upgrades reports whether a known declaration of a's type on its queue
// would change how a is guarded (a stronger class, a lookup, a key from the
// declaring worker): such an attempt is never handed off prebuilt, it goes
// through dispatchActivity, which applies the declaration first.
func (e *Engine) upgrades(a *machine.ActivityInfo) bool {
	d, ok := e.declared(a.Options.TaskQueue, a.ActivityType)
	return ok && (d.Effect > a.Effect || d.Reconcile != a.HasReconcile || d.BusinessKey != a.BusinessKey && d.Effect != history.Read)
}

// loadDeclarations reads the recorded declarations when the engine opens.
func (e *Engine) loadDeclarations(ctx context.Context) error {
	prefix := history.Key().Str("decl").Bytes()
	var after []byte
	e.decls.m = map[string]map[string]api.ActivityDeclaration{}
	for {
		recs, err := e.store.Scan(ctx, history.SpaceMeta, history.ScanOptions{Prefix: prefix, After: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("engine: read activity declarations: %w", storeErr(err))
		}
		for _, r := range recs {
			after = r.Key
			kr := history.ReadKey(r.Key)
			_ = kr.Str()
			queue := kr.Str()
			var d api.ActivityDeclaration
			if kr.Err() != nil || api.UnmarshalMsgpack(r.Value, &d) != nil {
				e.log.Warn().Hex("key", r.Key).Msg("an activity declaration does not decode: ignored (the next poll records it again)")
				continue
			}
			if e.decls.m[queue] == nil {
				e.decls.m[queue] = map[string]api.ActivityDeclaration{}
			}
			e.decls.m[queue][d.ActivityType] = d
		}
		if len(recs) < 1000 {
			return nil
		}
	}
}

// scheduleDeclarations looks up the declarations of the activities a
// workflow task schedules.
func (e *Engine) scheduleDeclarations(st *machine.RunState, cmds []api.Command) map[int]api.ActivityDeclaration {
	var out map[int]api.ActivityDeclaration
	for i, c := range cmds {
		s := c.ScheduleActivity
		if c.Type != api.CommandScheduleActivity || s == nil {
			continue
		}
		queue := s.Options.TaskQueue
		if queue == "" {
			queue = st.TaskQueue
		}
		if d, ok := e.declared(queue, s.ActivityType); ok {
			if out == nil {
				out = map[int]api.ActivityDeclaration{}
			}
			out[i] = d
		}
	}
	return out
}

// pollerDeclaration returns the declaration of activityType in a poll.
func pollerDeclaration(ds []api.ActivityDeclaration, activityType string) *api.ActivityDeclaration {
	for i := range ds {
		if ds[i].ActivityType == activityType {
			return &ds[i]
		}
	}
	return nil
}
