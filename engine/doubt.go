package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Doubt after a recovery of the store (history.DoubtMark): a store that
// lost acknowledged commits, or was restored from a backup or a
// point-in-time copy, may hold a past shorter than the one the outside
// world saw. An action its ledger says was never started, or is still
// running, may have been performed in the lost range; dispatching it again
// as a fresh attempt would pay twice. Whoever recovered the store left a
// doubt mark; at Open, before any run is loaded, settleDoubt puts every
// scheduled or in-flight SideEffect action of every open run in doubt
// (machine.Doubt: ActivityOutcomeUnknown, its ledger entry unknown, then
// its Reconcile lookup or a pause for a person) and deletes the marks in
// the same transaction as the last of those changes. A crash at any point
// leaves the marks until that transaction is durable, and the pass then
// runs again (an action the same mark already put in doubt is skipped).
//
// The scope is conservative: every open run, whatever part of its past was
// lost. Runs the store does not know at all (started after the backup's
// moment) cannot be found; docs/reliability.md says what an operator does
// about them.

// doubtBatchRuns bounds the runs one transaction of the pass puts in
// doubt: a batch is all or nothing, and must fit in one store transaction.
var doubtBatchRuns = 64

// doubtPass is one run of settleDoubt over the open runs.
type doubtPass struct {
	e     *Engine
	in    machine.DoubtInput
	keys  [][]byte // the marks' keys, deleted with the last batch
	refs  []history.RunRef
	count int
}

// settleDoubt applies the doubt marks the store holds (see above). It
// fails Open on a store error or a damaged mark: serving without knowing
// what is in doubt could pay twice.
func (e *Engine) settleDoubt(ctx context.Context) error {
	marks, keys, err := history.DoubtMarks(ctx, e.store)
	if err != nil {
		return fmt.Errorf("engine: doubt after a recovery: %w", storeErr(err))
	}
	if len(marks) == 0 {
		return nil
	}
	p := &doubtPass{e: e, keys: keys, in: doubtInput(marks, e.declared)}
	if p.refs, err = e.openRefs(ctx); err != nil {
		return fmt.Errorf("engine: doubt after a recovery: %w", err)
	}
	e.log.Warn().Str("reason", p.in.Reason).Int("open_runs", len(p.refs)).
		Msg("the store was recovered (a restore or an accepted data loss): putting the side effects of every open run in doubt")
	for start := 0; start == 0 || start < len(p.refs); start += doubtBatchRuns {
		end := min(start+doubtBatchRuns, len(p.refs))
		if err := p.batch(ctx, p.refs[start:end], end == len(p.refs)); err != nil {
			return fmt.Errorf("engine: doubt after a recovery: %w", err)
		}
	}
	e.stats.inDoubt.Add(int64(p.count))
	e.log.Warn().Int("actions", p.count).Str("reason", p.in.Reason).Msg("recovery settled: side effects in doubt wait for their lookup or a person")
	return nil
}

// doubtInput merges the marks into one: every reason, since the newest.
func doubtInput(marks []history.DoubtMark, declared func(queue, activityType string) (api.ActivityDeclaration, bool)) machine.DoubtInput {
	in := machine.DoubtInput{Declared: declared}
	reasons := make([]string, 0, len(marks))
	for _, m := range marks {
		reasons = append(reasons, m.At.UTC().Format("2006-01-02 15:04:05Z")+" "+m.Describe())
		if m.At.After(in.Since) {
			in.Since = m.At
		}
	}
	in.Reason = strings.Join(reasons, "; ")
	return in
}

// openRefs lists the runs the open-run index names.
func (e *Engine) openRefs(ctx context.Context) ([]history.RunRef, error) {
	var refs []history.RunRef
	err := e.scanIndex(ctx, history.Key().Str("o").Bytes(), func(r history.Record, _ error) error {
		kr := history.ReadKey(r.Key)
		_ = kr.Str()
		ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
		if kr.Err() == nil {
			refs = append(refs, ref) // a damaged key is reported by recover
		}
		return nil
	})
	if err != nil {
		return nil, storeErr(err)
	}
	return refs, nil
}

// batch puts the actions of refs in doubt in one transaction, which also
// deletes the marks when last.
func (p *doubtPass) batch(ctx context.Context, refs []history.RunRef, last bool) error {
	e := p.e
	x := e.newTxn(e.now(), nil)
	defer x.release()
	var outs []doubted
	for _, ref := range refs {
		d, err := p.run(ctx, x, ref)
		if err != nil {
			return err
		}
		if d.n > 0 {
			outs = append(outs, d)
		}
	}
	if err := x.build(ctx); err != nil {
		return err
	}
	if last {
		for _, k := range p.keys {
			x.batch.Deletes = append(x.batch.Deletes, history.RecordKey{Space: history.SpaceMeta, Key: k})
		}
	}
	if x.batch.Empty() {
		return nil
	}
	if err := e.commitAs(ctx, "Doubt", &x.batch); err != nil {
		return storeErr(err)
	}
	e.stats.commits.Add(1)
	for _, d := range outs {
		p.count += d.n
		p.log(d)
	}
	return nil
}

// doubted is what the pass did to one run.
type doubted struct {
	st *machine.RunState
	n  int
}

// run puts the actions of one open run in doubt within x. A run whose
// stored data is damaged is left to recover, which quarantines it.
func (p *doubtPass) run(ctx context.Context, x *txn, ref history.RunRef) (doubted, error) {
	e := p.e
	if e.corrupt.lookup(ref.WorkflowID, ref.RunID) != nil {
		return doubted{}, nil
	}
	st, err := e.recoverState(ctx, ref)
	var d *runDamage
	if errors.As(err, &d) {
		return doubted{}, nil
	}
	if err != nil {
		return doubted{}, err
	}
	if !st.Status.Open() {
		return doubted{}, nil
	}
	nst := st.Clone()
	out, n := e.m.Doubt(nst, p.in, x.now)
	if n == 0 && len(out.Events) == 0 && !marked(nst, p.in.Since) {
		return doubted{}, nil
	}
	tr := x.run(nil, st, nst)
	x.record(tr, out)
	return doubted{st: nst, n: n}, nil
}

// marked reports whether an activity of st carries the doubt of the mark
// made at since (a Read action is only marked: machine.Doubt).
func marked(st *machine.RunState, since time.Time) bool {
	for _, a := range st.Activities {
		if a.Doubt != "" && a.DoubtSince.Equal(since) {
			return true
		}
	}
	return false
}

// log writes one error line per action put in doubt: each may wait for a
// person.
func (p *doubtPass) log(d doubted) {
	for _, id := range sortedKeys(d.st.Activities) {
		a := d.st.Activities[id]
		if a.InDoubt() == "" || !a.DoubtSince.Equal(p.in.Since) {
			continue
		}
		next := "the run is paused for a person (cairn workflow resolve)"
		switch {
		case a.KeyPending:
			next = "put in doubt once its key is assigned"
		case a.Reconciling:
			next = "its Reconcile lookup runs first"
		}
		p.e.log.Error().Str("workflow", d.st.WorkflowID).Str("run", d.st.RunID).Int64("scheduled_event", id).
			Str("activity_type", a.ActivityType).Str("idempotency_key", a.IdempotencyKey).Str("next", next).
			Msg("EFFECT IN DOUBT after a recovery of the store: it may have been performed in the lost range; not dispatched again")
	}
}
