package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/cluster"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history/pgstore"
)

// pgServer is the bench's server on Postgres: a cluster of one, as
// `cairn server --store` runs it (its engine fences every commit with the
// leases of all the shards, and the API serves the cluster's router).
type pgServer struct {
	st   *pgstore.Store
	eng  *engine.Engine
	addr string
	stop func()
}

// servePostgres opens a fresh schema in the database at url, a cluster
// node holding every shard, the engine and its API on a loopback port.
// stop closes everything and drops the schema.
func servePostgres(ctx context.Context, url string) (*pgServer, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "cairn_bench_" + hex.EncodeToString(b[:])
	s := &pgServer{}
	var undo []func()
	s.stop = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	fail := func(err error) (*pgServer, error) { s.stop(); return nil, err }
	undo = append(undo, func() { dropSchema(url, schema) })
	st, err := pgstore.Open(ctx, pgstore.Options{URL: url, Schema: schema})
	if err != nil {
		return fail(err)
	}
	s.st = st
	undo = append(undo, func() { _ = st.Close() })
	node, err := cluster.New(cluster.Options{Store: st})
	if err != nil {
		return fail(err)
	}
	if s.eng, err = engine.Open(engine.Options{Store: st, Shards: node}); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = s.eng.Close() })
	if err := node.Start(ctx, s.eng); err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = node.Close() })
	router := cluster.NewRouter(node, s.eng)
	s.eng.SetRemote(router)
	srv, addr, err := listen(httpapi.NewHandler(router, httpapi.Options{RequestContext: cluster.RequestContext}))
	if err != nil {
		return fail(err)
	}
	s.addr = addr
	undo = append(undo, func() { _ = srv.Close() })
	return s, nil
}

func dropSchema(url, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	_, _ = conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE")
}

// machineCPU is the CPU time the whole machine spent busy (every process:
// the server, the workers and Postgres), from /proc/stat (zero where it
// is missing).
func machineCPU() time.Duration {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal …
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	var busy int64
	for i, v := range f[1:9] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		busy += n
	}
	return time.Duration(busy) * time.Second / 100 // USER_HZ
}

// pgFigures are what a Postgres run adds to the result.
type pgFigures struct {
	before pgstore.Stats
	cpu    time.Duration
}

func (s *pgServer) mark() pgFigures { return pgFigures{before: s.st.Stats(), cpu: machineCPU()} }

// report fills the result's Postgres figures since mark.
func (s *pgServer) report(res *Result, m pgFigures, n int) {
	after := s.st.Stats()
	res.PostgresCommits = float64(after.Commits-m.before.Commits) / float64(n)
	res.PostgresStatements = float64(after.Statements-m.before.Statements) / float64(n)
	res.CPUMachine = (machineCPU() - m.cpu) / time.Duration(n)
}

// describe says what the store is, for the narration.
func (s *pgServer) describe() string {
	return fmt.Sprintf("Postgres (%d shards, one server holding them all)", s.st.Shards())
}

var _ api.Service = (*cluster.Router)(nil)
