// Package cluster lets several `cairn server`s share one PostgreSQL store
// (docs/scale-out.md). Runs are partitioned into a fixed number of shards
// (history.ShardOf; the count is recorded in the database when it is
// created). Each shard is served by one server at a time, under a lease
// with an epoch held in an ordinary logged table and timed by the
// database's clock; every commit of a shard carries its epoch, so a server
// that was frozen, cut off or slow past its lease writes nothing when it
// wakes up (the store refuses the commit: history.ErrFenced).
//
// A Node is one server's membership: it registers and heartbeats the
// server, takes its share of the shards (the shard count over the live
// servers), renews its leases, takes over the shards whose lease ran out
// (a server died), gives a few shards up per tick when others join, and
// tells its engine which shards to serve (engine.Acquire, Release). It is
// the engine's engine.Shards. A Router serves api.Service for the whole
// cluster: calls about a run go to the server that serves it, forwarded
// with ForwardedHeader when it is another; polls wait on every server's
// queues at once.
//
//	st, _ := pgstore.Open(ctx, pgstore.Options{URL: url})
//	node, _ := cluster.New(cluster.Options{Store: st, Address: "10.0.0.5:7233", Dial: dialPeer})
//	eng, _ := engine.Open(engine.Options{Store: st, Shards: node})
//	_ = node.Start(ctx, eng)                 // takes its share of the shards
//	defer node.Close()                       // gives them up at once
//	svc := cluster.NewRouter(node, eng)      // serve this, not eng
//	h := httpapi.NewHandler(svc, httpapi.Options{RequestContext: cluster.RequestContext})
package cluster
