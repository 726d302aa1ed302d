package client

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// clusterMember is a fake server of a two-server cluster that serves
// shard `serves` of 2: it answers DescribeCluster with the map and a
// start with its own name as the run id, and counts the starts.
type clusterMember struct {
	name   string
	srv    *httptest.Server
	starts atomic.Int32
	desc   func() *api.DescribeClusterResponse
}

func newMember(t *testing.T, name string) *clusterMember {
	m := &clusterMember{name: name}
	m.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var resp any
		switch strings.TrimPrefix(r.URL.Path, api.HTTPPrefix) {
		case "DescribeCluster":
			resp = m.desc()
		case "StartWorkflow":
			m.starts.Add(1)
			resp = &api.StartWorkflowResponse{RunID: m.name}
		default:
			http.NotFound(w, r) // no sessions: plain requests
			return
		}
		w.Header().Set("Content-Type", api.ContentMsgpack)
		b, _ := api.MarshalMsgpack(resp)
		_, _ = w.Write(b)
	}))
	t.Cleanup(m.srv.Close)
	return m
}

// idInShard returns a workflow id in shard sh of n.
func idInShard(sh, n int) string {
	for i := 0; ; i++ {
		id := "wf-" + string(rune('a'+i%26)) + strings.Repeat("x", i/26)
		if history.ShardOf(id, n) == sh {
			return id
		}
	}
}

// TestCallsGoToTheShardsServer: a client given both servers of a cluster
// sends a start to the server that serves the run's shard once it has read
// the cluster's map — not to its first address, which would forward it —
// and to its first address before it knows, or when the map names no
// server it was given.
func TestCallsGoToTheShardsServer(t *testing.T) {
	a, b := newMember(t, "a"), newMember(t, "b")
	var bAddr atomic.Value
	bAddr.Store(b.srv.Listener.Addr().String())
	cluster := func() *api.DescribeClusterResponse {
		return &api.DescribeClusterResponse{Clustered: true, Shards: 2,
			Servers:     []api.ClusterServer{{ID: "a", Address: a.srv.Listener.Addr().String(), Alive: true}, {ID: "b", Address: bAddr.Load().(string), Alive: true}},
			ShardOwners: []api.ShardOwner{{Shard: 0, Owner: "a", Held: true}, {Shard: 1, Owner: "b", Held: true}}}
	}
	a.desc, b.desc = cluster, cluster
	r, err := NewRemoteService(a.srv.URL+","+b.srv.URL, DialOptions{PlainHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	r.route.reading.Store(true) // no reads in the background: the test reads the map
	ctx := context.Background()
	start := func(id string) string {
		t.Helper()
		resp, err := r.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id})
		if err != nil {
			t.Fatal(err)
		}
		return resp.RunID
	}
	onA, onB := idInShard(0, 2), idInShard(1, 2)
	if got := start(onB); got != "a" {
		t.Fatalf("before the map is read the start went to %s, want the first address", got)
	}
	r.loadRoutes(ctx)
	if got := start(onB); got != "b" {
		t.Fatalf("a run of shard 1 (served by b) was started on %s", got)
	}
	if got := start(onA); got != "a" {
		t.Fatalf("a run of shard 0 (served by a) was started on %s", got)
	}
	// A map that names servers the client was not given (advertised
	// addresses it does not know): the usual address.
	bAddr.Store("10.0.0.9:7233")
	r.loadRoutes(ctx)
	if got := start(onB); got != "a" {
		t.Fatalf("with b at an address the client was not given, the start went to %s", got)
	}
}
