// Package storecopy copies everything one history.Store holds into
// another — every record of every history.Space and every run's events —
// verifies the copy, and resumes a copy that was interrupted. It is what
// `cairn migrate` runs to move a Badger data directory into PostgreSQL,
// and it is written against history.Store only: any store to any store.
//
//	src, _ := badgerstore.Open(badgerstore.Options{Dir: "./cairn-data"}) // history.ErrLocked: a server runs on it
//	dst, _ := pgstore.Open(ctx, pgstore.Options{URL: "postgres://…"})
//	res, err := storecopy.Run(ctx, src, dst, storecopy.Options{
//		Source:   "badger:/srv/cairn-data", // recorded in the target; a resumed copy must name the same
//		Progress: func(p storecopy.Progress) { log.Print(p) },
//	})
//	switch {
//	case errors.Is(err, storecopy.ErrTargetNotEmpty): // the target holds data that is not this copy's
//	case errors.Is(err, storecopy.ErrMismatch):       // a record or event differs (err lists what and where)
//	case err != nil:                                  // interrupted, unreachable …: run it again, it resumes
//	}
//	// res.Copy: what was copied and skipped; res.Verify: what was compared (counts, bytes, digests)
//
// # What is copied
//
// Records are read with Scan, page by page in key order, space by space,
// and written with the same key and the same value bytes; the target seals
// each value in its own checksummed envelope (history.SealRecord), so a
// record's bytes are what the source returned after checking its envelope.
// Runs are named by the source's history.RunLister — from the events
// themselves, not from the engine's run states, so a run whose state record
// is missing is copied all the same. A store that cannot list its runs is
// refused with ErrUnsupported. Events are read with ReadEvents and
// appended with Append.ExpectedNext = the target's last event id + 1:
// they arrive as the target's codec writes them (history.EncodeEvent),
// which is the bytes the source stored for every event this build wrote;
// an event an older build wrote with fewer attribute fields is stored with
// those fields zero, which is how every reader sees it anyway.
//
// Writes go in batches of Options.BatchBytes; a batch the target refuses
// with history.ErrTooLarge is split in two (and later batches made
// smaller), down to a single record or event, which then fails naming it.
// Store-private data is not copied: Badger's commit sequence and accepted
// data losses, Postgres's shard leases and server registry.
//
// # Starting, resuming, refusing
//
// A copy writes a start marker into the target first (SpaceMeta, key
// tuple("cairn.copy", "started"), naming Options.Source) and a verified
// marker last, once Verify found the target equal to the source. Copy
// refuses a target that holds anything without a start marker
// (ErrTargetNotEmpty), or whose start marker names another source. A
// target whose marker names the same source resumes: records already
// there with the same value are skipped, events continue after the
// target's last one. A record there with a different value, a record or
// an event the source does not have, is ErrMismatch: the target was
// written by something else, or the source changed since the copy began
// — start again into an empty target. A copy already verified is not
// copied into again (a server may be running on it): Run only verifies.
// ReadState tells whether a store holds a copy, and whether it finished;
// a server should refuse a store whose copy did not.
//
// The markers are the copy's own: records under tuple("cairn.copy") in
// SpaceMeta are neither copied nor compared.
//
// The source must not change while it is copied (a Badger directory is
// locked by the copy; stop the servers of any other store). Verify then
// proves it did not.
package storecopy
