package engine

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sort"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Check verifies a store the engine is not running on (`cairn check --data
// DIR`): every record is read (so its checksum is verified by the store),
// every run's history is read in full and must be contiguous from event 1
// and end where the run's state says, the indexes and the current-run
// pointers must agree with the run states, the occurrence counters with the
// keys each history assigned, and every effects-ledger entry
// must agree with the history of the run that last changed it, and every
// payload chunk must hash to its key, and every chunk an event, a run
// state or another chunk references must be stored. What is found is
// reported, not repaired.
//
//	st, _ := badgerstore.Open(badgerstore.Options{Dir: dir}) // its own integrity checks run here
//	report, err := engine.Check(ctx, st)
//	if err == nil && !report.OK() { … }
//
// The error is for a check that could not run (the store failing for a
// reason other than damage); damage is in the report.
func Check(ctx context.Context, store history.Store) (*CheckReport, error) {
	c := &checker{store: store, r: &CheckReport{}, runs: map[history.RunRef]*checkedRun{}, refs: map[string]chunkUse{}, deleted: map[history.RunRef]bool{}}
	steps := []func(context.Context) error{c.runStates, c.histories, c.currentRuns, c.indexes, c.ledger, c.chunks}
	for _, step := range steps {
		if err := step(ctx); err != nil {
			return c.r, err
		}
	}
	sort.SliceStable(c.r.Problems, func(i, j int) bool {
		a, b := c.r.Problems[i], c.r.Problems[j]
		return a.WorkflowID < b.WorkflowID || (a.WorkflowID == b.WorkflowID && a.RunID < b.RunID)
	})
	return c.r, nil
}

// CheckReport is what Check found.
type CheckReport struct {
	Runs     int `json:"runs"`
	OpenRuns int `json:"openRuns"`
	// DeletedRuns counts the runs deleted on purpose (retention, cairn
	// workflow delete) whose tombstones the store holds.
	DeletedRuns   int `json:"deletedRuns,omitempty"`
	Events        int `json:"events"`
	Records       int `json:"records"`
	LedgerEntries int `json:"ledgerEntries"`
	// Chunks counts the payload chunks read.
	Chunks int `json:"chunks"`
	// Quarantined counts the runs the engine quarantined (each also a
	// problem of kind "quarantined").
	Quarantined int            `json:"quarantined"`
	Problems    []CheckProblem `json:"problems"`
}

// OK reports whether nothing is damaged or inconsistent.
func (r *CheckReport) OK() bool { return len(r.Problems) == 0 }

// CheckProblem is one thing that is damaged or does not agree.
type CheckProblem struct {
	// Kind is one of: "record" (a record that fails its checksum or does
	// not decode), "history" (a history that is damaged, has a hole, or
	// ends elsewhere than its run state says), "index", "current-run",
	// "ledger", "quarantined", "chunk" (a payload chunk that does not
	// hash to its key, or a chunk referenced but not stored),
	// "occurrence" (the run's occurrence counters do not add up to the
	// idempotency keys its history assigned, or belong to no run).
	Kind       string `json:"kind"`
	WorkflowID string `json:"workflowId,omitempty"`
	RunID      string `json:"runId,omitempty"`
	// Space and Key (hex) name a damaged keyed record.
	Space   string `json:"space,omitempty"`
	Key     string `json:"key,omitempty"`
	Message string `json:"message"`
}

type checker struct {
	store history.Store
	r     *CheckReport
	runs  map[history.RunRef]*checkedRun
	// refs holds every chunk hash a run references, with where it was
	// first seen.
	refs map[string]chunkUse
	// deleted are the runs deleted on purpose (their tombstones).
	deleted map[history.RunRef]bool
}

// chunkUse is where a chunk reference was seen: a run's event (or its
// state, event 0).
type chunkUse struct {
	ref   history.RunRef
	event int64
	what  string
}

// checkedRun is what the check keeps of one run.
type checkedRun struct {
	st *machine.RunState
	// keyed holds, per scheduled activity with an idempotency key, its
	// key and the ledger state the history's last word on it implies.
	keyed map[int64]*keyedActivity
	// historyOK: the whole history was read without damage.
	historyOK bool
	// assigned counts the idempotency keys the history assigned (each
	// took one occurrence), and counted adds up the run's occurrence
	// counters (occurrences.go).
	assigned, counted int64
}

type keyedActivity struct {
	key  string
	want machine.LedgerState // 0: nothing yet that changes the ledger
}

func (c *checker) problem(kind string, ref history.RunRef, format string, args ...any) {
	c.r.Problems = append(c.r.Problems, CheckProblem{Kind: kind, WorkflowID: ref.WorkflowID, RunID: ref.RunID,
		Message: fmt.Sprintf(format, args...)})
}

// damagedRecord reports a record the store found damaged.
func (c *checker) damagedRecord(space history.Space, key []byte, err error) {
	p := CheckProblem{Kind: "record", Space: space.String(), Key: hex.EncodeToString(key), Message: err.Error()}
	kr := history.ReadKey(key)
	if space == history.SpaceRunState || space == history.SpaceCurrentRun || space == history.SpaceLedger {
		p.WorkflowID = kr.Str()
		if space == history.SpaceRunState {
			p.RunID = kr.Str()
		}
		if kr.Err() != nil {
			p.WorkflowID, p.RunID = "", ""
		}
	}
	c.r.Problems = append(c.r.Problems, p)
}

// scanAll walks every record of space, reporting damaged ones and going
// on after them.
func (c *checker) scanAll(ctx context.Context, space history.Space, prefix []byte, fn func(r history.Record)) error {
	err := scanRecords(ctx, c.store, space, history.ScanOptions{Prefix: prefix}, 0, func(r history.Record, bad error) (bool, error) {
		c.r.Records++
		if bad != nil {
			c.damagedRecord(space, r.Key, bad)
		} else {
			fn(r)
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("engine: check: scan %s: %w", space, err)
	}
	return nil
}

// runStates reads every run state.
func (c *checker) runStates(ctx context.Context) error {
	return c.scanAll(ctx, history.SpaceRunState, nil, func(r history.Record) {
		kr := history.ReadKey(r.Key)
		ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
		st, err := decodeState(r.Value)
		switch {
		case kr.Err() != nil:
			c.damagedRecord(history.SpaceRunState, r.Key, errors.New("the run state's key does not decode"))
			return
		case err != nil:
			c.damagedRecord(history.SpaceRunState, r.Key, err)
			return
		case st.WorkflowID != ref.WorkflowID || st.RunID != ref.RunID:
			c.problem("record", ref, "the run state stored under this run names workflow %q run %q", st.WorkflowID, st.RunID)
			return
		}
		c.r.Runs++
		if st.Status.Open() {
			c.r.OpenRuns++
		}
		c.runs[ref] = &checkedRun{st: st, keyed: map[int64]*keyedActivity{}}
	})
}

// histories reads every run's history in full.
func (c *checker) histories(ctx context.Context) error {
	refs := make([]history.RunRef, 0, len(c.runs))
	for ref := range c.runs {
		refs = append(refs, ref)
	}
	sort.Slice(refs, func(i, j int) bool {
		return refs[i].WorkflowID < refs[j].WorkflowID || (refs[i].WorkflowID == refs[j].WorkflowID && refs[i].RunID < refs[j].RunID)
	})
	for _, ref := range refs {
		if err := c.history(ctx, ref, c.runs[ref]); err != nil {
			return err
		}
	}
	return nil
}

func (c *checker) history(ctx context.Context, ref history.RunRef, cr *checkedRun) error {
	offset := cr.st.StoredOffset()
	if base := cr.st.Base; base != nil {
		// A reset's or a fork's history begins with its base's events,
		// stored there: they must be readable, and count for its keys.
		evs, err := readLinked(ctx, c.store, ref, base, 1, int(offset))
		if err != nil {
			c.problem("history", ref, "the %s's history refers to events 1-%d of %s run %s, which cannot be read: %v", base.Kind, offset,
				base.WorkflowID, base.RunID, err)
			return nil
		}
		types := map[int64]string{}
		for _, ev := range evs {
			// Its keys are those of the workflow that stored it: in the
			// run's own key space, a fork's are derived from its base's.
			switch a := ev.Attrs.(type) {
			case *history.ActivityScheduled:
				if a.IdempotencyKey != "" {
					c := *a
					c.IdempotencyKey = base.KeyOf(ref.WorkflowID, ev.ID, a.ActivityType, a.IdempotencyKey)
					ev.Attrs = &c
				}
			case *history.ActivityKeyed:
				if a.IdempotencyKey != "" {
					c := *a
					c.IdempotencyKey = base.KeyOf(ref.WorkflowID, ev.ID, types[a.ScheduledEventID], a.IdempotencyKey)
					ev.Attrs = &c
				}
			}
			if s, ok := ev.Attrs.(*history.ActivityScheduled); ok {
				types[ev.ID] = s.ActivityType
			}
			cr.see(ev)
		}
	}
	want := cr.st.NextEventID - 1 - offset // the run's own stored events
	var last int64
	for ev, err := range c.store.Events(ctx, ref, 1) {
		if err != nil {
			if errors.Is(err, history.ErrNotFound) && want == 0 {
				break
			}
			if !errors.Is(err, history.ErrCorrupt) && !errors.Is(err, history.ErrNotFound) {
				return fmt.Errorf("engine: check: history of %q/%q: %w", ref.WorkflowID, ref.RunID, err)
			}
			c.problem("history", ref, "after event %d: %v", last+offset, err)
			return nil
		}
		if ev.ID != last+1 {
			c.problem("history", ref, "event %d follows event %d: a hole in the history", ev.ID+offset, last+offset)
			return nil
		}
		last = ev.ID
		ev.ID += offset
		c.r.Events++
		cr.see(ev)
		c.seeRefs(ref, ev)
	}
	switch {
	case last < want:
		c.problem("history", ref, "the history ends at event %d but the run's state records %d events: events were lost", last+offset, want+offset)
	case last > want:
		c.problem("history", ref, "the history holds %d events but the run's state records %d: the state was rolled back", last+offset, want+offset)
	default:
		cr.historyOK = true
	}
	return nil
}

// see notes what an event means for the effects ledger.
func (cr *checkedRun) see(ev history.Event) {
	set := func(id int64, s machine.LedgerState) {
		if k := cr.keyed[id]; k != nil {
			k.want = s
		}
	}
	switch a := ev.Attrs.(type) {
	case *history.ActivityScheduled:
		if a.IdempotencyKey != "" {
			cr.keyed[ev.ID] = &keyedActivity{key: a.IdempotencyKey}
			cr.assigned++
		}
	case *history.ActivityKeyed: // a key decided after the schedule (declared where the activity runs)
		if k := cr.keyed[a.ScheduledEventID]; a.IdempotencyKey != "" && (k == nil || k.key != a.IdempotencyKey) {
			cr.keyed[a.ScheduledEventID] = &keyedActivity{key: a.IdempotencyKey}
			cr.assigned++
		}
	case *history.ActivityStarted:
		if !a.Reconcile {
			set(a.ScheduledEventID, machine.LedgerInFlight)
		}
	case *history.ActivityCompleted:
		set(a.ScheduledEventID, machine.LedgerCompleted)
	case *history.ActivityOutcomeUnknown:
		set(a.ScheduledEventID, machine.LedgerUnknown)
	case *history.ActivityFailed:
		set(a.ScheduledEventID, machine.LedgerNotHappened)
	case *history.ActivityTimedOut:
		set(a.ScheduledEventID, machine.LedgerNotHappened)
	case *history.ActivityCanceled:
		set(a.ScheduledEventID, machine.LedgerNotHappened)
	case *history.ActivityDeduplicated:
		if a.OriginalWorkflowID != "" { // answered from a fork's base: the fork's ledger records it completed
			set(a.ScheduledEventID, machine.LedgerCompleted)
		}
	case *history.ActivityResolved:
		if a.Resolution == history.ResolvedHappened {
			set(a.ScheduledEventID, machine.LedgerCompleted)
		} else {
			set(a.ScheduledEventID, machine.LedgerNotHappened)
		}
	}
}

// currentRuns checks that every current-run pointer names a run.
func (c *checker) currentRuns(ctx context.Context) error {
	return c.scanAll(ctx, history.SpaceCurrentRun, nil, func(r history.Record) {
		kr := history.ReadKey(r.Key)
		wf := kr.Str()
		if kr.Err() != nil {
			c.damagedRecord(history.SpaceCurrentRun, r.Key, errors.New("the current-run pointer's key does not decode"))
			return
		}
		ref := history.RunRef{WorkflowID: wf, RunID: string(r.Value)}
		if c.runs[ref] == nil {
			c.problem("current-run", ref, "the workflow's current-run pointer names run %q, which has no run state", ref.RunID)
		}
	})
}

// indexes checks the open-run and list indexes against the run states, and
// reports the quarantined runs.
func (c *checker) indexes(ctx context.Context) error {
	inOpen := map[history.RunRef]bool{}
	err := c.scanAll(ctx, history.SpaceIndex, nil, func(r history.Record) {
		kr := history.ReadKey(r.Key)
		switch kind := kr.Str(); kind {
		case "o", "q":
			ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
			if kr.Err() != nil {
				c.damagedRecord(history.SpaceIndex, r.Key, errors.New("the index key does not decode"))
				return
			}
			if kind == "q" {
				c.r.Quarantined++
				var rec quarantineRecord
				reason := "quarantine record damaged"
				if decodeMsgpack(r.Value, &rec) == nil {
					reason = rec.Reason
				}
				c.problem("quarantined", ref, "the engine quarantined this run: %s", reason)
				return
			}
			inOpen[ref] = true
			if cr := c.runs[ref]; cr == nil || !cr.st.Status.Open() {
				c.problem("index", ref, "the open-run index lists a run that is not open")
			}
		case "n":
			c.occurrence(r, kr)
		case "d":
			ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
			if kr.Err() == nil {
				c.deleted[ref] = true
				c.r.DeletedRuns++
			}
		case "a", "s":
			if kind == "s" {
				_ = kr.Int()
			}
			_ = kr.Int()
			ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
			info := new(api.WorkflowInfo)
			if kr.Err() != nil || decodeMsgpack(r.Value, info) != nil {
				c.damagedRecord(history.SpaceIndex, r.Key, errors.New("the list index entry does not decode"))
				return
			}
			if c.runs[ref] == nil {
				c.problem("index", ref, "the list index lists a run that has no run state")
			}
		}
	})
	if err != nil {
		return err
	}
	for ref, cr := range c.runs {
		if cr.st.Status.Open() && !inOpen[ref] {
			c.problem("index", ref, "the run is open but missing from the open-run index: the engine would not serve it")
		}
		c.occurrencesAgree(ref, cr)
	}
	return nil
}

// occurrence checks one occurrence counter record (index family "n",
// whose key kr has read up to the family).
func (c *checker) occurrence(r history.Record, kr *history.KeyReader) {
	ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
	okey := kr.Str()
	n, err := decodeOccurrence(r.Value)
	switch {
	case kr.Err() != nil || len(kr.Rest()) > 0:
		c.damagedRecord(history.SpaceIndex, r.Key, errors.New("the occurrence counter's key does not decode"))
	case err != nil:
		c.damagedRecord(history.SpaceIndex, r.Key, err)
	case c.runs[ref] == nil:
		c.problem("occurrence", ref, "an occurrence counter belongs to a run that has no run state")
	case hasKey(c.runs[ref].st.Occurrences, okey):
		c.problem("occurrence", ref, "an occurrence counter is both in the run state's earlier form and in a record of its own")
	default:
		c.runs[ref].counted += int64(n)
	}
}

// hasKey reports whether m has k.
func hasKey(m map[string]int32, k string) bool {
	_, ok := m[k]
	return ok
}

// occurrencesAgree checks that the run's occurrence counters add up to the
// keys its history assigned: a counter lost or behind would assign a key
// again.
func (c *checker) occurrencesAgree(ref history.RunRef, cr *checkedRun) {
	if !cr.historyOK {
		return
	}
	counted := cr.counted
	for _, n := range cr.st.Occurrences { // a run state of the earlier form
		counted += int64(n)
	}
	if counted != cr.assigned {
		c.problem("occurrence", ref, "the history assigned %d idempotency keys but the run's occurrence counters add up to %d: a key could be assigned again",
			cr.assigned, counted)
	}
}

// ledger checks every effects-ledger entry against the history of the run
// that last changed it.
func (c *checker) ledger(ctx context.Context) error {
	return c.scanAll(ctx, history.SpaceLedger, nil, func(r history.Record) {
		c.r.LedgerEntries++
		kr := history.ReadKey(r.Key)
		wf, key := kr.Str(), kr.Str()
		le, err := decodeLedger(key, r.Value)
		if kr.Err() != nil || err != nil {
			if err == nil {
				err = errors.New("the ledger entry's key does not decode")
			}
			c.damagedRecord(history.SpaceLedger, r.Key, err)
			return
		}
		ref := history.RunRef{WorkflowID: wf, RunID: le.RunID}
		c.use(le.Result.Ref, chunkUse{ref: ref, what: "the result of ledger entry " + key})
		cr := c.runs[ref]
		if cr == nil && c.deleted[ref] {
			return // the run was deleted (retention, cairn workflow delete); its ledger entries outlive it
		}
		if cr == nil {
			c.problem("ledger", ref, "ledger entry %s names run %q, which has no run state", key, le.RunID)
			return
		}
		if !cr.historyOK {
			return // its history is reported already
		}
		k := cr.keyed[le.ScheduledEventID]
		switch {
		case k == nil || k.key != key:
			c.problem("ledger", ref, "ledger entry %s names event %d of the run, which does not schedule that action", key, le.ScheduledEventID)
		case k.want != 0 && k.want != le.State && !le.LateState: // a late report may set a closed action's state
			c.problem("ledger", ref, "ledger entry %s is %s but the run's history says %s", key, ledgerStateName(le.State), ledgerStateName(k.want))
		}
	})
}

func ledgerStateName(s machine.LedgerState) string {
	switch s {
	case machine.LedgerInFlight:
		return "in flight"
	case machine.LedgerCompleted:
		return "completed"
	case machine.LedgerUnknown:
		return "unknown"
	case machine.LedgerNotHappened:
		return "not happened"
	}
	return fmt.Sprintf("state %d", s)
}

// seeRefs notes the chunks an event's payloads reference.
func (c *checker) seeRefs(ref history.RunRef, ev history.Event) {
	history.VisitPayloads(ev.Attrs, func(name string, p *history.Payload) {
		c.use(p.Ref, chunkUse{ref: ref, event: ev.ID, what: ev.Type().String() + "." + name})
	})
}

func (c *checker) use(h []byte, u chunkUse) {
	if len(h) == 0 || history.IsRoot(h) {
		return
	}
	if _, seen := c.refs[string(h)]; !seen {
		c.refs[string(h)] = u
	}
}

// chunks reads every payload chunk: each must hash to its key (a damaged
// chunk would be caught by the next read of a transcript, as a corrupt
// record) and its parent must be stored; then every chunk a run
// references must be stored. A chunk no run references is not a problem
// (chunks are shared and kept; see history/chunk.go).
func (c *checker) chunks(ctx context.Context) error {
	stored := map[string]bool{}
	parents := map[string][]byte{} // parent → one child naming it
	for ref, cr := range c.runs {
		if !cr.st.Result.IsZero() {
			c.use(cr.st.Result.Ref, chunkUse{ref: ref, what: "the run's result"})
		}
	}
	err := c.scanAll(ctx, history.SpaceChunk, nil, func(r history.Record) {
		c.r.Chunks++
		ch, err := history.DecodeChunk(r.Key, r.Value)
		if err != nil {
			c.r.Problems = append(c.r.Problems, CheckProblem{Kind: "chunk", Space: history.SpaceChunk.String(),
				Key: hex.EncodeToString(r.Key), Message: err.Error()})
			stored[string(r.Key)] = true // present, if damaged: reported once, here
			return
		}
		stored[string(r.Key)] = true
		if len(ch.Parent) > 0 && !history.IsRoot(ch.Parent) {
			if _, ok := parents[string(ch.Parent)]; !ok {
				parents[string(ch.Parent)] = append([]byte(nil), r.Key...)
			}
		}
	})
	if err != nil {
		return err
	}
	missing := func(h []byte, format string, args ...any) {
		u := c.refs[string(h)]
		c.r.Problems = append(c.r.Problems, CheckProblem{Kind: "chunk", WorkflowID: u.ref.WorkflowID, RunID: u.ref.RunID,
			Space: history.SpaceChunk.String(), Key: hex.EncodeToString(h), Message: fmt.Sprintf(format, args...)})
	}
	for _, p := range sortedKeys(parents) {
		if !stored[p] {
			missing([]byte(p), "chunk %x extends chunk %x, which is not stored: the payloads it spells cannot be read", parents[p], []byte(p))
		}
	}
	for _, h := range sortedKeys(c.refs) {
		if u := c.refs[h]; !stored[h] {
			where := u.what
			if u.event > 0 {
				where = fmt.Sprintf("event %d (%s)", u.event, u.what)
			}
			missing([]byte(h), "%s references chunk %x, which is not stored", where, []byte(h))
		}
	}
	return nil
}
