//go:build unix

package cluster_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairnflow/cairn/internal/testkit"
)

// A campaign that restarts PostgreSQL runs its own instance on a spare
// loopback port, never the machine's shared server (DESIGN.md §11). initdb
// refuses to run as root, so the instance belongs to the postgres user:
// its directory is made for that user, and initdb and pg_ctl run through
// runuser.

// pgInstance is a PostgreSQL server this test started.
type pgInstance struct {
	t    testing.TB
	bin  string // the directory of initdb, pg_ctl
	dir  string // owned by postgres: data/, the socket, the log
	port int
	// URL is the database to give the stores.
	URL string
}

// ownPostgresUnavailable says why this machine cannot run a private
// PostgreSQL instance ("" when it can).
func ownPostgresUnavailable() string {
	if os.Geteuid() != 0 {
		return "not root: cannot run initdb as the postgres user"
	}
	if _, err := user.Lookup("postgres"); err != nil {
		return "no postgres user"
	}
	if _, err := exec.LookPath("runuser"); err != nil {
		return "no runuser"
	}
	if pgBinDir() == "" {
		return "no initdb under /usr/lib/postgresql/*/bin (apt-get install postgresql)"
	}
	return ""
}

// pgBinDir is the newest /usr/lib/postgresql/N/bin holding initdb, or "".
func pgBinDir() string {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	slices.SortFunc(dirs, func(a, b string) int { return pgMajor(b) - pgMajor(a) })
	if len(dirs) == 0 {
		return ""
	}
	return filepath.Dir(dirs[0])
}

func pgMajor(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// startPostgres initialises and starts a private PostgreSQL server, stopped
// (immediately) and removed when the test ends.
func startPostgres(t testing.TB) *pgInstance {
	t.Helper()
	pu, err := user.Lookup("postgres")
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(pu.Uid)
	gid, _ := strconv.Atoi(pu.Gid)
	dir, err := os.MkdirTemp("", "cairn-cluster-pg-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	p := &pgInstance{t: t, bin: pgBinDir(), dir: dir}
	_, port, _ := net.SplitHostPort(testkit.FreeAddr(t))
	p.port, _ = strconv.Atoi(port)
	p.URL = fmt.Sprintf("postgres://root@127.0.0.1:%d/postgres?sslmode=disable", p.port)
	t.Cleanup(func() {
		_ = p.ctl("stop", "-m", "immediate")
		_ = os.RemoveAll(dir)
	})
	// --no-sync: initdb's own files need not reach the disk (the machine
	// is not crashed, only the server); the server itself syncs as usual.
	if out, err := p.run(filepath.Join(p.bin, "initdb"), "-D", p.data(), "-U", "root", "-A", "trust", "--no-sync", "-E", "UTF8"); err != nil {
		t.Fatalf("initdb: %v\n%s", err, out)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

func (p *pgInstance) data() string { return filepath.Join(p.dir, "data") }

// run runs a PostgreSQL program as the postgres user.
func (p *pgInstance) run(prog string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", prog}, args...)...)
	cmd.Dir = p.dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ctl runs pg_ctl on the instance.
func (p *pgInstance) ctl(args ...string) error {
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=200", p.port, p.dir)
	all := append([]string{"-D", p.data(), "-o", opts, "-l", filepath.Join(p.dir, "log"), "-w", "-t", "60"}, args...)
	if out, err := p.run(filepath.Join(p.bin, "pg_ctl"), all...); err != nil {
		return fmt.Errorf("pg_ctl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Start starts the server and waits until it accepts connections.
func (p *pgInstance) Start() error {
	if err := p.ctl("start"); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for {
		conn, err := pgx.Connect(ctx, p.URL)
		if err == nil {
			return conn.Close(ctx)
		}
		if ctx.Err() != nil {
			return fmt.Errorf("own postgres on port %d does not accept connections: %w\n%s", p.port, err, p.logTail())
		}
		if !pause(ctx, 50*time.Millisecond) {
			return ctx.Err()
		}
	}
}

// Crash stops the server at once, as a crash would (pg_ctl stop -m
// immediate: no checkpoint, the next start recovers from the WAL).
func (p *pgInstance) Crash() error { return p.ctl("stop", "-m", "immediate") }

func (p *pgInstance) logTail() string {
	b, _ := os.ReadFile(filepath.Join(p.dir, "log"))
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// pause waits for d unless ctx ends first (false then): the pace of a
// poll for an observable condition, never a wait for time to pass.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
