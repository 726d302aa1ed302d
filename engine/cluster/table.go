package cluster

import (
	"math/rand/v2"
	"time"

	"github.com/cairnflow/cairn/history/pgstore"
)

// routing is who serves which shard, as the node read it last: the leases
// and the servers' registrations.
type routing struct {
	shards  []pgstore.LeaseInfo
	servers map[string]pgstore.ServerInfo
	read    time.Time
}

func newRouting(infos []pgstore.LeaseInfo, servers []pgstore.ServerInfo) routing {
	r := routing{shards: infos, servers: make(map[string]pgstore.ServerInfo, len(servers)), read: time.Now()}
	for _, s := range servers {
		r.servers[s.ID] = s
	}
	return r
}

// owner returns the server serving a shard and its address, or false when
// no live lease names one.
func (r routing) owner(shard int) (id, address string, ok bool) {
	if shard < 0 || shard >= len(r.shards) || !r.shards[shard].Held {
		return "", "", false
	}
	id = r.shards[shard].Owner
	s, known := r.servers[id]
	if !known {
		return "", "", false
	}
	return id, s.Address, true
}

// peers returns the other live servers (id → address).
func (r routing) peers(self string) map[string]string {
	out := map[string]string{}
	for id, s := range r.servers {
		if id != self && s.Alive && s.Address != "" {
			out[id] = s.Address
		}
	}
	return out
}

// freeShards lists the shards no live lease holds, in a random order, so
// that servers taking over at once mostly try different ones.
func freeShards(infos []pgstore.LeaseInfo) []int {
	var out []int
	for _, l := range infos {
		if !l.Held {
			out = append(out, l.Shard)
		}
	}
	rand.Shuffle(len(out), func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}
