package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// The effects ledger (history.SpaceLedger) holds one LedgerEntry per
// (workflow id, idempotency key). It outlives runs and normal operation
// never trims it. Two index families (history.SpaceIndex) point into it:
//
//	x/<workflow id>/<key>                         the entry has a (possible) duplicate
//	e/<workflow id>/<run id>/<key>/<epoch>/<time>/<after close>/<verdict>  a judged late report of that run (api.EffectReport)
//
// Every change is written in the same store transaction as the history
// events (or, for a closed run, the run record) it belongs to.

func encodeLedger(le *machine.LedgerEntry) ([]byte, error) {
	b, err := api.MarshalMsgpack(le)
	if err != nil {
		return nil, fmt.Errorf("%w: encode ledger entry: %w", api.ErrInternal, err)
	}
	return b, nil
}

// ledger folds the run's ledger changes into the entries of this
// transaction (read once from the store) and adds the writes to the batch.
func (x *txn) ledger(ctx context.Context, tr *txnRun, changes []machine.LedgerChange) error {
	for _, c := range changes {
		if c.Key == "" {
			continue
		}
		if err := x.ledgerChange(ctx, tr.st.WorkflowID, tr.st.RunID, c); err != nil {
			return err
		}
	}
	return nil
}

// ledgerChange applies one change to the entry (workflowID, c.Key) and
// puts the entry, and the indexes a report asks for, in the batch.
func (x *txn) ledgerChange(ctx context.Context, workflowID, runID string, c machine.LedgerChange) error {
	var err error
	if c.Result, err = x.storePayload(ctx, "ledger result", c.Result); err != nil {
		return err
	}
	key := ledgerKey(workflowID, c.Key)
	le, ok := x.ledgerEntries[string(key)]
	if !ok {
		old, err := x.e.ledgerEntry(ctx, workflowID, c.Key)
		if err != nil {
			return err
		}
		if old == nil {
			old = &machine.LedgerEntry{}
		}
		le = old
		if x.ledgerEntries == nil {
			x.ledgerEntries = map[string]*machine.LedgerEntry{}
		}
		x.ledgerEntries[string(key)] = le
	}
	le.Apply(c, runID, x.now)
	b, err := encodeLedger(le)
	if err != nil {
		return err
	}
	x.put(history.SpaceLedger, key, b)
	if r := c.Report; r != nil {
		rb, err := api.MarshalMsgpack(r)
		if err != nil {
			return fmt.Errorf("%w: encode effect report: %w", api.ErrInternal, err)
		}
		x.put(history.SpaceIndex, runReportKey(r), rb)
		if r.Verdict.IsDuplicate() {
			x.put(history.SpaceIndex, duplicateIndexKey(workflowID, c.Key), nil)
		}
	}
	return nil
}

// put adds a record write to the batch, replacing an earlier write of the
// same record in this transaction.
func (x *txn) put(space history.Space, key, value []byte) {
	for i := range x.batch.Puts {
		if p := &x.batch.Puts[i]; p.Space == space && bytes.Equal(p.Key, key) {
			p.Value = value
			return
		}
	}
	x.batch.Puts = append(x.batch.Puts, history.Record{Space: space, Key: key, Value: value})
}

// duplicateIndexKey is the duplicate index's record of an entry: "x" ‖
// workflow id ‖ key, with no value. The cluster's parent notices
// (crossshard.go, outboxKey) share the "x" family — "x" ‖ workflow id ‖
// run id — and always hold a value: isOutbox tells them apart.
func duplicateIndexKey(workflowID, key string) []byte {
	return history.Key().Str("x").Str(workflowID).Str(key).Bytes()
}

// isOutbox reports whether a record of the "x" family is a parent notice
// (crossshard.go) rather than a duplicate-index record.
func isOutbox(r history.Record) bool { return len(r.Value) > 0 }

func runReportKey(r *api.EffectReport) []byte {
	closed := int64(0)
	if r.AfterClose {
		closed = 1
	}
	return history.Key().Str("e").Str(r.WorkflowID).Str(r.RunID).Str(r.IdempotencyKey).Int(r.LeaseEpoch).
		Int(r.Time.UnixNano()).Int(closed).Int(int64(r.Verdict)).Bytes()
}

// ledgerEntry reads one effects-ledger entry (nil when absent).
func (e *Engine) ledgerEntry(ctx context.Context, workflowID, key string) (*machine.LedgerEntry, error) {
	b, err := e.store.Get(ctx, history.SpaceLedger, ledgerKey(workflowID, key))
	if errors.Is(err, history.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr(err)
	}
	return decodeLedger(key, b)
}

func decodeLedger(key string, b []byte) (*machine.LedgerEntry, error) {
	var le machine.LedgerEntry
	if err := api.UnmarshalMsgpack(b, &le); err != nil {
		return nil, fmt.Errorf("%w: %w: ledger entry %q: %w", api.ErrInternal, history.ErrCorrupt, key, err)
	}
	return &le, nil
}

// runReports reads the judged late reports recorded for a run.
func (e *Engine) runReports(ctx context.Context, ref history.RunRef) ([]api.EffectReport, error) {
	prefix := history.Key().Str("e").Str(ref.WorkflowID).Str(ref.RunID).Bytes()
	recs, err := e.store.Scan(ctx, history.SpaceIndex, history.ScanOptions{Prefix: prefix, Limit: machine.MaxLedgerReports})
	if err != nil {
		return nil, storeErr(err)
	}
	out := make([]api.EffectReport, 0, len(recs))
	for _, r := range recs {
		var rep api.EffectReport
		if err := api.UnmarshalMsgpack(r.Value, &rep); err != nil {
			return nil, fmt.Errorf("%w: %w: effect report of %q/%q: %w", api.ErrInternal, history.ErrCorrupt, ref.WorkflowID, ref.RunID, err)
		}
		out = append(out, rep)
	}
	return out, nil
}

// maxEffectsScan bounds the records one ListEffects call reads while it
// filters (a key prefix across all workflow ids): a page may come back
// short, with a token to go on.
const maxEffectsScan = 10000

// ListEffects implements api.Service.
func (e *Engine) ListEffects(ctx context.Context, req *api.ListEffectsRequest) (*api.ListEffectsResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := firstErr(e.m.CheckID("workflow id", req.WorkflowID, false), e.m.CheckID("key prefix", req.KeyPrefix, false)); err != nil {
		return nil, err
	}
	size := req.PageSize
	if size <= 0 {
		size = 100
	}
	if req.DuplicatesOnly {
		return e.listDuplicates(ctx, req, size)
	}
	space, prefix := history.SpaceLedger, []byte{}
	if req.WorkflowID != "" {
		prefix = append(history.Key().Str(req.WorkflowID).Bytes(), escapeKeyPrefix(req.KeyPrefix)...)
	}
	return e.scanEffects(ctx, space, prefix, req, size, func(r history.Record) (string, string, *machine.LedgerEntry, error) {
		kr := history.ReadKey(r.Key)
		wf, key := kr.Str(), kr.Str()
		if kr.Err() != nil {
			return "", "", nil, fmt.Errorf("%w: %w: ledger key %x", api.ErrInternal, history.ErrCorrupt, r.Key)
		}
		le, err := decodeLedger(key, r.Value)
		return wf, key, le, err
	})
}

// listDuplicates pages the entries with a (possible) duplicate through the
// duplicate index.
func (e *Engine) listDuplicates(ctx context.Context, req *api.ListEffectsRequest, size int) (*api.ListEffectsResponse, error) {
	prefix := history.Key().Str("x").Bytes()
	if req.WorkflowID != "" {
		prefix = append(history.Key().Str("x").Str(req.WorkflowID).Bytes(), escapeKeyPrefix(req.KeyPrefix)...)
	}
	return e.scanEffects(ctx, history.SpaceIndex, prefix, req, size, func(r history.Record) (string, string, *machine.LedgerEntry, error) {
		if isOutbox(r) {
			return "", "", nil, nil
		}
		kr := history.ReadKey(r.Key)
		_ = kr.Str()
		wf, key := kr.Str(), kr.Str()
		if kr.Err() != nil {
			return "", "", nil, fmt.Errorf("%w: %w: duplicate index key %x", api.ErrInternal, history.ErrCorrupt, r.Key)
		}
		le, err := e.ledgerEntry(ctx, wf, key)
		if err == nil && le == nil {
			err = fmt.Errorf("%w: %w: duplicate index names a missing ledger entry %q/%q", api.ErrInternal, history.ErrCorrupt, wf, key)
		}
		return wf, key, le, err
	})
}

// scanEffects pages through space under prefix, turning each record into
// a ledger entry with read and keeping those req's filters accept.
func (e *Engine) scanEffects(ctx context.Context, space history.Space, prefix []byte, req *api.ListEffectsRequest, size int,
	read func(history.Record) (wf, key string, le *machine.LedgerEntry, err error)) (*api.ListEffectsResponse, error) {
	resp := &api.ListEffectsResponse{}
	after := req.NextPageToken
	scanned := 0
	for {
		recs, err := e.store.Scan(ctx, space, history.ScanOptions{Prefix: prefix, After: after, Limit: size})
		if err != nil {
			return nil, storeErr(err)
		}
		for _, r := range recs {
			after = r.Key
			scanned++
			wf, key, le, err := read(r)
			if err != nil {
				return nil, err
			}
			if le == nil {
				continue // not an entry (a parent notice beside the duplicate index)
			}
			if req.KeyPrefix != "" && !hasPrefix(key, req.KeyPrefix) || req.DuplicatesOnly && le.Duplicates == 0 || req.InDoubtOnly && le.Doubt == "" {
				continue
			}
			resp.Effects = append(resp.Effects, effectInfo(wf, key, le))
			if len(resp.Effects) == size {
				resp.NextPageToken = r.Key
				return resp, nil
			}
		}
		if len(recs) < size {
			return resp, nil
		}
		if scanned >= maxEffectsScan {
			resp.NextPageToken = after
			return resp, nil
		}
	}
}

func hasPrefix(s, prefix string) bool { return len(s) >= len(prefix) && s[:len(prefix)] == prefix }

// escapeKeyPrefix encodes the start of a string key element (without its
// terminator), so that a scan finds the elements that begin with it.
func escapeKeyPrefix(s string) []byte {
	enc := history.Key().Str(s).Bytes()
	return enc[:len(enc)-2]
}

func effectInfo(workflowID, key string, le *machine.LedgerEntry) api.EffectInfo {
	return api.EffectInfo{
		WorkflowID: workflowID, IdempotencyKey: key, ActivityType: le.ActivityType, Effect: le.Effect,
		State: api.EffectState(le.State), RunID: le.RunID, ScheduledEventID: le.ScheduledEventID,
		RunIDs: append([]string(nil), le.RunIDs...), Attempts: le.Attempts, Duplicates: le.Duplicates, Conflicts: le.Conflicts,
		Reports: append([]api.EffectReport(nil), le.Reports...), Result: clonePayload(le.Result), Created: le.Created, Updated: le.Updated,
		InDoubt: le.Doubt,
	}
}
