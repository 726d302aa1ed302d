package cluster

import (
	"context"

	"github.com/cairnflow/cairn/engine/api"
)

// Stats returns this node's counters.
func (n *Node) Stats() api.ClusterStats {
	return api.ClusterStats{Acquired: n.stats.acquired.Load(), Released: n.stats.released.Load(), Lost: n.stats.lost.Load(),
		FencedCommits: n.stats.fenced.Load(), Forwarded: n.stats.forwarded.Load(), HandedBack: n.stats.handedBack.Load(),
		RefusedPastLease: n.stats.pastLease.Load()}
}

// Describe reads the cluster from the database: the servers, every
// shard's lease, by the database's clock.
func (n *Node) Describe(ctx context.Context) (*api.DescribeClusterResponse, error) {
	infos, now, err := n.st.Leases(ctx)
	if err != nil {
		return nil, err
	}
	servers, err := n.st.Servers(ctx)
	if err != nil {
		return nil, err
	}
	resp := &api.DescribeClusterResponse{Clustered: true, Self: n.opts.ID, Shards: n.n, Now: now, Stats: n.Stats()}
	held := map[string]int{}
	for _, l := range infos {
		resp.ShardOwners = append(resp.ShardOwners, api.ShardOwner{Shard: l.Shard, Owner: l.Owner, Epoch: l.Epoch, Expires: l.Expires, Held: l.Held})
		if l.Held {
			held[l.Owner]++
		}
	}
	for _, s := range servers {
		resp.Servers = append(resp.Servers, api.ClusterServer{ID: s.ID, Address: s.Address, Version: s.Version,
			RegisteredAt: s.RegisteredAt, LastHeartbeat: s.LastHeartbeat, Expires: s.Expires, Alive: s.Alive, Shards: held[s.ID]})
	}
	return resp, nil
}

// DescribeCluster implements api.Service.
func (r *Router) DescribeCluster(ctx context.Context, req *api.DescribeClusterRequest) (*api.DescribeClusterResponse, error) {
	resp, err := r.node.Describe(ctx)
	if err == nil && req.View == api.ViewServers {
		resp.ShardOwners = nil
	}
	return resp, err
}
