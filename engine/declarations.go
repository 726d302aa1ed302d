package engine

import (
	"context"
	"fmt"
	"sync"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
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
//     says, a key task first (machine_keys.go);
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
// changed. A failure to write is logged and retried at the next poll: the
// declaration still applies at dispatch.
func (e *Engine) declare(ctx context.Context, queue string, ds []api.ActivityDeclaration) {
	if len(ds) == 0 {
		return
	}
	e.decls.mu.RLock()
	var changed []api.ActivityDeclaration
	for _, d := range ds {
		if old, ok := e.decls.m[queue][d.ActivityType]; !ok || old != d {
			changed = append(changed, d)
		}
	}
	e.decls.mu.RUnlock()
	if len(changed) == 0 {
		return
	}
	var b history.Batch
	for _, d := range changed {
		if e.m.checkID("activity type", d.ActivityType, true) != nil || d.Effect > history.SideEffect {
			continue
		}
		v, err := api.MarshalMsgpack(&d)
		if err != nil {
			continue
		}
		b.Puts = append(b.Puts, history.Record{Space: history.SpaceMeta, Key: declarationKey(queue, d.ActivityType), Value: v})
	}
	if len(b.Puts) > 0 {
		if err := e.store.Commit(context.WithoutCancel(ctx), &b); err != nil {
			e.log.Warn().Err(err).Str("task_queue", queue).Msg("activity declarations not recorded; retried at the next poll")
			return
		}
	}
	e.decls.mu.Lock()
	defer e.decls.mu.Unlock()
	if e.decls.m == nil {
		e.decls.m = map[string]map[string]api.ActivityDeclaration{}
	}
	q := e.decls.m[queue]
	if q == nil {
		q = map[string]api.ActivityDeclaration{}
		e.decls.m[queue] = q
	}
	for _, d := range changed {
		q[d.ActivityType] = d
	}
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
			if kr.Err() != nil || msgpack.Unmarshal(r.Value, &d) != nil {
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
func (e *Engine) scheduleDeclarations(st *RunState, cmds []api.Command) map[int]api.ActivityDeclaration {
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
