package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Payload chunks are shared (content-addressed: equal bytes are stored
// once across runs and workflows), so deleting a run cannot delete its
// chunks: CollectChunks finds the ones no kept run references, mark and
// sweep.
//
//   - Mark: every payload reference in the events of every run the store
//     holds events for (history.RunLister: runs kept, and bases a kept
//     reset reads), in the effects ledger's results (the ledger outlives
//     runs), and every ancestor of those chunks (a chunk extends its
//     parent).
//   - Sweep: the chunks stored and not marked are deleted.
//
// The race: a transaction that records a payload by reference first
// checks that the chunk is stored (chunkExists, which also trusts the
// engine's cache of known hashes), then commits. A collection that deleted
// the chunk in between would leave the new event referencing nothing.
// So a transaction that touches a chunk holds chunkMu for reading from its
// first chunk check until its commit returned (txn.chunkRef, released by
// txn.release), and the collection takes chunkMu for writing twice:
//
//  1. to start: once every transaction already past a chunk check has
//     committed, it sets collecting; from then on every chunk a
//     transaction references or writes is noted in touched, and every
//     transaction that committed before is in the store the mark reads;
//  2. to sweep: no transaction is between check and commit; the chunks
//     touched meanwhile (and their ancestors) are kept, the others that
//     the mark did not reach are deleted, and forgotten by the cache of
//     known hashes before the lock is released.
//
// One engine's lock cannot cover the transactions of the other servers of
// a cluster: CollectChunks refuses to run on an engine with shards
// (Options.Shards), whose deleted runs' chunks stay (docs/retention.md).

// chunkCollector is the engine's state of a collection.
type chunkCollector struct {
	mu         sync.RWMutex // see above
	noteMu     sync.Mutex
	collecting bool                // guarded by mu (written under mu.Lock)
	touched    map[string]struct{} // guarded by noteMu
	running    sync.Mutex          // one collection at a time
	// afterMark, when set (tests), runs between the mark and the sweep.
	afterMark func()
}

// chunkRef is called by a transaction before it checks or writes a chunk:
// it holds the collector's read lock until the transaction is released,
// and notes hash when a collection is running.
func (x *txn) chunkRef(hash []byte) {
	c := &x.e.chunkGC
	if !x.chunkLocked {
		c.mu.RLock()
		x.chunkLocked = true
	}
	if c.collecting {
		c.noteMu.Lock()
		c.touched[string(hash)] = struct{}{}
		c.noteMu.Unlock()
	}
}

// release ends the transaction's hold on the chunk collector (after its
// commit returned, or when it is abandoned). Idempotent.
func (x *txn) release() {
	if x.chunkLocked {
		x.chunkLocked = false
		x.e.chunkGC.mu.RUnlock()
	}
}

// ChunkReport is what one collection did.
type ChunkReport struct {
	// Stored chunks before the sweep, Referenced by the runs and the
	// ledger (ancestors included), Deleted.
	Stored, Referenced, Deleted int
	Took                        time.Duration
}

// CollectChunks deletes the payload chunks that no run the store holds
// and no effects-ledger entry references (see above). The retention sweep
// runs it after deleting runs that referenced chunks. It reads every
// stored history: O(stored events), and memory for every referenced
// chunk's hash.
func (e *Engine) CollectChunks(ctx context.Context) (ChunkReport, error) {
	if err := e.enter(); err != nil {
		return ChunkReport{}, err
	}
	defer e.leave()
	if e.opts.Shards != nil {
		return ChunkReport{}, api.Errorf(api.ErrFailedPrecondition, "payload chunks are not collected in a cluster: another server's transaction could reference a chunk being deleted")
	}
	lister, ok := e.store.(history.RunLister)
	if !ok {
		return ChunkReport{}, api.Errorf(api.ErrFailedPrecondition, "the store cannot list its runs: payload chunks are not collected")
	}
	c := &e.chunkGC
	c.running.Lock()
	defer c.running.Unlock()
	start := time.Now()
	c.mu.Lock()
	c.collecting, c.touched = true, map[string]struct{}{}
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.collecting, c.touched = false, nil
		c.mu.Unlock()
	}()

	marked, err := e.markChunks(ctx, lister)
	if err != nil {
		return ChunkReport{}, fmt.Errorf("collect chunks: mark: %w", err)
	}
	rep := ChunkReport{Referenced: len(marked)}
	unmarked, err := e.unmarkedChunks(ctx, marked, &rep)
	if err != nil {
		return rep, fmt.Errorf("collect chunks: %w", err)
	}
	if c.afterMark != nil {
		c.afterMark()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for h := range c.touched {
		if err := e.markAncestors(ctx, []byte(h), marked); err != nil && !errors.Is(err, history.ErrNotFound) {
			return rep, fmt.Errorf("collect chunks: keep the chunks referenced meanwhile: %w", err)
		}
	}
	var doomed []history.RecordKey
	for _, h := range unmarked {
		if _, keep := marked[string(h)]; !keep {
			doomed = append(doomed, history.RecordKey{Space: history.SpaceChunk, Key: h})
		}
	}
	for len(doomed) > 0 {
		n := min(len(doomed), 512)
		// Forgotten before the commit: one applied but reported failed
		// must not leave them known (a later reference would trust the
		// cache and record a chunk that is gone); a chunk not deleted
		// after all is found in the store again.
		for _, d := range doomed[:n] {
			e.chunks.Remove(string(d.Key))
		}
		if err := e.commit(ctx, &history.Batch{Deletes: doomed[:n]}); err != nil {
			return rep, fmt.Errorf("collect chunks: delete: %w", storeErr(err))
		}
		rep.Deleted += n
		doomed = doomed[n:]
	}
	rep.Took = time.Since(start)
	e.log.Info().Int("stored", rep.Stored).Int("referenced", rep.Referenced).Int("deleted", rep.Deleted).
		Dur("took", rep.Took).Msg("payload chunks collected")
	return rep, nil
}

// markChunks returns every chunk referenced by the stored events and the
// ledger's results, with their ancestors.
func (e *Engine) markChunks(ctx context.Context, lister history.RunLister) (map[string]struct{}, error) {
	marked := map[string]struct{}{}
	var refs, transcripts [][]byte
	see := func(p *history.Payload) {
		if p.ByRef() && !history.IsRoot(p.Ref) {
			refs = append(refs, p.Ref)
			if p.Encoding == history.EncodingTranscript {
				transcripts = append(transcripts, p.Ref)
			}
		}
	}
	var after *history.RunRef
	for {
		runs, err := lister.Runs(ctx, after, 256)
		if err != nil {
			return nil, err
		}
		for _, ref := range runs {
			for ev, err := range e.store.Events(ctx, ref, 1) {
				if err != nil {
					return nil, fmt.Errorf("read workflow %q run %q: %w", ref.WorkflowID, ref.RunID, err)
				}
				history.VisitPayloads(ev.Attrs, func(_ string, p *history.Payload) { see(p) })
			}
		}
		if len(runs) < 256 {
			break
		}
		after = &runs[len(runs)-1]
	}
	err := scanRecords(ctx, e.store, history.SpaceLedger, history.ScanOptions{}, 0, func(r history.Record, bad error) (bool, error) {
		if bad != nil {
			return false, bad
		}
		kr := history.ReadKey(r.Key)
		_, key := kr.Str(), kr.Str()
		le, err := decodeLedger(key, r.Value)
		if err != nil {
			return false, err
		}
		see(&le.Result)
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	// A transcript chunk's entries name tool results by reference
	// (history.TranscriptEntry.Content); after a continue-as-new, only an
	// earlier run's events may reference them.
	content, err := e.transcriptContent(ctx, transcripts)
	if err != nil {
		return nil, err
	}
	for _, h := range append(refs, content...) {
		if err := e.markAncestors(ctx, h, marked); err != nil && !errors.Is(err, history.ErrNotFound) {
			return nil, err
		}
	}
	return marked, nil
}

// transcriptContent returns the payload references the entries of the
// transcript chains ending at tips name.
func (e *Engine) transcriptContent(ctx context.Context, tips [][]byte) ([][]byte, error) {
	var out [][]byte
	seen := map[string]struct{}{}
	for _, h := range tips {
		for len(h) > 0 && !history.IsRoot(h) {
			if _, ok := seen[string(h)]; ok {
				break
			}
			seen[string(h)] = struct{}{}
			v, err := e.store.Get(ctx, history.SpaceChunk, h)
			if errors.Is(err, history.ErrNotFound) {
				break
			}
			if err != nil {
				return nil, err
			}
			c, err := history.DecodeChunk(h, v)
			if err != nil {
				return nil, err
			}
			entries, err := history.DecodeTranscript(c.Data)
			if err != nil {
				return nil, fmt.Errorf("transcript chunk %x: %w", h, err)
			}
			for _, en := range entries {
				if en.Content != nil && len(en.Content.Ref) > 0 && !history.IsRoot(en.Content.Ref) {
					out = append(out, en.Content.Ref)
				}
			}
			h = c.Parent
		}
	}
	return out, nil
}

// markAncestors marks h and the chunks it extends.
func (e *Engine) markAncestors(ctx context.Context, h []byte, marked map[string]struct{}) error {
	for len(h) > 0 && !history.IsRoot(h) {
		if _, ok := marked[string(h)]; ok {
			return nil
		}
		marked[string(h)] = struct{}{}
		v, err := e.store.Get(ctx, history.SpaceChunk, h)
		if err != nil {
			return err
		}
		c, err := history.DecodeChunk(h, v)
		if err != nil {
			return err
		}
		h = c.Parent
	}
	return nil
}

// unmarkedChunks returns the stored chunks the mark did not reach.
func (e *Engine) unmarkedChunks(ctx context.Context, marked map[string]struct{}, rep *ChunkReport) ([][]byte, error) {
	var out [][]byte
	var after []byte
	for {
		recs, err := e.store.Scan(ctx, history.SpaceChunk, history.ScanOptions{After: after, Limit: 1024})
		if err != nil {
			return nil, storeErr(err)
		}
		for _, r := range recs {
			rep.Stored++
			if _, ok := marked[string(r.Key)]; !ok {
				out = append(out, r.Key)
			}
			after = r.Key
		}
		if len(recs) < 1024 {
			return out, nil
		}
	}
}
