// Package history is Cairn's durable event log: the event model (one Go
// type per event type), the checksummed envelope each event is stored in,
// the JSON form of a whole history (the file format of `cairn history
// export` and of the replayer), order-preserving tuple keys for records, and
// the Store contract every storage backend implements.
//
// It imports no other package of Cairn and links no storage engine: the
// Badger store lives in history/badgerstore, and history/historytest holds
// the conformance suite every Store must pass.
//
// Encoding and decoding one event:
//
//	ev := history.Event{ID: 3, Time: now, Attrs: &history.ActivityCompleted{ScheduledEventID: 2, Result: p}}
//	b, err := history.EncodeEvent(ev)
//	back, err := history.DecodeEvent(b, history.RunRef{WorkflowID: "invoice-INV-9", RunID: runID}, 3)
//	// a damaged record: errors.Is(err, history.ErrCorrupt), and the message names workflow, run and event
//
// Appending to a run with optimistic concurrency:
//
//	err := store.Commit(ctx, &history.Batch{Appends: []history.Append{{Run: ref, ExpectedNext: 4, Events: evs}}})
//	// errors.Is(err, history.ErrConflict) when another writer got there first; nothing was written
package history
