package sdk

import (
	"context"
	"fmt"

	"github.com/cairnflow/cairn/history"
)

// lastChunk returns a transcript payload recorded as a bare reference in
// the equivalent form "the parent chunk, extended by the last chunk's
// bytes": the same value, one chunk read.
func lastChunk(ctx context.Context, src history.ChunkSource, p history.Payload) (history.Payload, error) {
	if len(p.Data) > 0 {
		return p, nil
	}
	c, err := src.Chunk(ctx, p.Ref)
	if err != nil {
		return history.Payload{}, err
	}
	return history.Payload{Encoding: p.Encoding, Ref: c.Parent, Data: c.Data}, nil
}

// resolvePayload returns a payload recorded by reference with its bytes:
// a transcript as its last chunk (lastChunk), a chunk of its own started
// from the root (a shared result: see ActivityOptions.ShareResult) as
// Payload{Ref: RootRef, Data} — the same value, still naming its chunk —
// and anything else with its whole bytes inline.
func resolvePayload(ctx context.Context, src history.ChunkSource, p history.Payload) (history.Payload, error) {
	if p.Encoding == history.EncodingTranscript {
		return lastChunk(ctx, src, p)
	}
	if len(p.Data) > 0 || history.IsRoot(p.Ref) {
		return history.Resolve(ctx, src, p)
	}
	c, err := src.Chunk(ctx, p.Ref)
	if err != nil {
		return history.Payload{}, err
	}
	if history.IsRoot(c.Parent) {
		return history.Payload{Encoding: p.Encoding, Ref: history.RootRef, Data: c.Data}, nil
	}
	return history.Resolve(ctx, src, p)
}

// ResolveEventPayloads replaces, in evs, every payload recorded by
// reference that workflow code decodes (results, signals, inputs, markers)
// with its bytes, read from src. Payloads the runtime only compares with
// the code's commands (activity and child inputs, signals sent, the run's
// own result) stay references: a replay never reads a transcript's chunks.
// A transcript payload the code decodes (a model call's answer, recorded as
// the chunk that extends its input) resolves to its last chunk only; a
// shared result (a chunk of its own, started from the root) to
// Payload{Ref: RootRef, Data}, which still names its chunk.
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
			r, err = resolvePayload(ctx, src, *p) // a model call's answer: its own entries, not the whole conversation
			if err == nil {
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
