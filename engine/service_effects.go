package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// noteReport logs a judged late report once it is durable and counts it:
// one structured line per report, at error level for a duplicate or a
// conflict (a person should look), at info level for a confirmation.
func (e *Engine) noteReport(r *api.EffectReport) {
	e.stats.lateReports[min(int(r.Verdict), len(e.stats.lateReports)-1)].Add(1)
	ev := e.log.Info()
	msg := "effect confirmed: a late report of the attempt the action was attributed to agrees with the record"
	switch {
	case r.Verdict == api.VerdictDuplicate:
		ev, msg = e.log.Error(), "DUPLICATE EFFECT: two different attempts both performed the action"
	case r.Verdict == api.VerdictPossibleDuplicate:
		ev, msg = e.log.Error(), "DUPLICATE EFFECT (possible): two different attempts may both have performed the action; check the downstream system"
	case r.Verdict == api.VerdictConflict:
		ev, msg = e.log.Error(), "EFFECT CONFLICT: a late report contradicts the recorded outcome"
	}
	ev.Str("verdict", r.Verdict.String()).Str("workflow", r.WorkflowID).Str("run", r.RunID).Int64("scheduled_event", r.ScheduledEventID).
		Str("activity_type", r.ActivityType).Str("idempotency_key", r.IdempotencyKey).Int32("attempt", r.Attempt).
		Int32("other_attempt", r.OtherAttempt).Str("outcome", r.Outcome).Str("identity", r.Identity).Bool("after_close", r.AfterClose).
		Str("detail", r.Detail).Msg(msg)
}

// recordClosedRunReport records a judged late report for an action of a
// run that has closed: its history takes no more events, so the report
// goes on the action's effects-ledger entry and the run's record (its
// counters and list entries, and the run's report index), in one
// transaction. changes are the ledger changes to apply with it. The
// caller holds the workflow id's lock.
func (e *Engine) recordClosedRunReport(ctx context.Context, st *machine.RunState, changes []machine.LedgerChange) error {
	x := e.newTxn(e.now(), []string{st.WorkflowID})
	defer x.release()
	nst := st
	for _, change := range changes {
		r := change.Report
		if r != nil {
			r.WorkflowID, r.RunID, r.Time, r.AfterClose = st.WorkflowID, st.RunID, x.now, true
		}
		if err := x.ledgerChange(ctx, st.WorkflowID, st.RunID, change); err != nil {
			return err
		}
		if r == nil || !r.Verdict.IsDuplicate() && r.Verdict != api.VerdictConflict {
			continue
		}
		if nst == st {
			nst = st.Clone()
		}
		if r.Verdict.IsDuplicate() {
			nst.Duplicates++
		} else {
			nst.EffectConflicts++
		}
	}
	if nst != st {
		b, err := encodeState(nst)
		if err != nil {
			return err
		}
		x.put(history.SpaceRunState, stateKey(nst.Ref()), b)
		info, err := api.MarshalMsgpack(summary(nst))
		if err != nil {
			return err
		}
		x.put(history.SpaceIndex, indexAllKey(nst), info)
		x.put(history.SpaceIndex, indexStatusKey(nst.Status, nst), info)
	}
	if err := e.commitFenced(context.WithoutCancel(ctx), &x.batch, x.held); err != nil {
		return storeErr(err)
	}
	e.stats.commits.Add(1)
	if nst != st {
		if cur, ok := e.recent.Peek(st.WorkflowID); ok && cur.RunID == st.RunID {
			e.recent.Add(st.WorkflowID, nst)
		}
	}
	for _, c := range changes {
		if c.Report != nil {
			e.noteReport(c.Report)
		}
	}
	return nil
}

// countDuplicates reads, when the engine opens, how many (possible)
// duplicates the ledger holds, so that the duplicate counters cover every
// duplicate ever recorded, not only those since this process started.
func (e *Engine) countDuplicates(ctx context.Context) error {
	err := e.scanIndex(ctx, history.Key().Str("x").Bytes(), func(r history.Record, bad error) error {
		if bad != nil {
			return nil // ListEffects reports what is wrong with it
		}
		if isOutbox(r) {
			return nil // a parent notice (crossshard.go), not a duplicate
		}
		kr := history.ReadKey(r.Key)
		_ = kr.Str()
		wf, key := kr.Str(), kr.Str()
		le, err := e.ledgerEntry(ctx, wf, key)
		if err != nil || le == nil {
			return nil // ListEffects reports what is wrong with it
		}
		proven := int64(0)
		for _, rep := range le.Reports {
			if rep.Verdict == api.VerdictDuplicate {
				proven++
			}
		}
		e.stats.bootDuplicates += proven
		e.stats.bootPossible += max(int64(le.Duplicates)-proven, 0)
		return nil
	})
	if err != nil {
		return fmt.Errorf("engine: count duplicates: %w", storeErr(err))
	}
	return nil
}

// closedRunReport judges a report of an attempt whose run has closed, from
// the action's effects-ledger entry, and records what it proves on the
// entry and the run's record.
func (e *Engine) closedRunReport(ctx context.Context, tok actToken, r machine.AttemptReport) (machine.ReportAck, error) {
	unlock := e.lock(tok.W)
	defer unlock()
	st, _, err := e.loadState(ctx, tok.W, tok.R)
	if errors.Is(err, api.ErrNotFound) {
		return e.deletedRunReport(ctx, tok, r)
	}
	if err != nil {
		return 0, err
	}
	stale := api.Errorf(api.ErrStaleAttempt, "workflow %q run %q is %s", tok.W, tok.R, st.Status)
	if st.Status.Open() {
		return 0, stale // the run is open again: it is no longer the one the report was for
	}
	sched, err := e.tokenActivity(ctx, st, tok)
	if err != nil {
		return 0, err
	}
	if sched.IdempotencyKey == "" {
		return 0, stale
	}
	le, err := e.ledgerEntry(ctx, tok.W, sched.IdempotencyKey)
	if err != nil {
		return 0, damaged(st.Ref(), false, err)
	}
	if le == nil {
		return 0, stale
	}
	j, err := machine.JudgeClosed(tok.W, st.RunID, sched.IdempotencyKey, le, r) // r.ScheduledEventID is tok.S
	if err != nil || j.Repeated {
		return j.Ack, err
	}
	var changes []machine.LedgerChange
	for i := range j.Reports {
		rep := j.Reports[i]
		rep.ScheduledEventID, rep.IdempotencyKey, rep.ActivityType = tok.S, sched.IdempotencyKey, sched.ActivityType
		changes = append(changes, machine.LedgerChange{Key: sched.IdempotencyKey, KeepState: true, Report: &rep})
	}
	changes = append(changes, j.Change)
	if err := e.recordClosedRunReport(ctx, st, changes); err != nil {
		return 0, err
	}
	return j.Ack, nil
}

// deletedRunReport judges a report of an attempt whose run was deleted
// (retention, cairn workflow delete) from the ledger entry its intent
// wrote, which outlives the run: the proof a late report brings (the
// payment happened) is recorded there as for a run that is only closed,
// so the workflow id's next run is answered from it. Only the ledger is
// written: the run stays deleted. A token of a run that never existed, or
// whose attempt no ledger entry knows, is refused.
func (e *Engine) deletedRunReport(ctx context.Context, tok actToken, r machine.AttemptReport) (machine.ReportAck, error) {
	gone := api.Errorf(api.ErrInvalidArgument, "task token names workflow %q run %q, which does not exist", tok.W, tok.R)
	ref := history.RunRef{WorkflowID: tok.W, RunID: tok.R}
	switch _, err := e.store.Get(ctx, history.SpaceIndex, deletedKey(ref)); {
	case errors.Is(err, history.ErrNotFound):
		return 0, gone
	case err != nil:
		return 0, storeErr(err)
	}
	key, le, err := e.deletedRunLedgerEntry(ctx, tok)
	if err != nil || le == nil {
		if err == nil {
			err = gone
		}
		return 0, err
	}
	j, err := machine.JudgeClosed(tok.W, tok.R, key, le, r)
	if err != nil || j.Repeated {
		return j.Ack, err
	}
	var changes []machine.LedgerChange
	for i := range j.Reports {
		rep := j.Reports[i]
		rep.ScheduledEventID, rep.IdempotencyKey, rep.ActivityType = tok.S, key, le.ActivityType
		changes = append(changes, machine.LedgerChange{Key: key, KeepState: true, Report: &rep})
	}
	changes = append(changes, j.Change)
	x := e.newTxn(e.now(), []string{tok.W})
	defer x.release()
	for _, change := range changes {
		if rep := change.Report; rep != nil {
			rep.WorkflowID, rep.RunID, rep.Time, rep.AfterClose = tok.W, tok.R, x.now, true
		}
		if err := x.ledgerChange(ctx, tok.W, tok.R, change); err != nil {
			return 0, err
		}
	}
	if err := e.commitFenced(context.WithoutCancel(ctx), &x.batch, x.held); err != nil {
		return 0, storeErr(err)
	}
	e.stats.commits.Add(1)
	for _, c := range changes {
		if c.Report != nil {
			e.noteReport(c.Report)
		}
	}
	return j.Ack, nil
}

// deletedRunLedgerEntry returns the ledger entry (and its key) of the
// action of tok's deleted run — the entry names it as the last to change
// it, or holds the record of tok's attempt (a later run of the workflow id
// scheduled the action since) — or nil.
func (e *Engine) deletedRunLedgerEntry(ctx context.Context, tok actToken) (string, *machine.LedgerEntry, error) {
	var (
		found string
		entry *machine.LedgerEntry
	)
	err := scanRecords(ctx, e.store, history.SpaceLedger, history.ScanOptions{Prefix: history.Key().Str(tok.W).Bytes()}, 0,
		func(rec history.Record, bad error) (bool, error) {
			if bad != nil {
				return false, bad
			}
			kr := history.ReadKey(rec.Key)
			wf, key := kr.Str(), kr.Str()
			if kr.Err() != nil || wf != tok.W {
				return true, nil
			}
			le, err := decodeLedger(key, rec.Value)
			if err != nil {
				return false, err
			}
			if le.RunID == tok.R && le.ScheduledEventID == tok.S || slices.ContainsFunc(le.AttemptRecords, func(a machine.AttemptRecord) bool {
				return a.RunID == tok.R && a.Epoch == tok.E
			}) {
				found, entry = key, le
				return false, nil
			}
			return true, nil
		})
	if err != nil {
		return "", nil, damaged(history.RunRef{WorkflowID: tok.W, RunID: tok.R}, false, err)
	}
	return found, entry, nil
}
