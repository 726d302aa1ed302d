// Package badgerstore is the embedded history.Store: Cairn's event log and
// record store on Badger (github.com/cairnflow/cairn/third_party/badger), in one directory
// owned by one process.
//
// It lives apart from package history so that importing the event types
// never links Badger. Use it through the history.Store interface:
//
//	st, err := badgerstore.Open(badgerstore.Options{Dir: "./cairn-data"})
//	if err != nil {
//		return err // errors.Is(err, history.ErrLocked): another process has the directory
//	}
//	defer st.Close()
//
//	run := history.RunRef{WorkflowID: "invoice-INV-9", RunID: "r1"}
//	err = st.Commit(ctx, &history.Batch{
//		Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: []history.Event{
//			{ID: 1, Time: now, Attrs: &history.WorkflowStarted{WorkflowType: "PayInvoice", TaskQueue: "agents"}},
//		}}},
//		Puts: []history.Record{{Space: history.SpaceCurrentRun, Key: history.Key().Str(run.WorkflowID).Bytes(), Value: []byte(run.RunID)}},
//	})
//	// err == nil: durable. errors.Is(err, history.ErrConflict): someone else appended first.
//
//	for ev, err := range st.Events(ctx, run, 1) { … }
//
// # Durability and group commit
//
// Commits are fsynced (Options.NoSync turns that off for tests). Badger
// syncs its logs once per transaction, so Commit does not open one per call:
// a single committer goroutine takes every queued batch, checks each one
// against the database and the batches before it in the same group, writes
// the accepted ones in one transaction, and answers each caller with its own
// outcome (see Store.Commit). Many concurrent writers therefore share
// fsyncs, while a lone writer pays one round of fsyncs per commit. A commit
// becomes visible to readers only once it is durable.
//
// # Key layout
//
// Events are stored under "h" + tuple(workflow id, run id) + 8-byte
// big-endian event id, encoded with history.EncodeEvent (checksummed, so
// damage is reported as history.ErrCorrupt). A run's last event id is the
// key of its last event, found with one reverse seek and then cached, so an
// append checks its expected next id without a read (earlier builds also
// kept a head record, "l" + tuple, now ignored). Each history.Space has its own
// one-letter prefix (s, c, q, t, e, v, m). Keyed records are opaque bytes
// to this store, sealed in a CRC32C envelope over key and value (format 2;
// format-1 directories are migrated at Open), so damage to them is
// reported as history.ErrCorrupt naming space and key.
//
// # Integrity
//
// Every group commit also writes its number under "\x00cairn.seq"; the
// file CAIRN-HWM in the directory holds the last number known durable and
// the MANIFEST's synced size. Open refuses (history.ErrCorrupt, naming
// file, offset and lost commits) a directory whose logs or tables lost or
// damaged acknowledged data, unless Options.AcceptDataLoss, which records
// the loss (Store.Losses) and leaves a history.DoubtMark, as Restore does.
// See docs/reliability.md, "Storage integrity".
//
// # A full disk
//
// Commits are refused with history.ErrNoSpace while fewer than
// Options.MinFreeBytes are free, before Badger writes anything; reads go
// on and commits resume by themselves. Badger's memory-mapped files are
// allocated before they are written (no SIGBUS), and a reserve file
// (CAIRN-RESERVE) lets the store open on a full disk.
//
// # Limits
//
// One batch must fit in one Badger transaction: about 15% of
// Options.MemTableSize (about 2.4 MB by default; values of 1 MiB or more
// count only a pointer), else history.ErrTooLarge.
// Values of 1 MiB or more are kept in Badger's value log, which this store
// does not garbage-collect yet.
package badgerstore
