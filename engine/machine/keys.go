package machine

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Keys decided where the activity runs.
//
// An idempotency key is hash(workflow id, activity type, key material,
// occurrence). The workflow's worker computes the key material when it
// declares the activity as the worker that runs it does; when it does not
// (it declares nothing, or no business key — a Go function only the
// activity's worker has), the engine asks an activity worker for it with a
// key task (api.ActivityTask.KeyTask): a dispatch that runs nothing and
// records no intent, answered with CompleteActivity.KeyMaterial. Keys are
// then assigned in schedule order within the activity type — the
// occurrence counts identical earlier actions in the run, and keys of
// concurrent schedules must not depend on which key task answers first —
// and recorded with ActivityKeyed before the first attempt's intent.

// DispatchDeclared is ActivityDispatched for a poller that declares the
// activity as d (nil: it declares nothing). An activity scheduled before
// the engine knew the declaration is upgraded here, before any intent is
// recorded: the stronger class, the declared lookup, and a key task first
// when its key material must come from the declaring worker.
func (m *Machine) DispatchDeclared(st *RunState, schedID int64, epoch int64, identity string, d *api.ActivityDeclaration, now time.Time) (Output, error) {
	a, ok := st.Activities[schedID]
	if !ok || a.State != api.ActivityStateScheduled || !st.Status.Open() {
		return Output{}, api.Errorf(api.ErrStaleAttempt, "activity %d is not waiting for a worker", schedID)
	}
	t := m.begin(st, now)
	if d != nil && !a.Reconciling && !a.KeyPending {
		t.applyDeclaration(a, d, identity)
	}
	if a.KeyPending {
		// A key task: it runs nothing, so it records nothing; its lease
		// lives in memory.
		a.State, a.LeaseEpoch, a.StartedTime, a.LastHeartbeat, a.Identity = api.ActivityStateStarted, epoch, now, time.Time{}, identity
		a.LeaseDeadline = leaseDeadline(a, now)
		t.deadline(Deadline{At: a.LeaseDeadline, Kind: DeadlineActivityLease, ID: schedID, Epoch: epoch})
		return t.out, nil
	}
	t.dispatch(a, epoch, identity)
	return t.out, nil
}

// applyDeclaration upgrades a scheduled activity to poller's declaration d.
func (t *transition) applyDeclaration(a *ActivityInfo, d *api.ActivityDeclaration, identity string) {
	effect := max(a.Effect, d.Effect)
	// A key is decided for good once an attempt's intent was recorded
	// under it; before, it may still come from the declaring worker.
	rekey := effect != history.Read && (a.Effect == history.Read || d.BusinessKey != a.BusinessKey && len(a.Attempts) == 0)
	if effect == a.Effect && d.Reconcile == a.HasReconcile && !rekey {
		return
	}
	a.Effect, a.HasReconcile = effect, d.Reconcile
	if rekey {
		// Its key must come from the worker that declares it so (the
		// occurrence the old key counted stays counted).
		a.IdempotencyKey, a.KeyPending, a.BusinessKey = "", true, d.BusinessKey
		return
	}
	t.add(&history.ActivityKeyed{ScheduledEventID: a.ScheduledEventID, Effect: a.Effect, IdempotencyKey: a.IdempotencyKey,
		HasReconcile: a.HasReconcile, DeclaredBy: identity})
}

// keyReport applies the answer of a key task.
func (t *transition) keyReport(a *ActivityInfo, r AttemptReport) {
	a.LeaseEpoch, a.LeaseDeadline = 0, time.Time{}
	switch r.Kind {
	case ReportCompleted:
		if len(r.KeyMaterial) == 0 {
			f := history.Failure{Type: "KeyMaterial", NonRetryable: true, Message: "the key task's answer carried no key material"}
			t.failActivity(a, &f, "")
			return
		}
		a.KeyMaterial = r.KeyMaterial
		a.State, a.NextAttemptAt, a.QuietWait = api.ActivityStateBackoff, time.Time{}, false // until its turn
		t.assignKeys(a.ActivityType, r.Identity)
	case ReportNotStarted:
		t.readyActivity(a)
	default:
		// The material is a function of the input: it cannot be computed
		// (a business key returned an error), and will not be.
		f := r.Failure
		f.NonRetryable = true
		f.Message = fmt.Sprintf("the idempotency key could not be derived on worker %s: %s", r.Identity, f.Message)
		if f.Type == "" {
			f.Type = "KeyMaterial"
		}
		t.failActivity(a, &f, "")
	}
}

// keysAfter assigns the keys that waited behind a, an activity leaving the
// run (failed, timed out, cancelled) while its own key still waited for its
// material: the activities of its type scheduled after it would otherwise
// wait for good. a never had a key, so it counts no occurrence.
func (t *transition) keysAfter(a *ActivityInfo) {
	if a.KeyPending {
		t.assignKeys(a.ActivityType, "")
	}
}

// assignKeys assigns, in schedule order, the keys of the activities of
// type typ whose key material is known, up to the first one that still
// waits for it (the later ones then wait too: an occurrence depends on the
// identical actions scheduled before). Each is recorded (ActivityKeyed),
// checked against the ledger with the run's new events, and dispatched.
func (t *transition) assignKeys(typ, identity string) {
	for _, id := range sortedKeys(t.st.Activities) {
		a := t.st.Activities[id]
		if a.ActivityType != typ || !a.KeyPending {
			continue
		}
		if a.KeyMaterial == nil {
			return
		}
		var okey string
		a.IdempotencyKey, okey, a.OriginKey = t.nextKey(typ, a.KeyMaterial)
		a.KeyPending, a.KeyMaterial = false, nil
		t.add(&history.ActivityKeyed{ScheduledEventID: id, Effect: a.Effect, IdempotencyKey: a.IdempotencyKey, HasReconcile: a.HasReconcile,
			DeclaredBy: identity, OccurrenceKey: occurrenceDigest(typ, okey)})
		if a.Doubt != "" && a.Effect == history.SideEffect {
			t.inDoubt(a, false) // in doubt since before its key was known (doubt.go)
			continue
		}
		t.readyActivity(a)
	}
}

// Idempotency keys and their occurrences. An action's key is hash(workflow
// id, activity type, key material, occurrence), where the occurrence
// counts the identical (activity type, key material) actions scheduled in
// the run so far, from 1. A transition counts in its working copy of the
// run state (RunState.UncommittedOccurrences), on top of the count
// committed before it: Machine.Occurrence, or RunState.Occurrences for a
// run state of the earlier form. The service stores the counters
// (engine/occurrences.go).

// idempotencyKey derives an action's key; see docs/effects.md.
func idempotencyKey(workflowID, activityType string, material []byte, occurrence int32) string {
	h := sha256.New()
	writeField(h, []byte(workflowID))
	writeField(h, []byte(activityType))
	writeField(h, material)
	writeField(h, []byte(strconv.FormatInt(int64(occurrence), 10)))
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// IdempotencyKey is the exported form of the key derivation, for tools and
// tests: hash(workflow id, activity type, key material, occurrence).
func IdempotencyKey(workflowID, activityType string, material []byte, occurrence int32) string {
	return idempotencyKey(workflowID, activityType, material, occurrence)
}

type byteWriter interface{ Write([]byte) (int, error) }

// writeField writes a length-prefixed field so that no two different
// tuples hash the same bytes.
func writeField(h byteWriter, b []byte) {
	var n [8]byte
	l := uint64(len(b))
	for i := 7; i >= 0; i-- {
		n[i] = byte(l)
		l >>= 8
	}
	_, _ = h.Write(n[:])
	_, _ = h.Write(b)
}

// OccurrenceKey names the occurrence counter of the identical actions
// (activity type, key material) of a run: the key Machine.Occurrence and
// RunState.UncommittedOccurrences count under.
func OccurrenceKey(activityType string, material []byte) string {
	sum := sha256.Sum256(material)
	return activityType + "\x00" + hex.EncodeToString(sum[:12])
}

// occurrenceDigest is the part of an occurrence key after the activity
// type: what the keyed events record (ActivityScheduled.OccurrenceKey).
func occurrenceDigest(activityType, okey string) string {
	if okey == "" {
		return ""
	}
	return okey[len(activityType)+1:]
}

// nextKey counts one more identical action (activity type, key material)
// in the run and returns its idempotency key. On a failure to read the
// count it returns "" and records the error in t.err: the transition fails
// and its working copy is discarded.
func (t *transition) nextKey(activityType string, material []byte) (key, okey, origin string) {
	st := t.st
	ok := OccurrenceKey(activityType, material)
	n, pending := st.occ[ok]
	if !pending {
		var err error
		if n, err = t.committedOccurrence(ok); err != nil {
			if t.err == nil {
				t.err = err
			}
			return "", "", ""
		}
	}
	n++
	if st.occ == nil {
		st.occ = map[string]int32{}
	}
	st.occ[ok] = n
	if f := st.Fork(); f != nil && f.WorkflowID != "" {
		// A fork looks its actions up in its base workflow's ledger too,
		// under the key the base computed (branch.go).
		origin = idempotencyKey(f.WorkflowID, activityType, material, n)
	}
	return idempotencyKey(st.WorkflowID, activityType, material, n), ok, origin
}

// committedOccurrence is the count of okey as of the run's last commit:
// from the map of a run state of the earlier form while the counter is
// still there, else from the counter's record. A counter is in one of the
// two, never both: a migration moves it in one batch (occurrences).
func (t *transition) committedOccurrence(okey string) (int32, error) {
	st := t.st
	if n, ok := st.Occurrences[okey]; ok {
		return n, nil
	}
	if t.m.Occurrence == nil {
		return 0, nil
	}
	return t.m.Occurrence(st.Ref(), okey)
}
