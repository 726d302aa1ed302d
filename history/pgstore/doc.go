// Package pgstore is a history.Store on PostgreSQL: the path past one
// machine (DESIGN.md §11), where several Cairn servers share one database
// and own its shards through leases. It passes historytest like the
// embedded Badger store, and adds shard leases, fencing and a server
// registry for the cluster logic built on it.
//
//	st, err := pgstore.Open(ctx, pgstore.Options{
//		URL:    "postgres://cairn:secret@db.internal:5432/cairn?sslmode=verify-full&sslrootcert=/etc/cairn/ca.pem",
//		Schema: "cairn", // default; every table lives in it
//	})
//	if err != nil {
//		return err // ErrUnsafeDurability, ErrSchemaTooNew, ErrShardCount, ErrUnavailable …
//	}
//	defer st.Close()
//
//	lease, err := st.AcquireShard(ctx, 17, "server-a", 10*time.Second)
//	// errors.As(err, new(*pgstore.LeaseHeldError)): another server holds shard 17
//	err = st.Commit(ctx, &history.Batch{
//		Appends: []history.Append{{Run: run, ExpectedNext: 4, Events: evs}},
//		Puts:    []history.Record{{Space: history.SpaceRunState, Key: k, Value: v}},
//		Fences:  []history.Fence{lease.Fence()},
//	})
//	// nil: durable. history.ErrConflict: the run moved on. history.ErrFenced: shard 17
//	// was taken over; drop it. pgstore.ErrCommitUnknown: the connection failed after
//	// COMMIT was sent; read the run back.
//
// The URL takes every libpq parameter pgx knows (sslmode, sslrootcert,
// sslcert, sslkey, connect_timeout, several hosts with
// target_session_attrs, passfile …); see Options.URL.
//
// # Schema
//
// The tables live in Options.Schema (default "cairn"), which is the
// search_path of the store's sessions, so that tests and several
// installations can share a database. The SQL is in migrations/, embedded
// in the binary:
//
//	runs(workflow_id bytea, run_id bytea, next_id bigint)         PK (workflow_id, run_id)
//	events(workflow_id bytea, run_id bytea, event_id bigint, data bytea)  PK (workflow_id, run_id, event_id)
//	records(space smallint, key bytea, value bytea)                PK (space, key)
//	cluster(id = 1, shards int, created_at)                        the shard count, fixed
//	shards(shard_id int, owner text, epoch bigint, expires_at timestamptz)  one lease per shard
//	servers(server_id text, address, version, registered_at, last_heartbeat, expires_at)
//	schema_lock(id = 1), schema_migrations(version, name, applied_at)
//
// Ids and keys are bytea: workflow ids may hold any bytes, and bytea
// compares byte by byte, the order Scan promises. Event data is
// history.EncodeEvent's checksummed envelope and is decoded by history's
// decoder, so damage is history.ErrCorrupt naming workflow, run and event;
// a missing event row, or one past the run's head, is reported the same
// way, never served as a shorter history. Record values are sealed in
// history's record envelope (history.SealRecord: CRC32C over the space's
// letter, the key and the value — the bytes badgerstore stores), so a
// damaged or misplaced value is history.ErrCorrupt naming space and key.
//
// Migrations are applied at Open, each once, in order, in one
// transaction with its row in schema_migrations. Servers opening at once
// serialize on the row of schema_lock (SELECT … FOR UPDATE on an ordinary
// table; no advisory lock). A database at a newer version than the binary
// knows is refused with ErrSchemaTooNew. The shards are created with the
// schema (Options.Shards, default 256) and their count recorded in
// cluster; it never changes (a run's shard is a hash over it): a later
// Open with Shards 0 uses it, one asking for another count fails with
// ErrShardCount rather than silently working with a count the other
// servers do not use.
//
// # Group commit
//
// Postgres makes one commit durable with one WAL flush: a few hundred a
// second from one client, but many concurrent transactions share flushes.
// Commit therefore queues its batch for one committer goroutine, which
// takes every queued batch and commits as many as it can in one
// transaction (commit.go, plan.go, round.go):
//
//	BEGIN ISOLATION LEVEL READ COMMITTED
//	SELECT shard_id, epoch FROM shards WHERE shard_id = ANY($1) FOR SHARE      -- the fences
//	UPDATE runs SET next_id … FROM unnest(wf[], run[], expected[], next[]) … RETURNING  -- appends to runs with events
//	INSERT INTO runs SELECT … FROM unnest(…) ON CONFLICT DO NOTHING RETURNING  -- new runs
//	INSERT INTO events SELECT … FROM unnest(…)
//	INSERT INTO records SELECT … FROM unnest(…) ON CONFLICT (space, key) DO UPDATE …
//	DELETE FROM records WHERE (space, key) IN (SELECT … FROM unnest(…))
//	COMMIT
//
// Everything up to COMMIT is one pgx pipeline (one round trip); COMMIT is
// sent once the results show that every batch's checks held, so a group
// costs two round trips and one WAL flush whatever its size. The
// statements take arrays, so their number does not grow with the group
// (BenchmarkCommit reports batches and statements per commit). Batches
// apply in queue order: writes of several batches to one record are
// merged, the last winning (one statement may not touch a row twice); a
// batch appending to a run already in the group waits for the next group;
// a batch with Conditions commits alone, in a SERIALIZABLE transaction
// (the engine never uses them).
//
// Every caller gets its own outcome. The RETURNING lists and the fence
// epochs name the batches whose checks failed: the group is rolled back,
// those batches are answered (history.ErrConflict, history.ErrFenced) and
// the others run again. A failure no check names but that may come from
// one batch's data (a constraint, a value) commits the batches one by one;
// a serialization failure or deadlock runs the group again. A failure
// before COMMIT was sent wrote nothing (ErrUnavailable); a failure after
// it — the connection dropped, the answer never came — leaves the outcome
// unknown: ErrCommitUnknown, which wraps none of the sentinels the engine
// takes for "refused, nothing written" (engine/resync.go,
// ambiguousCommit), so the engine reads the runs back. The store never
// cancels a COMMIT (a timeout closes the connection instead): Postgres
// answers a COMMIT canceled while it waits for a synchronous standby with
// success, though the standby may not have it. A caller whose
// context ends while its batch is queued gets ctx.Err() and nothing is
// written; once the batch is in a transaction, Commit waits for its
// outcome (bounded by Options.CommitTimeout).
//
// # Fencing, leases and servers
//
// A server owns a shard through a lease in the ordinary, logged shards
// table: AcquireShard is one conditional UPDATE that succeeds when the
// lease is free, expired or already the caller's, and bumps the epoch;
// RenewLeases extends, in one statement, only the leases whose owner and
// epoch still match; ReleaseLeases expires them. Every time is the
// database's clock (now()), never a server's: a server whose clock drifts
// can neither steal nor keep a shard.
//
// Expiry is advice; the fence is the safety. A batch carrying
// history.Fence{Shard, Epoch} commits only if the shard's epoch is still
// Epoch, read FOR SHARE in the batch's own transaction: an acquisition
// (which updates the row) waits for the commit in flight, so the write
// lands entirely under the epoch it checked, and a server frozen past its
// lease and taken over wakes up to ErrFenced with nothing written — only
// the fenced batches of a group fail. A server frozen in the middle of a
// commit holds those rows until the database ends its silent transaction
// (idle_in_transaction_session_timeout, set on the store's sessions:
// IdleInTransactionTimeout), so its shards can move. RegisterServer, HeartbeatServer,
// Servers and RemoveServer keep a registry of the servers, alive by the
// database's clock.
//
// # What the settings mean for the guarantee
//
// Cairn records an intent durably before it dispatches the effect; that
// holds only if a commit the database acknowledged survives a crash.
//
//   - synchronous_commit: the store's sessions set it to on, unless the
//     URL sets it. off acknowledges a commit before its WAL is flushed: a
//     crash of the database loses the last commits, and an effect whose
//     intent was lost can run twice. Open refuses off with
//     ErrUnsafeDurability unless Options.AllowUnsafeDurability (tests
//     only). local flushes on the primary only.
//   - fsync off (and full_page_writes off) lets a power loss lose or
//     corrupt acknowledged data; Open refuses fsync off.
//   - High availability needs a synchronous standby
//     (synchronous_standby_names, with synchronous_commit on or
//     remote_apply): after a failover to an asynchronous replica, commits
//     the old primary acknowledged can be missing — an intent the engine
//     acted on forgotten. Open does not refuse a server without one (a
//     single database is a valid setup); Store.Durability reports it.
//
// # CockroachDB and YugabyteDB
//
// The SQL is kept to what distributed databases speaking the Postgres
// protocol accept, checked against their documentation (not run here):
// no LISTEN/NOTIFY (NOTIFY also serializes every commit of a Postgres
// database), no advisory locks (the migration lock and the leases are rows
// of ordinary tables), no UNLOGGED tables (a fence must survive a crash),
// no sequences (events are numbered by the engine; epochs by UPDATE); only
// bytea keys, ON CONFLICT, multi-array unnest, UPDATE … FROM, RETURNING,
// FOR UPDATE/FOR SHARE, generate_series, now(). Known differences:
// CockroachDB runs SERIALIZABLE unless read committed is enabled, and
// YugabyteDB maps READ COMMITTED to snapshot isolation unless
// yb_enable_read_committed_isolation: a write-write conflict then aborts
// a group with a serialization failure (40001) instead of waiting, which
// the committer retries; under SERIALIZABLE, FOR SHARE may be a no-op but
// the acquisition's write conflicts with the fence's read all the same.
// CockroachDB has no fsync setting (it always syncs its log; SHOW fsync
// fails and is ignored). YugabyteDB's DDL is not transactional by default,
// so a migration that fails halfway may leave part of it behind.
//
// # Limits
//
// A batch is at most Options.MaxBatchBytes (default 64 MiB; larger is
// history.ErrTooLarge); a record key, and an append's workflow id plus run
// id, at most 2000 bytes (primary-key entries of a btree); a shard count
// at most 65536.
package pgstore
