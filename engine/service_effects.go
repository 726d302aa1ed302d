package engine

import (
	"context"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
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
// transaction. change is the ledger change to apply with it. The caller
// holds the workflow id's lock.
func (e *Engine) recordClosedRunReport(ctx context.Context, st *RunState, change LedgerChange) error {
	x := e.newTxn(e.now(), []string{st.WorkflowID})
	if r := change.Report; r != nil {
		r.WorkflowID, r.RunID, r.Time, r.AfterClose = st.WorkflowID, st.RunID, x.now, true
	}
	if err := x.ledgerChange(ctx, st.WorkflowID, st.RunID, change); err != nil {
		return err
	}
	nst := st
	if r := change.Report; r != nil && (r.Verdict.IsDuplicate() || r.Verdict == api.VerdictConflict) {
		nst = st.Clone()
		if r.Verdict.IsDuplicate() {
			nst.Duplicates++
		} else {
			nst.EffectConflicts++
		}
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
	if err := e.commit(context.WithoutCancel(ctx), &x.batch); err != nil {
		return storeErr(err)
	}
	e.stats.commits.Add(1)
	if nst != st {
		if cur, ok := e.recent.Peek(st.WorkflowID); ok && cur.RunID == st.RunID {
			e.recent.Add(st.WorkflowID, nst)
		}
	}
	if change.Report != nil {
		e.noteReport(change.Report)
	}
	return nil
}

// countDuplicates reads, when the engine opens, how many (possible)
// duplicates the ledger holds, so that the duplicate counters cover every
// duplicate ever recorded, not only those since this process started.
func (e *Engine) countDuplicates(ctx context.Context) error {
	prefix := history.Key().Str("x").Bytes()
	var after []byte
	for {
		recs, err := e.store.Scan(ctx, history.SpaceIndex, history.ScanOptions{Prefix: prefix, After: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("engine: count duplicates: %w", storeErr(err))
		}
		for _, r := range recs {
			after = r.Key
			kr := history.ReadKey(r.Key)
			_ = kr.Str()
			wf, key := kr.Str(), kr.Str()
			le, err := e.ledgerEntry(ctx, wf, key)
			if err != nil || le == nil {
				continue // ListEffects reports what is wrong with it
			}
			proven := int64(0)
			for _, rep := range le.Reports {
				if rep.Verdict == api.VerdictDuplicate {
					proven++
				}
			}
			e.stats.bootDuplicates += proven
			e.stats.bootPossible += max(int64(le.Duplicates)-proven, 0)
		}
		if len(recs) < 1000 {
			return nil
		}
	}
}

// closedRunLateSuccess handles a success reported for an action of a run
// that has closed.
func (e *Engine) closedRunLateSuccess(ctx context.Context, tok actToken, req *api.CompleteActivityRequest) {
	unlock := e.lock(tok.W)
	defer unlock()
	st, _, err := e.loadState(ctx, tok.W, tok.R)
	if err != nil || st.Status.Open() {
		return
	}
	sched, err := e.scheduledEvent(ctx, st.Ref(), tok.S)
	if err != nil || sched.Effect == history.Read || sched.IdempotencyKey == "" {
		return
	}
	rep := &api.EffectReport{Verdict: api.VerdictDuplicate, ScheduledEventID: tok.S, IdempotencyKey: sched.IdempotencyKey,
		ActivityType: sched.ActivityType, Attempt: tok.A, LeaseEpoch: tok.E, Identity: req.Identity, Outcome: outcomeCompleted,
		Result: req.Result, Detail: "a stale attempt reported success for an action of a closed run"}
	if err := e.recordClosedRunReport(ctx, st, LedgerChange{Key: sched.IdempotencyKey, KeepState: true, Report: rep}); err != nil {
		e.log.Error().Err(err).Str("workflow", tok.W).Str("run", tok.R).Msg("late report not recorded")
	}
}
