package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
)

// describing is an api.Service whose DescribeCluster answers d, or err.
type describing struct {
	api.Service
	d   *api.DescribeClusterResponse
	err error
}

func (s *describing) DescribeCluster(context.Context, *api.DescribeClusterRequest) (*api.DescribeClusterResponse, error) {
	return s.d, s.err
}

// clusterJSON is /api/cluster as the page reads it.
type clusterJSON struct {
	Clustered bool   `json:"clustered"`
	Self      string `json:"self"`
	Shards    int    `json:"shards"`
	Now       string `json:"now"`
	Servers   []struct {
		ID            string `json:"id"`
		Address       string `json:"address"`
		Version       string `json:"version"`
		Alive         bool   `json:"alive"`
		Shards        int    `json:"shards"`
		LastHeartbeat string `json:"lastHeartbeat"`
		HeartbeatAge  string `json:"heartbeatAge"`
	} `json:"servers"`
	Owners    []groupJSON      `json:"owners"`
	Ownerless int              `json:"ownerless"`
	Stats     map[string]int64 `json:"stats"`
}

type groupJSON struct {
	Owner        string `json:"owner"`
	Held         bool   `json:"held"`
	Count        int    `json:"count"`
	Ranges       string `json:"ranges"`
	OwnerlessFor string `json:"ownerlessFor"`
}

func getCluster(t *testing.T, b *browser) (clusterJSON, string) {
	t.Helper()
	code, body, _ := b.do("GET", "/api/cluster", "", nil)
	var v clusterJSON
	if code != http.StatusOK || json.Unmarshal([]byte(body), &v) != nil {
		t.Fatalf("GET /api/cluster: %d %s", code, body)
	}
	return v, body
}

// A server alone on the embedded store says so: not clustered, itself the
// only server, no shards to group (the page then says it in one line).
func TestClusterAPIAlone(t *testing.T) {
	b := newBrowser(t, New(newEngine(t), Options{}))
	v, body := getCluster(t, b)
	if v.Clustered || len(v.Servers) != 1 || !v.Servers[0].Alive || v.Owners == nil || len(v.Owners) != 0 || v.Ownerless != 0 {
		t.Fatalf("a server on the embedded store: %s", body)
	}
	for _, key := range []string{`"clustered":false`, `"owners":[]`} {
		if !strings.Contains(body, key) {
			t.Errorf("the answer lacks %s: %s", key, body)
		}
	}
}

// The Cluster page's JSON: the servers with their heartbeats' ages and the
// shards grouped by owner as ranges — both by the database's clock, not
// the server's (the database's here is years ahead) —, the shards without
// a live owner counted and grouped by the server whose leases ran out, and
// the answering server's counters; every shard's lease is not sent again.
func TestClusterAPIGroupsTheShards(t *testing.T) {
	now := time.Now().Add(5 * 365 * 24 * time.Hour).Truncate(time.Second).UTC()
	d := &api.DescribeClusterResponse{Clustered: true, Self: "alpha", Shards: 16, Now: now,
		Servers: []api.ClusterServer{
			{ID: "alpha", Address: "10.0.0.5:7233", Version: "v1.2.0", LastHeartbeat: now.Add(-1500 * time.Millisecond), Alive: true, Shards: 6},
			{ID: "beta", Address: "10.0.0.6:7233", Version: "v1.2.0", LastHeartbeat: now.Add(3 * time.Millisecond), Alive: true, Shards: 3},
			{ID: `<img src=x onerror="alert(1)">`, Address: "10.0.0.7:7233", LastHeartbeat: now.Add(-12 * time.Second)},
		},
		Stats: api.ClusterStats{Acquired: 9, Released: 2, Lost: 1, FencedCommits: 4, RefusedPastLease: 5, Forwarded: 17, HandedBack: 3},
	}
	for sh := range 16 {
		o := api.ShardOwner{Shard: sh, Epoch: int64(sh + 1)}
		switch {
		case sh <= 5:
			o.Owner, o.Held, o.Expires = "alpha", true, now.Add(8*time.Second)
		case sh == 6 || sh == 7 || sh == 9:
			o.Owner, o.Held, o.Expires = "beta", true, now.Add(9*time.Second)
		case sh == 8 || sh == 10 || sh == 11:
			o.Owner, o.Expires = d.Servers[2].ID, now.Add(-time.Duration(sh-7)*time.Second)
		}
		d.ShardOwners = append(d.ShardOwners, o)
	}
	b := newBrowser(t, New(&describing{d: d}, Options{}))
	v, body := getCluster(t, b)
	if !v.Clustered || v.Self != "alpha" || v.Shards != 16 || v.Now != now.Format(time.RFC3339Nano) {
		t.Fatalf("the cluster: %s", body)
	}
	ages := map[string]string{}
	for _, s := range v.Servers {
		ages[s.ID] = s.HeartbeatAge
	}
	if want := map[string]string{"alpha": "1.5s", "beta": "", d.Servers[2].ID: "12s"}; !reflect.DeepEqual(ages, want) {
		t.Errorf("the heartbeats' ages by the database's clock: %v, want %v (none for one read after the leases)", ages, want)
	}
	if s := v.Servers[2]; s.Alive || s.Address != "10.0.0.7:7233" || s.Shards != 0 {
		t.Errorf("the gone server: %+v", s)
	}
	want := []groupJSON{
		{Owner: "alpha", Held: true, Count: 6, Ranges: "0-5"},
		{Owner: "beta", Held: true, Count: 3, Ranges: "6-7,9"},
		{Count: 4, Ranges: "12-15"}, // never owned
		{Owner: d.Servers[2].ID, Count: 3, Ranges: "8,10-11", OwnerlessFor: "4s"},
	}
	if !reflect.DeepEqual(v.Owners, want) || v.Ownerless != 7 {
		t.Errorf("the shards by owner:\n got %+v (%d without a live owner)\nwant %+v (7)", v.Owners, v.Ownerless, want)
	}
	if want := map[string]int64{"acquired": 9, "released": 2, "lost": 1, "fencedCommits": 4, "refusedPastLease": 5, "forwarded": 17, "handedBack": 3}; !reflect.DeepEqual(v.Stats, want) {
		t.Errorf("the counters: %v, want %v", v.Stats, want)
	}
	if strings.Contains(body, "shardOwners") || strings.Contains(body, "epoch") {
		t.Errorf("every shard's lease is sent: %s", body)
	}
	if d.ShardOwners[8].Shard != 8 || d.ShardOwners[15].Shard != 15 {
		t.Errorf("the answer was changed: %v", d.ShardOwners)
	}
}

// A DescribeCluster that fails is an error as every page's: its code, in
// JSON (the page keeps what it showed and the banner says the server does
// not answer).
func TestClusterAPIError(t *testing.T) {
	b := newBrowser(t, New(&describing{err: fmt.Errorf("%w: the database does not answer", api.ErrUnavailable)}, Options{}))
	code, body, _ := b.do("GET", "/api/cluster", "", nil)
	var e api.ErrorBody
	if code != http.StatusServiceUnavailable || json.Unmarshal([]byte(body), &e) != nil || e.Code != api.CodeUnavailable {
		t.Fatalf("a failed DescribeCluster: %d %s", code, body)
	}
}
