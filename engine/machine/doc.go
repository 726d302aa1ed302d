// Package machine is Cairn's run state machine: the pure core of the
// engine. It decides everything about one run — what each input records in
// its history, which tasks become ready, which deadlines to arm, what the
// effects ledger must say, how a report of an activity attempt is judged —
// and does nothing else: no store, no I/O, no clock (time is an argument),
// no goroutines. The service in package engine owns the store, the locks,
// the task queues and the timers; it runs every input through a Machine on
// a copy of the run's state and commits what comes out in one store
// transaction (etcd raft's RawNode and Ready are the model).
//
// A run is a *RunState. Start creates one; every other input mutates the
// state it is given and returns an Output: a workflow task's dispatch
// (WFTDispatched), completion (CompleteWFT), failure (FailWFT) or refusal
// (RefuseWFT); an activity's dispatch (ActivityDispatched,
// DispatchDeclared), heartbeat, report (Report, ActivityCompleted,
// ActivityFailed) or answer from the effects ledger (Deduplicate,
// PauseOnLedger); a deadline that came (Fire); a signal, a cancel request,
// a termination, a person's resolution, a child's close, a budget update.
//
//	m := &machine.Machine{Limits: machine.DefaultLimits(), Defaults: machine.DefaultDefaults(), NewRunID: newRunID}
//	st, out := m.Start(machine.StartParams{Request: req, RunID: newRunID()}, now)
//	// write out.Events and st; queue the workflow task (out.WFTReady); arm out.Deadlines
//
//	next := st.Clone() // an input that fails leaves its copy to be discarded
//	m.WFTDispatched(next, epoch, now)
//	out, err := m.CompleteWFT(next, machine.WFTCompletion{Commands: cmds}, now)
//	// on success: write out.Events, out.Ledger and next in one transaction, then use next
//
// An Output holds the new events, numbered from the state's NextEventID;
// the workflow task and the activities to queue; the deadlines to arm
// (Fire checks that a deadline still applies, so a stale one is harmless);
// the other runs to start, signal or close in the same transaction; the
// changes to the effects-ledger entries of the keys it touched
// (LedgerChange, folded into an entry by LedgerEntry.Apply); and the late
// reports it judged. Deadlines lists every deadline a state implies, to
// rebuild the timers after a restart, and Recovered adjusts a state read
// back then.
//
// The one thing a Machine reads is an occurrence counter, when it assigns
// an idempotency key (IdempotencyKey, OccurrenceKey): through
// Machine.Occurrence, which the service implements over its store. The
// counts a transition advances stay in its copy of the state
// (RunState.UncommittedOccurrences) until the service has written them.
//
// The package's tests are scripts: a sequence of inputs and the time,
// whose events and outputs are compared, as text, with golden files in
// testdata (go test -update rewrites them).
package machine
