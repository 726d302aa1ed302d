package api

import "time"

// DescribeClusterRequest asks which servers share the store and who serves
// which shard.
type DescribeClusterRequest struct {
	// View is "" for everything, or ViewServers to leave the shards out.
	View string
}

// ViewServers asks DescribeCluster for the servers only.
const ViewServers = "servers"

// DescribeClusterResponse describes the cluster as the answering server
// sees it (docs/scale-out.md).
type DescribeClusterResponse struct {
	// Clustered is false for a server alone on its store (the embedded
	// Badger store): Servers then names it alone and ShardOwners is empty.
	Clustered bool
	// Self is the answering server's id.
	Self string
	// Shards is the cluster's fixed shard count.
	Shards int
	// Now is the database's clock when the leases were read: leases and
	// heartbeats are timed by it, never by a server's.
	Now     time.Time
	Servers []ClusterServer
	// ShardOwners lists every shard's lease, by shard.
	ShardOwners []ShardOwner
	// Stats are the answering server's counters since it started.
	Stats ClusterStats
}

// ClusterServer is one server sharing the store.
type ClusterServer struct {
	ID, Address, Version string
	// RegisteredAt, LastHeartbeat and Expires are by the database's clock.
	RegisteredAt, LastHeartbeat, Expires time.Time
	// Alive: its registration had not expired at Now.
	Alive bool
	// Shards counts the shards whose live lease it holds.
	Shards int
}

// ShardOwner is one shard's lease.
type ShardOwner struct {
	Shard int
	// Owner is the server holding the lease ("" for none yet).
	Owner string
	// Epoch counts the shard's ownership periods: every commit of the
	// shard carries the epoch it was decided under, and the store refuses
	// one whose epoch moved on.
	Epoch   int64
	Expires time.Time
	// Held: the lease had not expired at Now.
	Held bool
}

// ClusterStats count what one server did as a member of the cluster.
type ClusterStats struct {
	// Acquired and Released count shards taken and given up; Lost those
	// whose lease moved on before it gave them up (a takeover after a
	// freeze or a partition).
	Acquired, Released, Lost int64
	// FencedCommits counts commits the store refused because a shard's
	// lease had moved on (nothing of them was written).
	FencedCommits int64
	// Forwarded counts calls sent to the server serving the run.
	Forwarded int64
	// HandedBack counts tasks given back unstarted to their server because
	// the poll they answered had been served by another.
	HandedBack int64
	// RefusedPastLease counts the calls and commits this server refused
	// itself for shards it held but whose leases may have run out: it
	// could not renew them in time (it was frozen or starved, or the
	// database was unreachable), so it answered nothing from its memory of
	// them until it had given them up.
	RefusedPastLease int64
}

// NotifyChildClosedRequest tells a parent run, on the server that serves
// it, that its child (served by another server of the cluster) closed.
// Servers send it; the parent ignores a child it does not know or knows
// closed already, so sending it again is harmless.
type NotifyChildClosedRequest struct {
	ParentWorkflowID, ParentRunID string
	InitiatedEventID              int64
	ChildWorkflowID, ChildRunID   string
	// Status is how the child closed; Result and Failure its outcome.
	Status  Status
	Result  Payload
	Failure *Failure `json:",omitempty"`
}

// NotifyChildClosedResponse is empty.
type NotifyChildClosedResponse struct{}
