package ui

import (
	"cmp"
	"net/http"
	"slices"
	"time"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
	"github.com/cairnflow/cairn/engine/api"
)

// clusterView is the Cluster page: DescribeCluster's answer — the servers
// sharing the store, the answering server's counters — with the shards
// grouped by who serves them, as ranges, in place of every shard's lease,
// and every age by the database's clock (Now), never the browser's or a
// server's.
type clusterView struct {
	// Clustered is false for a server alone on the embedded store: the
	// page then says so, and nothing else.
	Clustered bool
	// Self is the answering server's id.
	Self string
	// Shards is the cluster's shard count.
	Shards int
	// Now is the database's clock when the leases were read.
	Now     time.Time
	Servers []clusterServer `view:"keep"`
	// Owners are the shards by lease: those of each server holding live
	// leases, then those without a live owner.
	Owners []shardGroup `view:"keep"`
	// Ownerless counts the shards no live lease covers: a takeover is
	// under way (or the cluster is starting).
	Ownerless int
	// Stats are the answering server's counters since it started.
	Stats api.ClusterStats
}

// clusterServer is one server sharing the store.
type clusterServer struct {
	api.ClusterServer
	// HeartbeatAge is how long before Now its last heartbeat was (0 for
	// one written after Now: the servers are read just after the leases).
	HeartbeatAge time.Duration
}

// shardGroup is shards under the same lease holder, or without one.
type shardGroup struct {
	// Owner is the server holding their live leases; for shards without
	// a live owner, the server whose leases ran out ("" when none ever
	// held them).
	Owner string
	// Held: Owner's leases on them are live.
	Held bool
	// Count is how many shards; Ranges which ("0-3,7,9-12").
	Count  int
	Ranges string
	// OwnerlessFor is, for shards whose lease ran out, how long the first
	// of them has been without an owner, by the database's clock.
	OwnerlessFor time.Duration
}

// apiCluster answers the Cluster page (`cairn cluster describe`).
func (h *Handler) apiCluster(r *http.Request) (any, error) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	d, err := h.svc.DescribeCluster(ctx, &api.DescribeClusterRequest{})
	if err != nil {
		return nil, err
	}
	return newClusterView(d), nil
}

// newClusterView groups d's shards by their lease holder.
func newClusterView(d *api.DescribeClusterResponse) clusterView {
	v := clusterView{Clustered: d.Clustered, Self: d.Self, Shards: d.Shards, Now: d.Now, Stats: d.Stats,
		Servers: make([]clusterServer, 0, len(d.Servers)), Owners: []shardGroup{}}
	for _, s := range d.Servers {
		v.Servers = append(v.Servers, clusterServer{ClusterServer: s, HeartbeatAge: age(d.Now, s.LastHeartbeat)})
	}
	type key struct {
		owner string
		held  bool
	}
	shards := map[key][]int{}
	expired := map[key]time.Time{} // the earliest expiry of the shards without a live owner
	for _, o := range d.ShardOwners {
		k := key{o.Owner, o.Held}
		shards[k] = append(shards[k], o.Shard)
		if !o.Held {
			v.Ownerless++
			if e, ok := expired[k]; o.Owner != "" && (!ok || o.Expires.Before(e)) {
				expired[k] = o.Expires
			}
		}
	}
	for k, ns := range shards {
		g := shardGroup{Owner: k.owner, Held: k.held, Count: len(ns), Ranges: view.Ranges(ns)}
		if e, ok := expired[k]; ok {
			g.OwnerlessFor = age(d.Now, e)
		}
		v.Owners = append(v.Owners, g)
	}
	slices.SortFunc(v.Owners, func(a, b shardGroup) int {
		if a.Held != b.Held {
			if a.Held {
				return -1
			}
			return 1
		}
		return cmp.Compare(a.Owner, b.Owner)
	})
	return v
}

// age is how long before now t was, by the database's clock, to the
// millisecond (0 for a zero t, or one after now).
func age(now, t time.Time) time.Duration {
	if t.IsZero() || !t.Before(now) {
		return 0
	}
	return now.Sub(t).Round(time.Millisecond)
}
