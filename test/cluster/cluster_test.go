//go:build unix

// Package cluster_test runs a Cairn cluster the way people run one — several
// `cairn server --store postgres://…` processes sharing one PostgreSQL
// database, worker processes given every server's address, a payment vendor
// in a process of its own — and breaks it: servers SIGKILLed and restarted,
// the owner of shards frozen (SIGSTOP) past its lease and woken up
// (SIGCONT) after another took its shards over, workers killed and frozen,
// PostgreSQL itself crashed and restarted under load. Then it checks that
// an agent's retry never paid twice (docs/reliability.md, "Cluster").
//
//	go test ./test/cluster                                  # the campaign of the suite
//	CAIRN_CLUSTER_SOAK=long go test ./test/cluster -run TestClusterChaos -timeout 3h -v
//	CAIRN_CLUSTER_FAILOVER=1 go test ./test/cluster -run TestFailoverFigure -timeout 1h -v
package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk/client"
)

func TestMain(m *testing.M) { testkit.Main(m, pgtest.Done) }

// TestWorkerProcess is not a test: the tests run the test binary again with
// CLUSTER_CHILD set, and this function then becomes a vendor or a shop
// worker process until it is killed or its stdin closes.
func TestWorkerProcess(t *testing.T) {
	mode := os.Getenv(envMode)
	if mode == "" {
		t.Skip("a child process of the cluster tests")
	}
	var err error
	switch mode {
	case "vendor":
		err = runVendor()
	case "shop":
		err = runShopWorker()
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	fmt.Fprintln(os.Stderr, "child:", err)
	os.Exit(3)
}

// spawn starts the test binary as a child (TestWorkerProcess) with the
// given environment. It is killed when the test ends.
func spawn(t testing.TB, name string, env ...string) *testkit.Proc {
	t.Helper()
	return testkit.Start(t, testkit.Cmd{Path: os.Args[0], Args: []string{"-test.run=^TestWorkerProcess$", "-test.count=1"}, Env: env,
		Name: name, StdoutOnly: true})
}

// startVendor starts a vendor process and returns it with its URL.
func startVendor(t testing.TB, journal string, env ...string) (*testkit.Proc, string) {
	t.Helper()
	v := spawn(t, "vendor", append([]string{envMode + "=vendor", envVendorJournal + "=" + journal}, env...)...)
	return v, v.WaitFields(t.Context(), "listening")[1]
}

// clusterOptions say how to run a cluster's servers.
type clusterOptions struct {
	servers  int
	leaseTTL time.Duration // --lease-ttl; 0: the servers' default
	margin   time.Duration // --lease-drift-margin; 0: the default
	// ownPostgres runs the database in a PostgreSQL instance of the test's
	// own (needed to restart it); otherwise a schema of the shared test
	// database (internal/pgtest).
	ownPostgres bool
}

// clusterEnv is a cluster of `cairn server` processes on one database.
type clusterEnv struct {
	t      *testing.T
	o      clusterOptions
	pg     *pgInstance // nil on the shared database
	url    string
	schema string
	addrs  []string // each server's fixed API address: a restart comes back there

	mu      sync.Mutex
	servers []*testkit.Server
	lives   []int
	direct  []api.Service // a client of each server alone
	c       client.Client // a client given every address
}

// newCluster starts o.servers servers and waits until each is ready.
func newCluster(t *testing.T, o clusterOptions) *clusterEnv {
	t.Helper()
	c := &clusterEnv{t: t, o: o, schema: "cairn"}
	if o.ownPostgres {
		c.pg = startPostgres(t)
		c.url = c.pg.URL
	} else {
		c.url, c.schema = pgtest.URL(t)
	}
	c.servers = make([]*testkit.Server, o.servers)
	c.lives = make([]int, o.servers)
	for i := range o.servers {
		c.addrs = append(c.addrs, testkit.FreeAddr(t))
		svc, err := client.NewRemoteService(c.addrs[i], client.DialOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.direct = append(c.direct, svc)
	}
	for i := range o.servers {
		c.startServer(i)
	}
	cl, err := client.Dial(c.addrList(0), client.Options{Identity: "cluster-driver"}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cl.Close() })
	c.c = cl
	return c
}

// addrList is every server's address, comma-separated, starting with
// server first (so that the workers do not all lean on one server).
func (c *clusterEnv) addrList(first int) string {
	var out []string
	for i := range c.addrs {
		out = append(out, c.addrs[(first+i)%len(c.addrs)])
	}
	return strings.Join(out, ",")
}

// serverArgs are the flags of every server of the cluster.
func (c *clusterEnv) serverArgs() []string {
	args := []string{"--store", c.url, "--schema", c.schema, "--log-level", "info"}
	if c.o.leaseTTL > 0 {
		args = append(args, "--lease-ttl", c.o.leaseTTL.String())
	}
	if c.o.margin > 0 {
		args = append(args, "--lease-drift-margin", c.o.margin.String())
	}
	return args
}

// startServer starts server i at its address and waits until it is ready.
// A server that exits first (the database is down: it cannot open the
// store) is started again, for up to two minutes.
func (c *clusterEnv) startServer(i int) {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		c.mu.Lock()
		c.lives[i]++
		name := fmt.Sprintf("s%d-%d", i+1, c.lives[i])
		c.mu.Unlock()
		s := testkit.LaunchServer(c.t, testkit.ServerOptions{Listen: c.addrs[i], Name: name, Args: c.serverArgs()})
		err := s.Ready(ctx)
		if err == nil {
			c.mu.Lock()
			c.servers[i] = s
			c.mu.Unlock()
			return
		}
		s.Kill()
		if !errors.Is(err, testkit.ErrExited) || !pause(ctx, 200*time.Millisecond) {
			c.t.Fatalf("server %s: %v; the end of its output:\n%s", name, err, s.Tail(4000))
		}
	}
}

// server returns server i's current process.
func (c *clusterEnv) server(i int) *testkit.Server {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.servers[i]
}

// describe asks server i alone to describe the cluster.
func (c *clusterEnv) describe(ctx context.Context, i int) (*api.DescribeClusterResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.direct[i].DescribeCluster(ctx, &api.DescribeClusterRequest{})
}

// describeAny asks the servers in turn, skipping those in skip, until
// one answers.
func (c *clusterEnv) describeAny(ctx context.Context, skip ...int) (*api.DescribeClusterResponse, error) {
	var err error
	for i := range c.addrs {
		if contains(skip, i) {
			continue
		}
		var d *api.DescribeClusterResponse
		if d, err = c.describe(ctx, i); err == nil {
			return d, nil
		}
	}
	return nil, err
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// heldBy counts the live leases of each server id.
func heldBy(d *api.DescribeClusterResponse) map[string]int {
	out := map[string]int{}
	for _, o := range d.ShardOwners {
		if o.Held {
			out[o.Owner]++
		}
	}
	return out
}

// served reads server i's cairn_cluster_shards_served metric: the shards
// its node believes it serves.
func (c *clusterEnv) served(ctx context.Context, i int) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+c.addrs[i]+"/metrics", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "cairn_cluster_shards_served "); ok {
			n, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return int(n), err
		}
	}
	return 0, fmt.Errorf("server %d: no cairn_cluster_shards_served in its metrics", i)
}

// settledOwnership waits until every shard has a live lease, each
// server's node serves exactly the shards the database says it holds,
// and no shard is served twice. It returns the last discrepancy when the
// deadline passes first.
func (c *clusterEnv) settledOwnership(ctx context.Context, d time.Duration, skip ...int) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var last error
	for {
		if last = c.ownershipOnce(ctx, skip); last == nil {
			return nil
		}
		if !pause(ctx, 100*time.Millisecond) {
			return fmt.Errorf("ownership did not settle within %v: %w", d, last)
		}
	}
}

func (c *clusterEnv) ownershipOnce(ctx context.Context, skip []int) error {
	d, err := c.describeAny(ctx, skip...)
	if err != nil {
		return err
	}
	held := heldBy(d)
	total := 0
	for _, n := range held {
		total += n
	}
	if total != d.Shards {
		return fmt.Errorf("%d of %d shards have a live lease", total, d.Shards)
	}
	sum := 0
	for i := range c.addrs {
		if contains(skip, i) {
			continue
		}
		self, err := c.describe(ctx, i)
		if err != nil {
			return err
		}
		n, err := c.served(ctx, i)
		if err != nil {
			return err
		}
		if n != held[self.Self] {
			return fmt.Errorf("server %d (%s) serves %d shards, the database says it holds %d", i+1, self.Self, n, held[self.Self])
		}
		sum += n
	}
	if sum > d.Shards {
		return fmt.Errorf("the servers serve %d shards between them, of %d: some twice", sum, d.Shards)
	}
	return nil
}
