package cluster

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/cairnflow/cairn/engine/api"
)

// A worker connected to one server receives the tasks of every shard of
// its task queue: a poll waits on this server's queue and, at the same
// time, is forwarded to every other live server, with the worker's
// identity and declarations. The first task to come back goes to the
// worker; the others are stopped, and a task that comes back all the same
// (its server had handed it out before the poll was stopped) is given back
// to its server unstarted (api.CauseNotStarted, or NotStarted for an
// activity), which dispatches it again.
//
// A server that workers poll directly needs no help: its own pollers take
// its tasks. It answers a forwarded poll of such a queue at once with
// Covered (no task), and the forwarding server stops asking it about that
// queue for coverTTL. So when workers are spread over the servers (each
// given every address, or a load balancer's) a poll costs one server, not
// all of them; the fan-out is left for the servers nobody polls. A server
// is covered while a direct poll of the queue began there within coverTTL:
// when its workers go, the others resume asking it within twice that.

// coverTTL is how long a direct poll makes its server covered, and how
// long another server believes a Covered answer.
const coverTTL = 2 * time.Second

// coverage is what a router knows of who polls which queue.
type coverage struct {
	mu      sync.Mutex
	direct  map[string]time.Time // queue key → when a direct poll last began here
	covered map[string]time.Time // peer address + "\x00" + queue key → believed until
}

// noteDirect records a direct poll of key beginning now.
func (c *coverage) noteDirect(key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.direct == nil {
		c.direct = map[string]time.Time{}
	}
	if len(c.direct) >= pruneAt {
		prune(c.direct, func(t time.Time) bool { return now.Sub(t) >= coverTTL })
	}
	c.direct[key] = now
}

// pruneAt is the size at which the coverage maps drop what has expired
// (sticky queues come and go with worker processes).
const pruneAt = 1024

// prune deletes the entries of m that expired.
func prune(m map[string]time.Time, expired func(time.Time) bool) {
	for k, t := range m {
		if expired(t) {
			delete(m, k)
		}
	}
}

// here reports whether this server's own workers poll key.
func (c *coverage) here(key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.direct[key]
	return ok && now.Sub(t) < coverTTL
}

// markCovered records a peer's Covered answer about key.
func (c *coverage) markCovered(addr, key string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.covered == nil {
		c.covered = map[string]time.Time{}
	}
	if len(c.covered) >= pruneAt {
		prune(c.covered, func(until time.Time) bool { return !now.Before(until) })
	}
	c.covered[addr+"\x00"+key] = now.Add(coverTTL)
}

// isCovered reports whether a peer said lately that it is covered for key.
func (c *coverage) isCovered(addr, key string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.covered[addr+"\x00"+key]
	if ok && !now.Before(until) {
		delete(c.covered, addr+"\x00"+key)
		return false
	}
	return ok
}

// pollResult is one server's answer to a fanned-out poll.
type pollResult[T any] struct {
	task    *T
	err     error
	local   bool
	covered bool   // the peer's own workers poll the queue
	addr    string // the peer's address
}

// pollFunc polls one server: its task (nil: none) and its Covered answer.
type pollFunc[T any] func(context.Context, api.Service) (*T, bool, error)

// fanOut polls local and every peer not known to be covered for key at
// once and returns the first task. A forwarded poll is served here only:
// at once with covered set when this server's own workers poll key.
// giveBack returns a task nobody will receive to its server.
func fanOut[T any](r *Router, ctx context.Context, key string, poll pollFunc[T],
	giveBack func(context.Context, *T)) (_ *T, covered bool, _ error) {
	now := r.node.now()
	if Forwarded(ctx) {
		if r.cover.here(key, now) {
			return nil, true, nil
		}
		t, _, err := poll(ctx, r.local)
		return t, false, err
	}
	r.cover.noteDirect(key, now)
	peers := r.uncoveredPeers(key, now)
	if len(peers) == 0 {
		t, _, err := poll(ctx, r.local)
		return t, false, err
	}
	ctx, cancel := context.WithCancel(ctx)
	results := make(chan pollResult[T], 1+len(peers))
	start := func(svc api.Service, addr string) {
		go func() {
			t, cov, err := poll(ctx, svc)
			results <- pollResult[T]{task: t, err: err, local: addr == "", covered: cov, addr: addr}
		}()
	}
	start(r.local, "")
	for _, p := range peers {
		start(p.svc, p.addr)
	}
	var won *T
	var localErr error
	pending := 1 + len(peers)
	// The local poll's end (a task, its timeout, an error) ends the wait:
	// its timeout bounds the whole poll.
	for done := false; pending > 0 && !done; pending-- {
		res := <-results
		if res.covered {
			r.cover.markCovered(res.addr, key, r.node.now())
		}
		switch {
		case res.task != nil:
			won, done = res.task, true
		case res.local:
			localErr, done = res.err, true
		}
	}
	cancel()
	if pending > 0 {
		go drain(r, key, results, pending, giveBack)
	}
	if won != nil {
		return won, false, nil
	}
	if localErr != nil && ctx.Err() == nil {
		return nil, false, localErr
	}
	return nil, false, nil
}

// drain gives back the tasks of polls that answered after another won.
func drain[T any](r *Router, key string, results <-chan pollResult[T], n int, giveBack func(context.Context, *T)) {
	for range n {
		res := <-results
		if res.covered {
			r.cover.markCovered(res.addr, key, r.node.now())
		}
		if res.task == nil {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), giveBackTimeout)
		giveBack(ctx, res.task)
		cancel()
		r.node.stats.handedBack.Add(1)
	}
}

// PollWorkflowTask implements api.Service (see the fan-out above).
func (r *Router) PollWorkflowTask(ctx context.Context, req *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	t, covered, err := fanOut(r, ctx, "w\x00"+req.TaskQueue, func(ctx context.Context, svc api.Service) (*api.WorkflowTask, bool, error) {
		resp, err := svc.PollWorkflowTask(ctx, req)
		if err != nil {
			return nil, false, err
		}
		return resp.Task, resp.Covered, nil
	}, func(ctx context.Context, t *api.WorkflowTask) {
		if t.Query != nil {
			return // a query nobody answers times out on its server
		}
		_, _ = r.FailWorkflowTask(ctx, &api.FailWorkflowTaskRequest{TaskToken: t.TaskToken, Cause: api.CauseNotStarted, Identity: req.Identity})
	})
	if err != nil {
		return nil, err
	}
	return &api.PollWorkflowTaskResponse{Task: t, Covered: covered}, nil
}

// PollActivityTask implements api.Service (see the fan-out above).
func (r *Router) PollActivityTask(ctx context.Context, req *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	t, covered, err := fanOut(r, ctx, "a\x00"+req.TaskQueue, func(ctx context.Context, svc api.Service) (*api.ActivityTask, bool, error) {
		resp, err := svc.PollActivityTask(ctx, req)
		if err != nil {
			return nil, false, err
		}
		return resp.Task, resp.Covered, nil
	}, func(ctx context.Context, t *api.ActivityTask) {
		_, _ = r.FailActivity(ctx, &api.FailActivityRequest{TaskToken: t.TaskToken, NotStarted: true, Identity: req.Identity})
	})
	if err != nil {
		return nil, err
	}
	return &api.PollActivityTaskResponse{Task: t, Covered: covered}, nil
}

// DescribeTaskQueue implements api.Service: the backlogs and pollers of
// every live server, merged.
func (r *Router) DescribeTaskQueue(ctx context.Context, req *api.DescribeTaskQueueRequest) (*api.DescribeTaskQueueResponse, error) {
	resp, err := r.local.DescribeTaskQueue(ctx, req)
	if err != nil || Forwarded(ctx) {
		return resp, err
	}
	for _, p := range r.livePeers() {
		if p, err := p.svc.DescribeTaskQueue(ctx, req); err == nil {
			resp.Queue = mergeQueue(resp.Queue, p.Queue)
		}
	}
	return resp, nil
}

// ListTaskQueues implements api.Service: every live server's queues,
// merged by name.
func (r *Router) ListTaskQueues(ctx context.Context, req *api.ListTaskQueuesRequest) (*api.ListTaskQueuesResponse, error) {
	resp, err := r.local.ListTaskQueues(ctx, req)
	if err != nil || Forwarded(ctx) {
		return resp, err
	}
	byName := map[string]int{}
	for i, q := range resp.Queues {
		byName[q.Name] = i
	}
	for _, peer := range r.livePeers() {
		p, err := peer.svc.ListTaskQueues(ctx, req)
		if err != nil {
			continue
		}
		for _, q := range p.Queues {
			if i, ok := byName[q.Name]; ok {
				resp.Queues[i] = mergeQueue(resp.Queues[i], q)
			} else {
				byName[q.Name] = len(resp.Queues)
				resp.Queues = append(resp.Queues, q)
			}
		}
	}
	slices.SortFunc(resp.Queues, func(a, b api.TaskQueueInfo) int { return cmpString(a.Name, b.Name) })
	return resp, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// mergeQueue adds b's backlog and pollers to a (a poller seen by several
// servers, through forwarded polls, counts once, as last seen).
func mergeQueue(a, b api.TaskQueueInfo) api.TaskQueueInfo {
	a.WorkflowBacklog += b.WorkflowBacklog
	a.ActivityBacklog += b.ActivityBacklog
	a.WorkflowPollers = mergePollers(a.WorkflowPollers, b.WorkflowPollers)
	a.ActivityPollers = mergePollers(a.ActivityPollers, b.ActivityPollers)
	return a
}

func mergePollers(a, b []api.PollerInfo) []api.PollerInfo {
	idx := map[string]int{}
	for i, p := range a {
		idx[p.Identity] = i
	}
	for _, p := range b {
		i, ok := idx[p.Identity]
		if !ok {
			idx[p.Identity] = len(a)
			a = append(a, p)
			continue
		}
		if p.LastSeen.After(a[i].LastSeen) {
			a[i].LastSeen = p.LastSeen
		}
		a[i].Polling = max(a[i].Polling, p.Polling)
	}
	slices.SortFunc(a, func(x, y api.PollerInfo) int { return cmpString(x.Identity, y.Identity) })
	return a
}

// peer is another live server: its address and its client.
type peer struct {
	addr string
	svc  api.Service
}

// livePeers returns every other live server, by id.
func (r *Router) livePeers() []peer {
	r.node.mu.Lock()
	addrs := r.node.table.peers(r.node.opts.ID)
	r.node.mu.Unlock()
	ids := make([]string, 0, len(addrs))
	for id := range addrs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []peer
	for _, id := range ids {
		if svc, err := r.peers.get(addrs[id]); err == nil {
			out = append(out, peer{addr: addrs[id], svc: svc})
		}
	}
	return out
}

// uncoveredPeers returns the live peers not known to be covered for key.
func (r *Router) uncoveredPeers(key string, now time.Time) []peer {
	peers := r.livePeers()
	out := peers[:0]
	for _, p := range peers {
		if !r.cover.isCovered(p.addr, key, now) {
			out = append(out, p)
		}
	}
	return out
}

// giveBackTimeout bounds the call that returns an unreceived task.
const giveBackTimeout = 10 * time.Second
