package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/cairnflow/cairn/history"
)

// Lease is one shard's ownership by one owner for one period: every
// acquisition starts a new epoch. Expires is by the database's clock.
type Lease struct {
	Shard   int
	Owner   string
	Epoch   int64
	Expires time.Time
}

// Fence returns the fence a batch written under this lease carries.
func (l Lease) Fence() history.Fence { return history.Fence{Shard: l.Shard, Epoch: l.Epoch} }

// LeaseInfo is the state of one shard's lease as Leases read it.
type LeaseInfo struct {
	Lease
	// Held reports whether the lease has an owner and had not expired at
	// the database's now (which Leases returns too).
	Held bool
}

// micros is the SQL of a duration parameter given in microseconds.
const micros = " * interval '1 microsecond'"

const (
	sqlAcquire = `UPDATE shards SET owner = $2, epoch = epoch + 1, expires_at = now() + $3::bigint` + micros + `
WHERE shard_id = $1 AND (owner = '' OR owner = $2 OR expires_at IS NULL OR expires_at <= now())
RETURNING epoch, expires_at`

	sqlRenew = `UPDATE shards SET expires_at = now() + $2::bigint` + micros + `
FROM unnest($3::int[], $4::bigint[]) AS l(shard_id, epoch)
WHERE shards.shard_id = l.shard_id AND shards.epoch = l.epoch AND shards.owner = $1
RETURNING shards.shard_id, shards.epoch, shards.expires_at`

	sqlRelease = `UPDATE shards SET expires_at = now()
FROM unnest($2::int[], $3::bigint[]) AS l(shard_id, epoch)
WHERE shards.shard_id = l.shard_id AND shards.epoch = l.epoch AND shards.owner = $1`

	sqlLeases = `SELECT s.shard_id, s.owner, s.epoch, s.expires_at, n.now
FROM shards s CROSS JOIN (SELECT now() AS now) n ORDER BY s.shard_id`
)

// AcquireShard makes owner the holder of shard's lease for ttl (by the
// database's clock) with a new epoch, in one conditional UPDATE: it
// succeeds when the lease has no owner, has expired, or is already
// owner's (a re-acquisition is a new period too: the old epoch's fences
// stop holding). Otherwise it returns a *LeaseHeldError (ErrLeaseHeld)
// naming the holder and its expiry.
//
// The UPDATE waits while a commit fenced by the shard's current epoch is
// in flight (the fence reads the row FOR SHARE). If ctx ends meanwhile,
// AcquireShard returns ctx.Err() but the statement may still take effect
// once the lock is free: the lease may then be owner's, with a new epoch
// it was not told. Nothing is unsafe in that (no write carries that
// epoch); the caller acquires again, or lets the lease expire.
func (s *Store) AcquireShard(ctx context.Context, shard int, owner string, ttl time.Duration) (Lease, error) {
	if err := s.checkLeaseArgs(owner, ttl); err != nil {
		return Lease{}, err
	}
	if shard < 0 || shard >= s.shards {
		return Lease{}, invalidf("shard %d outside 0..%d", shard, s.shards-1)
	}
	if err := s.enter(ctx); err != nil {
		return Lease{}, err
	}
	defer s.gate.exit()
	l := Lease{Shard: shard, Owner: owner}
	err := s.pool.QueryRow(ctx, sqlAcquire, int32(shard), owner, ttl.Microseconds()).Scan(&l.Epoch, &l.Expires)
	if errors.Is(err, pgx.ErrNoRows) {
		return Lease{}, s.leaseHeld(ctx, shard)
	}
	if err != nil {
		return Lease{}, readError(ctx, fmt.Sprintf("acquire shard %d", shard), err)
	}
	return l, nil
}

// leaseHeld reads who holds shard, for AcquireShard's refusal.
func (s *Store) leaseHeld(ctx context.Context, shard int) error {
	e := &LeaseHeldError{Shard: shard}
	var expires pgtype.Timestamptz
	err := s.pool.QueryRow(ctx, "SELECT owner, epoch, expires_at FROM shards WHERE shard_id = $1", int32(shard)).
		Scan(&e.Owner, &e.Epoch, &expires)
	if err != nil {
		return readError(ctx, fmt.Sprintf("read the lease of shard %d", shard), err)
	}
	e.Expires = expires.Time
	return e
}

// RenewLeases extends, in one statement, those of leases whose owner and
// epoch still match the database (by its clock, to now + ttl), and
// returns them, renewed; the caller drops the others, which another owner
// took. A lease that expired but that nobody took since is renewed: its
// epoch never stopped fencing.
func (s *Store) RenewLeases(ctx context.Context, owner string, leases []Lease, ttl time.Duration) ([]Lease, error) {
	if err := s.checkLeaseArgs(owner, ttl); err != nil {
		return nil, err
	}
	if len(leases) == 0 {
		return nil, nil
	}
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.exit()
	shards, epochs := leaseArrays(leases)
	rows, err := s.pool.Query(ctx, sqlRenew, owner, ttl.Microseconds(), shards, epochs)
	if err != nil {
		return nil, readError(ctx, "renew leases", err)
	}
	var out []Lease
	var l Lease
	var shard int32
	_, err = pgx.ForEachRow(rows, []any{&shard, &l.Epoch, &l.Expires}, func() error {
		l.Shard, l.Owner = int(shard), owner
		out = append(out, l)
		return nil
	})
	if err != nil {
		return nil, readError(ctx, "renew leases", err)
	}
	return out, nil
}

// ReleaseLeases ends those of leases whose owner and epoch still match:
// they expire now (by the database's clock), so that another owner may
// acquire them at once.
func (s *Store) ReleaseLeases(ctx context.Context, owner string, leases []Lease) error {
	if owner == "" {
		return invalidf("empty lease owner")
	}
	if len(leases) == 0 {
		return nil
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.exit()
	shards, epochs := leaseArrays(leases)
	if _, err := s.pool.Exec(ctx, sqlRelease, owner, shards, epochs); err != nil {
		return readError(ctx, "release leases", err)
	}
	return nil
}

// Leases returns every shard's lease, in shard order, and the database's
// now, against which Held was decided.
func (s *Store) Leases(ctx context.Context) ([]LeaseInfo, time.Time, error) {
	if err := s.enter(ctx); err != nil {
		return nil, time.Time{}, err
	}
	defer s.gate.exit()
	rows, err := s.pool.Query(ctx, sqlLeases)
	if err != nil {
		return nil, time.Time{}, readError(ctx, "read leases", err)
	}
	out := make([]LeaseInfo, 0, s.shards)
	var now time.Time
	var shard int32
	var li LeaseInfo
	var expires pgtype.Timestamptz
	_, err = pgx.ForEachRow(rows, []any{&shard, &li.Owner, &li.Epoch, &expires, &now}, func() error {
		li.Shard, li.Expires = int(shard), expires.Time
		li.Held = li.Owner != "" && expires.Valid && expires.Time.After(now)
		out = append(out, li)
		return nil
	})
	if err != nil {
		return nil, time.Time{}, readError(ctx, "read leases", err)
	}
	return out, now, nil
}

func (s *Store) checkLeaseArgs(owner string, ttl time.Duration) error {
	if owner == "" {
		return invalidf("empty lease owner")
	}
	if ttl < time.Microsecond {
		return invalidf("lease ttl %s is below a microsecond", ttl)
	}
	return nil
}

func leaseArrays(leases []Lease) ([]int32, []int64) {
	shards, epochs := make([]int32, len(leases)), make([]int64, len(leases))
	for i, l := range leases {
		shards[i], epochs[i] = int32(l.Shard), l.Epoch
	}
	return shards, epochs
}
