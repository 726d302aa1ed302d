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
// A server that workers poll directly needs no help while one of their
// polls waits there: its next task goes to that poller. It answers a
// forwarded poll of such a queue at once with Covered (no task), and the
// forwarding server does not ask it about that queue again for coverTTL —
// not in a new poll, and a poll that waits longer asks it again then. So
// when workers are spread over the servers (each given every address, or
// a load balancer's) a poll costs one server, not all of them, and the
// fan-out goes to the servers where no worker waits: those nobody polls,
// and those whose own workers are all busy (a backlog the others help
// with). A server whose workers go is asked again within coverTTL.

// coverTTL is how long a server believes another's Covered answer.
const coverTTL = 2 * time.Second

// coverage is what a router knows of who polls which queue.
type coverage struct {
	mu      sync.Mutex
	direct  map[string]int       // queue key → direct polls waiting here
	covered map[string]time.Time // peer address + "\x00" + queue key → believed until
	pruned  time.Time            // when covered last dropped what expired
}

// begin records a direct poll of key waiting here; the function ends it.
func (c *coverage) begin(key string) func() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.direct == nil {
		c.direct = map[string]int{}
	}
	c.direct[key]++
	return func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		if c.direct[key]--; c.direct[key] <= 0 {
			delete(c.direct, key)
		}
	}
}

// here reports whether a direct poll of key waits here now.
func (c *coverage) here(key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.direct[key] > 0
}

// pruneAt is the size past which the covered map drops what has expired,
// at most once per coverTTL (sticky queues come and go with workers).
const pruneAt = 1024

// markCovered records a peer's Covered answer about key and returns until
// when it is believed.
func (c *coverage) markCovered(addr, key string, now time.Time) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.covered == nil {
		c.covered = map[string]time.Time{}
	}
	if len(c.covered) >= pruneAt && now.Sub(c.pruned) >= coverTTL {
		c.pruned = now
		for k, until := range c.covered {
			if !now.Before(until) {
				delete(c.covered, k)
			}
		}
	}
	until := now.Add(coverTTL)
	c.covered[addr+"\x00"+key] = until
	return until
}

// coveredUntil returns until when a peer's Covered answer about key is
// believed, if it still is.
func (c *coverage) coveredUntil(addr, key string, now time.Time) (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	until, ok := c.covered[addr+"\x00"+key]
	if ok && !now.Before(until) {
		delete(c.covered, addr+"\x00"+key)
		return time.Time{}, false
	}
	return until, ok
}

// pollResult is one server's answer to a fanned-out poll.
type pollResult[T any] struct {
	task    *T
	err     error
	local   bool
	covered bool   // a worker of the peer's own waits on the queue
	addr    string // the peer's address
}

// pollFunc polls one server: its task (nil: none) and its Covered answer.
type pollFunc[T any] func(context.Context, api.Service) (*T, bool, error)

// fanOut polls local and the peers not known to be covered for key at
// once and returns the first task; a peer whose Covered answer expires
// while the poll waits is asked then. A forwarded poll is served here
// only: at once with covered set while a direct poll of key waits here.
// giveBack returns a task nobody will receive to its server.
func fanOut[T any](r *Router, parent context.Context, key string, poll pollFunc[T],
	giveBack func(context.Context, *T)) (_ *T, covered bool, _ error) {
	if Forwarded(parent) {
		if r.cover.here(key) {
			return nil, true, nil
		}
		t, _, err := poll(parent, r.local)
		return t, false, err
	}
	defer r.cover.begin(key)()
	ctx, cancel := context.WithCancel(parent)
	f := &fan[T]{r: r, ctx: ctx, key: key, poll: poll, results: make(chan pollResult[T], 8), asked: map[string]bool{}}
	f.start(r.local, "")
	won, localErr := f.wait()
	cancel()
	if f.pending > 0 {
		go drain(r, key, f.results, f.pending, giveBack)
	}
	if won != nil {
		return won, false, nil
	}
	if localErr != nil && parent.Err() == nil {
		return nil, false, localErr
	}
	return nil, false, nil
}

// fan is one fanned-out poll in progress.
type fan[T any] struct {
	r       *Router
	ctx     context.Context
	key     string
	poll    pollFunc[T]
	results chan pollResult[T]
	pending int
	asked   map[string]bool // peers polled, or not to be polled again
	next    time.Time       // when the first skipped peer's Covered expires
}

// start polls svc (addr "": this server's engine) in the background.
func (f *fan[T]) start(svc api.Service, addr string) {
	f.pending++
	go func() {
		t, cov, err := f.poll(f.ctx, svc)
		f.results <- pollResult[T]{task: t, err: err, local: addr == "", covered: cov, addr: addr}
	}()
}

// askPeers polls every live peer not polled yet and not covered, and
// notes when the first covered one's answer expires.
func (f *fan[T]) askPeers() {
	now := f.r.node.now()
	f.next = time.Time{}
	for _, p := range f.r.livePeers() {
		if f.asked[p.addr] {
			continue
		}
		if until, ok := f.r.cover.coveredUntil(p.addr, f.key, now); ok {
			f.expiresAt(until)
			continue
		}
		f.asked[p.addr] = true
		f.start(p.svc, p.addr)
	}
}

func (f *fan[T]) expiresAt(until time.Time) {
	if f.next.IsZero() || until.Before(f.next) {
		f.next = until
	}
}

// wait returns the first task, or the local poll's end (a timeout, an
// error), which bounds the whole poll.
func (f *fan[T]) wait() (*T, error) {
	f.askPeers()
	for {
		var wake <-chan time.Time
		stop := func() bool { return false }
		if !f.next.IsZero() {
			wake, stop = f.r.after(f.next.Sub(f.r.node.now()))
		}
		select {
		case res := <-f.results:
			stop()
			f.pending--
			if res.covered {
				f.asked[res.addr] = false // asked again when the answer expires
				f.expiresAt(f.r.cover.markCovered(res.addr, f.key, f.r.node.now()))
			}
			switch {
			case res.task != nil:
				return res.task, nil
			case res.local:
				return nil, res.err
			}
		case <-wake:
			f.askPeers()
		}
	}
}

// drain gives back the tasks of polls that answered after another won.
func drain[T any](r *Router, key string, results <-chan pollResult[T], n int, giveBack func(context.Context, *T)) {
	for range n {
		res := <-results
		if res.covered {
			_ = r.cover.markCovered(res.addr, key, r.node.now())
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
	a.ActivityLimits = mergeLimits(a.ActivityLimits, b.ActivityLimits)
	a.ActivityKeys = mergeKeys(a.ActivityKeys, b.ActivityKeys)
	return a
}

// mergeLimits adds up the use of each limit on every server (each
// enforces it for the runs of its shards).
func mergeLimits(a, b []api.ActivityLimitInfo) []api.ActivityLimitInfo {
	for _, l := range b {
		i := slices.IndexFunc(a, func(x api.ActivityLimitInfo) bool {
			return x.Limit.ActivityType == l.Limit.ActivityType && x.Limit.LimitKey == l.Limit.LimitKey
		})
		if i < 0 {
			a = append(a, l)
			continue
		}
		a[i].InFlight += l.InFlight
		a[i].Waiting += l.Waiting
		a[i].Keys = mergeKeys(a[i].Keys, l.Keys)
	}
	return a
}

func mergeKeys(a, b []api.LimitKeyInfo) []api.LimitKeyInfo {
	for _, k := range b {
		i := slices.IndexFunc(a, func(x api.LimitKeyInfo) bool { return x.Key == k.Key })
		if i < 0 {
			a = append(a, k)
			continue
		}
		a[i].InFlight += k.InFlight
		a[i].Waiting += k.Waiting
	}
	slices.SortFunc(a, func(x, y api.LimitKeyInfo) int { return cmpString(x.Key, y.Key) })
	return a
}

// SetActivityLimit implements api.Service: the limit is recorded in the
// shared store and applied by every live server (a server down meanwhile
// reads it when it opens).
func (r *Router) SetActivityLimit(ctx context.Context, req *api.SetActivityLimitRequest) (*api.SetActivityLimitResponse, error) {
	resp, err := r.local.SetActivityLimit(ctx, req)
	if err != nil || Forwarded(ctx) {
		return resp, err
	}
	for _, p := range r.livePeers() {
		_, _ = p.svc.SetActivityLimit(ctx, req)
	}
	return resp, nil
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

// giveBackTimeout bounds the call that returns an unreceived task.
const giveBackTimeout = 10 * time.Second
