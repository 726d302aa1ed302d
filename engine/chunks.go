package engine

import (
	"context"
	"errors"
	"fmt"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Payload chunks (history/chunk.go): every payload a transaction records
// that extends a chunk (Ref and Data), or whose bytes exceed
// Limits.InlinePayloadBytes, is stored as a content-addressed chunk in the
// same store transaction, and the event keeps only the reference. A chunk
// that is already stored is not written again, so bytes shared by turns,
// runs and workflows are stored once.

// knownChunks is how many chunk hashes the engine remembers as stored.
const knownChunks = 1 << 16

func newChunkCache() *lru.Cache[string, struct{}] {
	c, _ := lru.New[string, struct{}](knownChunks) // cannot fail: the size is positive
	return c
}

// chunkExists reports whether the chunk hash is stored (or written by this
// transaction).
func (x *txn) chunkExists(ctx context.Context, hash []byte) (bool, error) {
	if len(hash) != history.HashSize {
		return false, nil
	}
	k := string(hash)
	if history.IsRoot(hash) {
		return true, nil
	}
	if _, ok := x.newChunks[k]; ok {
		return true, nil
	}
	x.chunkRef(hash)
	if x.e.chunks.Contains(k) {
		return true, nil
	}
	_, err := x.e.store.Get(ctx, history.SpaceChunk, hash)
	switch {
	case err == nil:
		x.e.chunks.Add(k, struct{}{})
		return true, nil
	case errors.Is(err, history.ErrNotFound):
		return false, nil
	}
	return false, storeErr(err)
}

// storePayload returns the form in which p is recorded, adding the chunk
// it needs to the transaction: p itself when it is small and references
// nothing, else a reference to the chunk holding its bytes. A reference to
// a chunk that is not stored is an ErrInvalidArgument.
func (x *txn) storePayload(ctx context.Context, what string, p history.Payload) (history.Payload, error) {
	if !p.ByRef() && len(p.Data) <= x.e.m.Limits.InlinePayloadBytes {
		return p, nil
	}
	if p.ByRef() {
		ok, err := x.chunkExists(ctx, p.Ref)
		if err != nil {
			return history.Payload{}, err
		}
		if !ok {
			return history.Payload{}, api.Errorf(api.ErrInvalidArgument, "%s references chunk %x, which is not stored", what, p.Ref)
		}
		if len(p.Data) == 0 {
			return p, nil
		}
	}
	c := history.Chunk{Parent: p.Ref, Data: p.Data}
	h := c.Hash()
	ok, err := x.chunkExists(ctx, h)
	if err != nil {
		return history.Payload{}, err
	}
	if !ok {
		x.newChunks[string(h)] = struct{}{}
		x.batch.Puts = append(x.batch.Puts, history.Record{Space: history.SpaceChunk, Key: h, Value: history.EncodeChunk(c)})
	}
	return history.Payload{Encoding: p.Encoding, Ref: h}, nil
}

// storeEventPayloads rewrites the payloads of a transaction's new events
// (and the copies the run state keeps) into their recorded form.
func (x *txn) storeEventPayloads(ctx context.Context, tr *txnRun) error {
	for i := range tr.events {
		ev := &tr.events[i]
		var err error
		history.VisitPayloads(ev.Attrs, func(name string, p *history.Payload) {
			if err != nil || p.IsZero() {
				return
			}
			var stored history.Payload
			if stored, err = x.storePayload(ctx, ev.Type().String()+"."+name, *p); err == nil {
				*p = stored
			}
		})
		if err != nil {
			return err
		}
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.Input.ByRef() {
			if a := tr.st.Activities[ev.ID]; a != nil {
				in := s.Input
				a.Input = &in
			}
		}
	}
	if !tr.st.Result.IsZero() {
		stored, err := x.storePayload(ctx, "result", tr.st.Result)
		if err != nil {
			return err
		}
		tr.st.Result = stored
	}
	return nil
}

// sharedResult returns the form in which a ShareResult activity's result is
// recorded: a chunk of its own (Payload{Ref: RootRef, Data}, stored by
// storePayload) when it is large enough for a reference to save bytes, so
// that a transcript can name it instead of copying it.
func sharedResult(p history.Payload) history.Payload {
	if p.ByRef() || len(p.Data) < api.ShareResultMinBytes {
		return p
	}
	return history.Payload{Encoding: p.Encoding, Ref: history.RootRef, Data: p.Data}
}

// chunkSource reads chunks from the store, checking each against its hash.
type chunkSource struct{ e *Engine }

func (s chunkSource) Chunk(ctx context.Context, hash []byte) (history.Chunk, error) {
	if history.IsRoot(hash) {
		return history.Chunk{}, nil
	}
	v, err := s.e.store.Get(ctx, history.SpaceChunk, hash)
	if errors.Is(err, history.ErrNotFound) {
		return history.Chunk{}, fmt.Errorf("%w: %x", history.ErrChunkNotFound, hash)
	}
	if err != nil {
		return history.Chunk{}, storeErr(err)
	}
	c, err := history.DecodeChunk(hash, v)
	if err != nil {
		return history.Chunk{}, fmt.Errorf("%w: %w", api.ErrInternal, err)
	}
	return c, nil
}

// resolve returns p with its bytes inline, for answers to clients that
// decode payloads themselves (a run's result).
func (e *Engine) resolve(ctx context.Context, p history.Payload) (history.Payload, error) {
	if !p.ByRef() {
		return p, nil
	}
	r, err := history.Resolve(ctx, chunkSource{e}, p)
	if err != nil {
		if errors.Is(err, history.ErrChunkNotFound) {
			return history.Payload{}, fmt.Errorf("%w: %w", api.ErrInternal, err)
		}
		return history.Payload{}, err
	}
	return r, nil
}

// defaultChunkReply bounds the bytes one GetChunks answer carries.
const defaultChunkReply = 4 << 20

// GetChunks implements api.Service: it returns the chunks named, and with
// Ancestors their parents too, up to MaxBytes of data per answer.
func (e *Engine) GetChunks(ctx context.Context, req *api.GetChunksRequest) (*api.GetChunksResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	limit := req.MaxBytes
	if limit <= 0 || limit > defaultChunkReply {
		limit = defaultChunkReply
	}
	src := chunkSource{e}
	resp := &api.GetChunksResponse{}
	total := 0
	seen := map[string]bool{}
	for _, h := range req.Hashes {
		for h != nil && !seen[string(h)] && !history.IsRoot(h) {
			if len(h) != history.HashSize {
				return nil, api.Errorf(api.ErrInvalidArgument, "chunk hash of %d bytes", len(h))
			}
			c, err := src.Chunk(ctx, h)
			if errors.Is(err, history.ErrChunkNotFound) {
				return nil, api.Errorf(api.ErrNotFound, "chunk %x", h)
			}
			if err != nil {
				return nil, err
			}
			seen[string(h)] = true
			resp.Chunks = append(resp.Chunks, c)
			total += len(c.Data)
			if !req.Ancestors || total >= limit {
				break
			}
			h = c.Parent
		}
		if total >= limit {
			break
		}
	}
	return resp, nil
}
