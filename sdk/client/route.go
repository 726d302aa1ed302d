package client

import (
	"context"
	"strings"
	"sync/atomic"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// A client given several servers of a cluster sends a call about a run to
// the server that serves the run's shard, as far as it knows: any server
// would forward it there, but the hop costs both servers a call. It learns
// who serves what from DescribeCluster, read in the background at most
// every routeRefresh (and not at all with one address). The map is only a
// preference: a server that moved on forwards the call, and one that cannot
// be reached is skipped as before.

// routeRefresh is how old the shard map may grow before it is read again.
const routeRefresh = 30 * time.Second

// shardMap is which of the client's endpoints serves each shard.
type shardMap struct {
	read  time.Time
	ep    []int8 // by shard: endpoint index, -1 when none of ours
	valid bool   // clustered, and the map names at least one of our endpoints
}

// router is a RemoteService's shard map.
type router struct {
	m       atomic.Pointer[shardMap]
	reading atomic.Bool
}

// endpointFor returns the endpoint to try first for a call about
// workflowID, or -1 for the usual one. It starts a read of the map when
// the map is missing or old.
func (r *RemoteService) endpointFor(workflowID string) int {
	if len(r.eps) < 2 || workflowID == "" {
		return -1
	}
	m := r.route.m.Load()
	if m == nil || time.Since(m.read) > routeRefresh {
		r.readRoutes()
	}
	if m == nil || !m.valid {
		return -1
	}
	return int(m.ep[history.ShardOf(workflowID, len(m.ep))])
}

// readRoutes reads the shard map in the background, one read at a time.
func (r *RemoteService) readRoutes() {
	if !r.route.reading.CompareAndSwap(false, true) {
		return
	}
	go func() {
		defer r.route.reading.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		r.loadRoutes(ctx)
	}()
}

// loadRoutes reads the shard map now. A server that does not answer, or
// is no cluster's, leaves the client without one until the next read.
func (r *RemoteService) loadRoutes(ctx context.Context) {
	m := &shardMap{read: time.Now()}
	d, err := r.DescribeCluster(ctx, &api.DescribeClusterRequest{})
	if err == nil {
		m.ep, m.valid = r.shardEndpoints(d)
	}
	r.route.m.Store(m)
}

// shardEndpoints maps each shard to the endpoint of its live owner.
func (r *RemoteService) shardEndpoints(d *api.DescribeClusterResponse) ([]int8, bool) {
	if !d.Clustered || d.Shards <= 0 || len(r.eps) > 127 {
		return nil, false
	}
	byServer := map[string]int8{}
	for _, s := range d.Servers {
		for i, ep := range r.eps {
			if s.Alive && sameAddress(ep.base, s.Address) {
				byServer[s.ID] = int8(i)
			}
		}
	}
	eps := make([]int8, d.Shards)
	found := false
	for i := range eps {
		eps[i] = -1
	}
	for _, o := range d.ShardOwners {
		if k, ok := byServer[o.Owner]; ok && o.Held && o.Shard >= 0 && o.Shard < len(eps) {
			eps[o.Shard], found = k, true
		}
	}
	return eps, found
}

// sameAddress reports whether an endpoint's base URL names a server's
// advertised address (host:port, or a URL).
func sameAddress(base, advertised string) bool {
	strip := func(s string) string {
		s = strings.TrimPrefix(strings.TrimPrefix(s, "http://"), "https://")
		return strings.TrimRight(s, "/")
	}
	return advertised != "" && strip(base) == strip(advertised)
}
