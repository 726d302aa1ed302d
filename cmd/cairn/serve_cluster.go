package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/cluster"
	"github.com/cairnflow/cairn/history/pgstore"
	"github.com/cairnflow/cairn/history/storecopy"
	"github.com/cairnflow/cairn/sdk/client"
)

// clusterFlags place a server in the cluster of its Postgres store.
type clusterFlags struct {
	advertise, serverID string
	leaseTTL            time.Duration
	shards              int
}

func (f *clusterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.advertise, "advertise", "", "host:port the other servers of the cluster reach this server's API at (default: the --listen address, when it names a host)")
	cmd.Flags().StringVar(&f.serverID, "server-id", "", "this server's name in the cluster (default: host, pid and random bits)")
	cmd.Flags().DurationVar(&f.leaseTTL, "lease-ttl", cluster.DefaultLeaseTTL, "shard lease: how long a dead server's runs wait before another server takes them over")
	cmd.Flags().IntVar(&f.shards, "shards", pgstore.DefaultShards, "shard count of a new database (fixed once it is created)")
}

// postgresURL is the Postgres store --store (or CAIRN_STORE) names, or ""
// for the embedded store (--data, or --store DIR).
func (s *Server) postgresURL() string {
	if spec := s.f.spec(); isPostgresURL(spec) {
		return spec
	}
	return ""
}

// openPostgresStore opens the Postgres store of --store.
func (s *Server) openPostgresStore() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st, err := openPostgresShards(ctx, s.postgresURL(), s.f.schema, s.f.shards)
	if err != nil {
		return fmt.Errorf("--store %s: %w", redactURL(s.postgresURL()), err)
	}
	s.pg = st
	// A copy from a data directory (cairn migrate) that did not finish holds
	// part of the runs and of the effects ledger: serving it could pay twice.
	if cp, err := storecopy.ReadState(ctx, st); err != nil {
		return err
	} else if cp != nil && !cp.Verified() {
		return fmt.Errorf("%w: --store %s holds a copy of %s that did not finish (cairn migrate, started %s): run cairn migrate again to finish it",
			api.ErrInvalidArgument, redactURL(s.postgresURL()), cp.Source, cp.Started.Format(time.RFC3339))
	}
	return nil
}

// newNode makes this server's membership of the cluster on the store.
func (s *Server) newNode() (*cluster.Node, error) {
	peerToken := s.token
	dial := func(address string) (api.Service, error) {
		return client.NewRemoteService(address, client.DialOptions{Token: peerToken, Header: http.Header{cluster.ForwardedHeader: {"1"}}})
	}
	return cluster.New(cluster.Options{Store: s.pg, ID: s.f.serverID, LeaseTTL: s.f.leaseTTL, Dial: dial, Logger: &s.log, Version: version})
}

// joinCluster starts the node once the API listens (the others reach this
// server at its address): it takes its share of the shards, and the API
// and the UI serve the cluster's router.
func (s *Server) joinCluster() error {
	if s.node == nil {
		return nil
	}
	addr, err := advertised(s.f.advertise, s.ln.Addr().String())
	if err != nil {
		return err
	}
	if err := s.node.SetAddress(addr); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := s.node.Start(ctx, s.eng); err != nil {
		return err
	}
	router := cluster.NewRouter(s.node, s.eng)
	s.eng.SetRemote(router) // children, parents and signals across shards
	s.svc = router
	return nil
}

// advertised is where the other servers reach this one: --advertise, or
// the address it listens on when that names a host.
func advertised(flag, listening string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	host, _, err := net.SplitHostPort(listening)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return "", usagef("--listen %s names no host the other servers can reach: give --advertise host:port", listening)
	}
	return listening, nil
}

// clusterCollector exposes a node's counters and shards, and its store's
// committer, as metrics.
type clusterCollector struct {
	node *cluster.Node
	st   *pgstore.Store
	held *prometheus.Desc
	ctr  map[string]*prometheus.Desc
}

// clusterCounters and postgresCounters name the counters
// (cairn_cluster_NAME_total, cairn_postgres_NAME_total).
var (
	clusterCounters  = []string{"acquired", "released", "lost", "fenced_commits", "refused_past_lease", "forwarded", "handed_back"}
	postgresCounters = []string{"commits", "batches", "statements", "conflicts", "fenced"}
)

func newClusterCollector(n *cluster.Node, st *pgstore.Store) prometheus.Collector {
	c := &clusterCollector{node: n, st: st, held: prometheus.NewDesc("cairn_cluster_shards_served", "Shards this server serves.", nil, nil),
		ctr: map[string]*prometheus.Desc{}}
	for _, name := range clusterCounters {
		c.ctr[name] = prometheus.NewDesc("cairn_cluster_"+name+"_total", "Cluster: "+strings.ReplaceAll(name, "_", " ")+" since the server started.", nil, nil)
	}
	for _, name := range postgresCounters {
		c.ctr["pg_"+name] = prometheus.NewDesc("cairn_postgres_"+name+"_total", "Postgres store's committer: "+name+" since the server started (pgstore.Stats).", nil, nil)
	}
	return c
}

func (c *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.held
	for _, d := range c.ctr {
		ch <- d
	}
}

func (c *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(c.held, prometheus.GaugeValue, float64(len(c.node.Held())))
	st := c.node.Stats()
	ps := c.st.Stats()
	for name, v := range map[string]int64{"acquired": st.Acquired, "released": st.Released, "lost": st.Lost,
		"fenced_commits": st.FencedCommits, "refused_past_lease": st.RefusedPastLease, "forwarded": st.Forwarded, "handed_back": st.HandedBack,
		"pg_commits": ps.Commits, "pg_batches": ps.Batches, "pg_statements": ps.Statements, "pg_conflicts": ps.Conflicts, "pg_fenced": ps.Fenced} {
		ch <- prometheus.MustNewConstMetric(c.ctr[name], prometheus.CounterValue, float64(v))
	}
}
