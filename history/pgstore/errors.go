package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/cairnflow/cairn/history"
)

// Errors of this package. Every other failure is reported with the
// history sentinels (history.ErrConflict, ErrFenced, ErrCorrupt, …),
// wrapped with what happened.
var (
	// ErrCommitUnknown: the connection failed after COMMIT was sent, so
	// the batch may or may not have been written. Nothing but reading the
	// data back can tell. It wraps no history sentinel, so the engine
	// treats it as an ambiguous commit (engine/resync.go) and reads its
	// runs back.
	ErrCommitUnknown = errors.New("pgstore: commit outcome unknown")
	// ErrUnavailable: the database could not be reached or failed before
	// the batch's COMMIT was sent: nothing of it was written.
	ErrUnavailable = errors.New("pgstore: database unavailable")
	// ErrSchemaTooNew: the database's schema was migrated by a newer
	// build than this one; Open refuses to touch it.
	ErrSchemaTooNew = errors.New("pgstore: database schema is newer than this build")
	// ErrUnsafeDurability: the database would acknowledge commits that a
	// crash can lose (synchronous_commit or fsync off); Open refuses it
	// unless Options.AllowUnsafeDurability.
	ErrUnsafeDurability = errors.New("pgstore: database settings make commits not durable")
	// ErrShardCount: Options.Shards asks for another shard count than the
	// one the database was created with (it never changes).
	ErrShardCount = errors.New("pgstore: shard count differs from the database's")
	// ErrLeaseHeld: another owner holds the shard's lease and it has not
	// expired. The error is a *LeaseHeldError naming the holder.
	ErrLeaseHeld = errors.New("pgstore: shard lease held by another owner")
	// ErrInvalidOptions: Options cannot work (see Options.Validate).
	ErrInvalidOptions = errors.New("pgstore: invalid options")
)

// LeaseHeldError is AcquireShard's refusal: the lease of Shard is held by
// Owner (epoch Epoch) until Expires, by the database's clock. It matches
// ErrLeaseHeld.
type LeaseHeldError struct {
	Shard   int
	Owner   string
	Epoch   int64
	Expires time.Time
}

// Error names the shard, its holder and the expiry.
func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("%v: shard %d is held by %q (epoch %d) until %s", ErrLeaseHeld, e.Shard, e.Owner, e.Epoch,
		e.Expires.UTC().Format(time.RFC3339Nano))
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", history.ErrInvalid, fmt.Sprintf(format, args...))
}

// SQLSTATE codes (and classes) this package acts on.
const (
	codeUniqueViolation   = "23505"
	codeSerialization     = "40001"
	codeDeadlock          = "40P01"
	codeDiskFull          = "53100"
	codeUndefinedObject   = "42704"
	codeDuplicateSchema   = "42P06"
	codeDuplicateTable    = "42P07"
	codeDuplicateObject   = "42710"
	classDataException    = "22"
	classIntegrity        = "23"
	classProgramLimit     = "54"
	classInsufficientRsrc = "53"
)

// pgCode returns the SQLSTATE of a server error, or "".
func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// fatal reports whether a server error ended the session (severity FATAL
// or PANIC) rather than only the statement.
func fatal(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	sev := pe.SeverityUnlocalized
	if sev == "" {
		sev = pe.Severity
	}
	return sev == "FATAL" || sev == "PANIC"
}

// retryable reports whether a failed transaction may simply be run again:
// the database gave up on it (serialization failure, deadlock) and wrote
// nothing.
func retryable(err error) bool {
	c := pgCode(err)
	return c == codeSerialization || c == codeDeadlock
}

// attributable reports whether a failure is due to the data of some batch
// of a group (so that committing the batches one by one finds it) rather
// than to the database or the connection.
func attributable(err error) bool {
	c := pgCode(err)
	if len(c) != 5 {
		return false
	}
	switch c[:2] {
	case classDataException, classIntegrity, classProgramLimit:
		return true
	}
	return false
}

// commitError maps the failure of a group's transaction before its COMMIT
// was sent: nothing was written.
func commitError(err error) error {
	switch c := pgCode(err); {
	case c == codeUniqueViolation:
		return fmt.Errorf("%w: pgstore: %w", history.ErrConflict, err)
	case c == codeDiskFull:
		return fmt.Errorf("%w: pgstore: %w", history.ErrNoSpace, err)
	case len(c) == 5 && c[:2] == classProgramLimit:
		return fmt.Errorf("%w: pgstore: %w", history.ErrTooLarge, err)
	case retryable(err):
		return fmt.Errorf("%w: pgstore: the database gave up on the transaction again and again: %w", history.ErrConflict, err)
	case c != "":
		return fmt.Errorf("pgstore: commit refused, nothing written: %w", err)
	}
	return fmt.Errorf("%w: nothing written: %w", ErrUnavailable, err)
}

// readError maps a failed read. A read that ended because its context did
// returns the context's error.
func readError(ctx context.Context, what string, err error) error {
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, history.ErrCorrupt), errors.Is(err, history.ErrNotFound), errors.Is(err, history.ErrClosed),
		errors.Is(err, history.ErrInvalid):
		return err
	case pgCode(err) != "":
		return fmt.Errorf("pgstore: %s: %w", what, err)
	}
	return fmt.Errorf("%w: %s: %w", ErrUnavailable, what, err)
}
