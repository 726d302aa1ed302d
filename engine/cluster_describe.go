package engine

import (
	"context"

	"github.com/cairnflow/cairn/engine/api"
)

// DescribeCluster implements api.Service for an engine on its own: one
// server, no shards. (A server of a cluster answers through its
// cluster.Router.)
func (e *Engine) DescribeCluster(ctx context.Context, _ *api.DescribeClusterRequest) (*api.DescribeClusterResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	return &api.DescribeClusterResponse{Self: "this server", Now: e.now(), Servers: []api.ClusterServer{{ID: "this server", Alive: true}}}, nil
}
