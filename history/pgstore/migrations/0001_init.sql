-- Cairn's history store, schema version 1. The tables live in the schema
-- named by pgstore.Options.Schema: the store's sessions have it as their
-- search_path, so nothing here names it. Ids and keys are bytea: workflow
-- and run ids may hold any bytes (NUL, invalid UTF-8), and bytea compares
-- byte by byte, the order history.Store's Scan promises.

-- runs: the head of each run's history, the id its next event must have.
-- An append is a compare-and-set of next_id; a run with no row has no
-- events.
CREATE TABLE runs (
	workflow_id bytea  NOT NULL,
	run_id      bytea  NOT NULL,
	next_id     bigint NOT NULL CHECK (next_id > 1),
	PRIMARY KEY (workflow_id, run_id)
);

-- events: one row per event, data in history's checksummed envelope
-- (history.EncodeEvent).
CREATE TABLE events (
	workflow_id bytea  NOT NULL,
	run_id      bytea  NOT NULL,
	event_id    bigint NOT NULL CHECK (event_id > 0),
	data        bytea  NOT NULL,
	PRIMARY KEY (workflow_id, run_id, event_id)
);

-- records: the keyed records of every history.Space (space is its number),
-- each value sealed in history's record envelope (history.SealRecord).
CREATE TABLE records (
	space smallint NOT NULL CHECK (space > 0),
	key   bytea    NOT NULL,
	value bytea    NOT NULL,
	PRIMARY KEY (space, key)
);

-- cluster: one row, written when the schema is created: the shard count,
-- which never changes.
CREATE TABLE cluster (
	id         int         PRIMARY KEY CHECK (id = 1),
	shards     int         NOT NULL CHECK (shards > 0),
	created_at timestamptz NOT NULL DEFAULT now()
);

-- shards: one row per shard, its lease. An ordinary logged table: a fence
-- must survive a crash of the database (an UNLOGGED table is emptied, and
-- a stale owner's epoch could match again). epoch grows with every
-- acquisition; expires_at is by the database's clock, NULL before the
-- first acquisition.
CREATE TABLE shards (
	shard_id   int         PRIMARY KEY CHECK (shard_id >= 0),
	owner      text        NOT NULL DEFAULT '',
	epoch      bigint      NOT NULL DEFAULT 0,
	expires_at timestamptz
);

-- servers: the registry of the servers sharing the database.
CREATE TABLE servers (
	server_id      text        PRIMARY KEY,
	address        text        NOT NULL,
	version        text        NOT NULL DEFAULT '',
	registered_at  timestamptz NOT NULL,
	last_heartbeat timestamptz NOT NULL,
	expires_at     timestamptz NOT NULL
);
