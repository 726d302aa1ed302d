package sdk

import (
	"context"
	"fmt"

	"github.com/cairnflow/cairn/history"
)

// ResolveEventPayloads replaces, in evs, every payload recorded by
// reference that workflow code decodes (results, signals, inputs, markers)
// with its bytes, read from src. Payloads the runtime only compares with
// the code's commands (activity and child inputs, signals sent, the run's
// own result) stay references: a replay never reads a transcript's chunks.
// Workers call it on every task's events before ProcessTask; the replayer
// too.
func ResolveEventPayloads(ctx context.Context, src history.ChunkSource, evs []history.Event) error {
	for i := range evs {
		ev := &evs[i]
		switch ev.Attrs.(type) {
		case *history.ActivityScheduled, *history.ChildWorkflowStarted, *history.SignalExternalSent,
			*history.WorkflowCompleted, *history.WorkflowContinuedAsNew:
			continue
		}
		refs := false
		history.VisitPayloads(ev.Attrs, func(_ string, p *history.Payload) { refs = refs || p.ByRef() })
		if !refs {
			continue
		}
		// The attributes may be shared (an embedded engine hands out its
		// own): resolve into a deep copy.
		cp, err := history.CloneEvent(*ev)
		if err != nil {
			return fmt.Errorf("sdk: event %d: %w", ev.ID, err)
		}
		*ev = cp
		history.VisitPayloads(ev.Attrs, func(name string, p *history.Payload) {
			if err != nil || !p.ByRef() {
				return
			}
			if src == nil {
				err = fmt.Errorf("sdk: event %d (%s) %s is stored by reference and no chunk source is at hand: %w",
					ev.ID, ev.Type(), name, history.ErrChunkNotFound)
				return
			}
			var r history.Payload
			if r, err = history.Resolve(ctx, src, *p); err == nil {
				*p = r
			} else {
				err = fmt.Errorf("sdk: event %d (%s) %s: %w", ev.ID, ev.Type(), name, err)
			}
		})
		if err != nil {
			return err
		}
	}
	return nil
}
