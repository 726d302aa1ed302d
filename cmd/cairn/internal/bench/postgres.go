package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/cluster"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/sdk/client"
)

// pgServer is the bench's server on Postgres: a cluster of one, as
// `cairn server --store` runs it (its engine fences every commit with the
// leases of all the shards, and the API serves the cluster's router).
type pgServer struct {
	st          *pgstore.Store
	eng         *engine.Engine
	node        *cluster.Node
	addr        string
	extraAddrs  []string // the other servers' API addresses
	url, schema string
	extra       []*exec.Cmd // more servers (startServers)
	stop        func()
}

// servePostgres opens a fresh schema in the database at url, a cluster
// node holding every shard, the engine and its API on a loopback port.
// stop closes everything and drops the schema.
func servePostgres(ctx context.Context, url string) (*pgServer, error) {
	var b [4]byte
	_, _ = rand.Read(b[:])
	schema := "cairn_bench_" + hex.EncodeToString(b[:])
	s := &pgServer{url: url, schema: schema}
	var undo []func()
	undo = append(undo, func() {
		for _, c := range s.extra {
			stopWorker(c)
		}
	})
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
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	undo = append(undo, func() { _ = ln.Close() })
	dial := func(address string) (api.Service, error) {
		return client.NewRemoteService(address, client.DialOptions{Header: http.Header{cluster.ForwardedHeader: {"1"}}})
	}
	node, err := cluster.New(cluster.Options{Store: st, Address: ln.Addr().String(), Dial: dial})
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
	s.node = node
	router := cluster.NewRouter(node, s.eng)
	s.eng.SetRemote(router)
	srv := &http.Server{Handler: httpapi.NewHandler(router, httpapi.Options{RequestContext: cluster.RequestContext}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	s.addr = "http://" + ln.Addr().String()
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

// pgFigures are what a Postgres run adds to the result: counters summed
// over every server (this one's, and the others' from their /metrics).
type pgFigures struct {
	counters map[string]float64
	cpu      time.Duration
}

// benchCounters are the counters summed over the servers.
var benchCounters = []string{"cairn_postgres_commits_total", "cairn_postgres_statements_total",
	"cairn_cluster_forwarded_total", "cairn_cluster_handed_back_total"}

func (s *pgServer) mark(ctx context.Context) (pgFigures, error) {
	c, err := s.counters(ctx)
	return pgFigures{counters: c, cpu: machineCPU()}, err
}

// counters sums the counters of every server.
func (s *pgServer) counters(ctx context.Context) (map[string]float64, error) {
	ps, ns := s.st.Stats(), s.node.Stats()
	sum := map[string]float64{benchCounters[0]: float64(ps.Commits), benchCounters[1]: float64(ps.Statements),
		benchCounters[2]: float64(ns.Forwarded), benchCounters[3]: float64(ns.HandedBack)}
	for _, addr := range s.extraAddrs {
		if err := scrape(ctx, addr, sum); err != nil {
			return nil, err
		}
	}
	return sum, nil
}

// scrape adds a server's benchCounters (from its /metrics) to sum.
func scrape(ctx context.Context, addr string, sum map[string]float64) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+strings.TrimPrefix(addr, "http://")+"/metrics", nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: metrics of %s: %w", addr, err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !slices.Contains(benchCounters, name) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			sum[name] += v
		}
	}
	return sc.Err()
}

// report fills the result's Postgres figures since mark.
func (s *pgServer) report(ctx context.Context, res *Result, m pgFigures, n int) error {
	res.CPUMachine = (machineCPU() - m.cpu) / time.Duration(n)
	after, err := s.counters(ctx)
	if err != nil {
		return err
	}
	per := func(name string) float64 { return (after[name] - m.counters[name]) / float64(n) }
	res.PostgresCommits, res.PostgresStatements = per(benchCounters[0]), per(benchCounters[1])
	res.Forwarded, res.HandedBack = per(benchCounters[2]), per(benchCounters[3])
	return nil
}

// describe says what the store is, for the narration.
func (s *pgServer) describe(servers int) string {
	if servers > 1 {
		return fmt.Sprintf("Postgres (%d shards over %d servers)", s.st.Shards(), servers)
	}
	return fmt.Sprintf("Postgres (%d shards, one server holding them all)", s.st.Shards())
}

// startServers starts n more `cairn server` processes on the bench's
// schema and returns their addresses once each is ready (stopped with
// the bench).
func (s *pgServer) startServers(ctx context.Context, command func(args ...string) *exec.Cmd, n int) ([]string, error) {
	if command == nil {
		return nil, fmt.Errorf("bench: more servers need Options.ServerCommand")
	}
	var addrs []string
	for range n {
		cmd := command("--store", s.url, "--schema", s.schema, "--listen", "127.0.0.1:0", "--ui-listen", "off", "--log-level", "info")
		addr, err := startReady(ctx, cmd)
		if err != nil {
			return nil, err
		}
		s.extra = append(s.extra, cmd)
		s.extraAddrs = append(s.extraAddrs, addr)
		addrs = append(addrs, addr)
	}
	return addrs, s.settled(ctx, n+1)
}

// settled waits until the shards are spread over the servers (each holds
// its share, none is without an owner), so that the figures are not those
// of shards moving.
func (s *pgServer) settled(ctx context.Context, servers int) error {
	share := (s.st.Shards() + servers - 1) / servers
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		infos, _, err := s.st.Leases(ctx)
		if err != nil {
			return err
		}
		held := map[string]int{}
		free := 0
		for _, l := range infos {
			if l.Held {
				held[l.Owner]++
			} else {
				free++
			}
		}
		balanced := free == 0 && len(held) == servers
		for _, n := range held {
			balanced = balanced && n <= share
		}
		if balanced {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	return fmt.Errorf("bench: the shards did not settle over %d servers within two minutes", servers)
}

// startReady starts a server and waits for its ready line (JSON on
// stderr), returning the address it listens on.
func startReady(ctx context.Context, cmd *exec.Cmd) (string, error) {
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(stderr)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line struct{ Message, Listen string }
		if json.Unmarshal(sc.Bytes(), &line) == nil && line.Message == "cairn server ready" {
			go func() { _, _ = io.Copy(io.Discard, stderr) }()
			return line.Listen, nil
		}
		if ctx.Err() != nil {
			break
		}
	}
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	return "", fmt.Errorf("bench: a server process ended before it was ready")
}
