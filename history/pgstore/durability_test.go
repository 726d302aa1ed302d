package pgstore

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
)

// TestSynchronousCommitForced: the store's sessions run with
// synchronous_commit=on unless the URL sets it.
func TestSynchronousCommitForced(t *testing.T) {
	opts := testOptions(t)
	cfg, err := poolConfig(opts.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; got != "on" {
		t.Fatalf("synchronous_commit in the session parameters: %q", got)
	}
	// The session parameter wins over defaults set elsewhere (the
	// database's, the role's, or here the connection's options).
	cfg.ConnConfig.RuntimeParams["options"] = "-c synchronous_commit=off"
	conn, err := pgx.ConnectConfig(bg, cfg.ConnConfig)
	if err != nil {
		t.Fatal(err)
	}
	var v string
	err = conn.QueryRow(bg, "SHOW synchronous_commit").Scan(&v)
	_ = conn.Close(bg)
	if err != nil || v != "on" {
		t.Fatalf("forced synchronous_commit under a default of off: %q, %v", v, err)
	}
	// A URL that sets it itself is left alone.
	opts.URL = withParam(opts.URL, "options", "-c synchronous_commit=local")
	cfg, err = poolConfig(opts.withDefaults())
	if err != nil {
		t.Fatal(err)
	}
	if _, set := cfg.ConnConfig.RuntimeParams["synchronous_commit"]; set {
		t.Fatal("the URL's own setting (in options) was overridden")
	}
	s := mustOpen(t, testOptions(t))
	if err := s.pool.QueryRow(bg, "SHOW synchronous_commit").Scan(&v); err != nil || v != "on" || s.Durability().SynchronousCommit != "on" {
		t.Fatalf("synchronous_commit %q (%v), Durability %+v", v, err, s.Durability())
	}
}

// TestUnsafeDurabilityRefused: a URL turning synchronous_commit off is
// refused unless AllowUnsafeDurability; a setting that is durable on the
// primary (local) is kept.
func TestUnsafeDurabilityRefused(t *testing.T) {
	base := testOptions(t)
	for _, how := range []struct{ key, value string }{{"synchronous_commit", "off"}, {"options", "-c synchronous_commit=off"}} {
		opts := base
		opts.URL = withParam(base.URL, how.key, how.value)
		if _, err := Open(bg, opts); !errors.Is(err, ErrUnsafeDurability) {
			t.Fatalf("%s=%s: %v, want ErrUnsafeDurability", how.key, how.value, err)
		}
		opts.AllowUnsafeDurability = true
		s := mustOpen(t, opts)
		if s.Durability().SynchronousCommit != "off" {
			t.Fatalf("%s=%s allowed: Durability %+v", how.key, how.value, s.Durability())
		}
		_ = s.Close()
	}
	opts := base
	opts.URL = withParam(base.URL, "synchronous_commit", "local")
	if s := mustOpen(t, opts); s.Durability().SynchronousCommit != "local" {
		t.Fatalf("synchronous_commit=local: Durability %+v", s.Durability())
	}
}

// TestDurabilityCheck: the settings that lose acknowledged commits.
func TestDurabilityCheck(t *testing.T) {
	for _, c := range []struct {
		d  Durability
		ok bool
	}{
		{Durability{SynchronousCommit: "on", Fsync: "on"}, true},
		{Durability{SynchronousCommit: "remote_apply", Fsync: "on", SynchronousStandbyNames: "s1"}, true},
		{Durability{SynchronousCommit: "on"}, true}, // no fsync setting (CockroachDB)
		{Durability{SynchronousCommit: "off", Fsync: "on"}, false},
		{Durability{SynchronousCommit: "on", Fsync: "off"}, false},
	} {
		if err := c.d.check(); (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrUnsafeDurability)) {
			t.Fatalf("%+v: %v", c.d, err)
		}
	}
}

// TestOptionsValidate: options that cannot work are refused before any
// connection.
func TestOptionsValidate(t *testing.T) {
	for name, o := range map[string]Options{
		"no URL":       {},
		"bad schema":   {URL: "postgres://x", Schema: "Cairn; DROP"},
		"shards":       {URL: "postgres://x", Shards: -1},
		"one conn":     {URL: "postgres://x", MaxConns: 1},
		"huge batches": {URL: "postgres://x", MaxBatchBytes: MaxBatchBytesLimit + 1},
	} {
		if _, err := Open(bg, o); !errors.Is(err, ErrInvalidOptions) {
			t.Fatalf("%s: %v, want ErrInvalidOptions", name, err)
		}
	}
}
