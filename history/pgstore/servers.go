package pgstore

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairnflow/cairn/history"
)

// DefaultServerTTL is how long a registration lives without a heartbeat
// when ServerInfo.TTL is zero.
const DefaultServerTTL = 30 * time.Second

// ServerInfo is one server sharing the database. RegisterServer reads ID,
// Address, Version and TTL; Servers fills in the rest, by the database's
// clock.
type ServerInfo struct {
	// ID names the server (unique among those sharing the database).
	ID string
	// Address is where the other servers reach it (host:port).
	Address string
	// Version is the server's build, for operators.
	Version string
	// TTL is how long the registration lives without a heartbeat
	// (RegisterServer; default DefaultServerTTL).
	TTL time.Duration

	// RegisteredAt, LastHeartbeat and Expires are by the database's clock.
	RegisteredAt, LastHeartbeat, Expires time.Time
	// Alive reports whether the registration had not expired at the
	// database's now when Servers read it.
	Alive bool
}

const (
	sqlRegister = `INSERT INTO servers (server_id, address, version, registered_at, last_heartbeat, expires_at)
VALUES ($1, $2, $3, now(), now(), now() + $4::bigint` + micros + `)
ON CONFLICT (server_id) DO UPDATE SET address = excluded.address, version = excluded.version,
  registered_at = excluded.registered_at, last_heartbeat = excluded.last_heartbeat, expires_at = excluded.expires_at`

	sqlHeartbeat = `UPDATE servers SET last_heartbeat = now(), expires_at = now() + $2::bigint` + micros + `
WHERE server_id = $1`

	sqlServers = `SELECT s.server_id, s.address, s.version, s.registered_at, s.last_heartbeat, s.expires_at, s.expires_at > n.now
FROM servers s CROSS JOIN (SELECT now() AS now) n ORDER BY s.server_id`
)

// RegisterServer records (or replaces) the registration of info.ID, alive
// for info.TTL from now by the database's clock.
func (s *Store) RegisterServer(ctx context.Context, info ServerInfo) error {
	if info.ID == "" || info.TTL < 0 {
		return invalidf("server id %q, ttl %s", info.ID, info.TTL)
	}
	if info.TTL == 0 {
		info.TTL = DefaultServerTTL
	}
	return s.exec(ctx, "register server "+info.ID, sqlRegister, info.ID, info.Address, info.Version, info.TTL.Microseconds())
}

// HeartbeatServer extends the registration of id for ttl from now (by the
// database's clock). An unknown id returns history.ErrNotFound: the
// registration was removed, and the server must register again.
func (s *Store) HeartbeatServer(ctx context.Context, id string, ttl time.Duration) error {
	if id == "" || ttl < time.Microsecond {
		return invalidf("server id %q, ttl %s", id, ttl)
	}
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.exit()
	tag, err := s.pool.Exec(ctx, sqlHeartbeat, id, ttl.Microseconds())
	if err != nil {
		return readError(ctx, "heartbeat of server "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: pgstore: server %q is not registered", history.ErrNotFound, id)
	}
	return nil
}

// Servers returns every registration, alive or not, in id order.
func (s *Store) Servers(ctx context.Context) ([]ServerInfo, error) {
	if err := s.enter(ctx); err != nil {
		return nil, err
	}
	defer s.gate.exit()
	rows, err := s.pool.Query(ctx, sqlServers)
	if err != nil {
		return nil, readError(ctx, "read servers", err)
	}
	var out []ServerInfo
	var si ServerInfo
	_, err = pgx.ForEachRow(rows, []any{&si.ID, &si.Address, &si.Version, &si.RegisteredAt, &si.LastHeartbeat, &si.Expires, &si.Alive},
		func() error {
			out = append(out, si)
			return nil
		})
	if err != nil {
		return nil, readError(ctx, "read servers", err)
	}
	return out, nil
}

// RemoveServer deletes the registration of id (none: nothing to do).
func (s *Store) RemoveServer(ctx context.Context, id string) error {
	if id == "" {
		return invalidf("empty server id")
	}
	return s.exec(ctx, "remove server "+id, "DELETE FROM servers WHERE server_id = $1", id)
}

// exec runs one statement as a call of the store.
func (s *Store) exec(ctx context.Context, what, sql string, args ...any) error {
	if err := s.enter(ctx); err != nil {
		return err
	}
	defer s.gate.exit()
	if _, err := s.pool.Exec(ctx, sql, args...); err != nil {
		return readError(ctx, what, err)
	}
	return nil
}
