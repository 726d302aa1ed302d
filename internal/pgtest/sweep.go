package pgtest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Schemas of tests whose process was killed (a test binary's timeout, a
// kill -9) are never dropped by their cleanup. Each schema is therefore
// marked, as its comment, with the host and the process that created it;
// the first URL call of a test binary drops the marked schemas of
// processes of this host that no longer run. Schemas of other hosts
// sharing the database are left alone.

// ownerPrefix starts the comment of every schema pgtest creates.
const ownerPrefix = "cairn pgtest"

// owner is the comment marking a schema as this process's.
func owner() string {
	return fmt.Sprintf("%s host=%s pid=%d", ownerPrefix, hostname(), os.Getpid())
}

// sweepSchemas drops the schemas left by dead test processes of this
// host. Failures are ignored: sweeping is hygiene, not a test.
func sweepSchemas(ctx context.Context, pool *pgxpool.Pool) {
	rows, err := pool.Query(ctx, `SELECT nspname, obj_description(oid, 'pg_namespace') FROM pg_namespace
WHERE obj_description(oid, 'pg_namespace') LIKE $1`, ownerPrefix+" %")
	if err != nil {
		return
	}
	var dead []string
	var name, comment string
	_, err = pgx.ForEachRow(rows, []any{&name, &comment}, func() error {
		if host, pid, ok := parseOwner(comment); ok && host == hostname() && !alive(pid) {
			dead = append(dead, name)
		}
		return nil
	})
	if err != nil {
		return
	}
	for _, name := range dead {
		_, _ = pool.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{name}.Sanitize()+" CASCADE")
	}
}

func hostname() string {
	h, _ := os.Hostname()
	return strings.ReplaceAll(h, "'", "")
}

// parseOwner reads a comment written by owner.
func parseOwner(comment string) (host string, pid int, ok bool) {
	rest, found := strings.CutPrefix(comment, ownerPrefix+" host=")
	if !found {
		return "", 0, false
	}
	host, p, found := strings.Cut(rest, " pid=")
	if !found {
		return "", 0, false
	}
	pid, err := strconv.Atoi(p)
	return host, pid, err == nil && pid > 0
}
