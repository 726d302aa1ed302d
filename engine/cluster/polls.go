package cluster

import (
	"context"
	"slices"
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

// pollResult is one server's answer to a fanned-out poll.
type pollResult[T any] struct {
	task  *T
	err   error
	local bool
}

// fanOut polls local and every peer at once and returns the first task.
// giveBack returns a task nobody will receive to its server.
func fanOut[T any](r *Router, ctx context.Context, poll func(context.Context, api.Service) (*T, error),
	giveBack func(context.Context, *T)) (*T, error) {
	peers := r.livePeers()
	if Forwarded(ctx) || len(peers) == 0 {
		return poll(ctx, r.local)
	}
	ctx, cancel := context.WithCancel(ctx)
	results := make(chan pollResult[T], 1+len(peers))
	start := func(svc api.Service, local bool) {
		go func() {
			t, err := poll(ctx, svc)
			results <- pollResult[T]{task: t, err: err, local: local}
		}()
	}
	start(r.local, true)
	for _, svc := range peers {
		start(svc, false)
	}
	var won *T
	var localErr error
	pending := 1 + len(peers)
	// The local poll's end (a task, its timeout, an error) ends the wait:
	// its timeout bounds the whole poll.
	for done := false; pending > 0 && !done; pending-- {
		res := <-results
		switch {
		case res.task != nil:
			won, done = res.task, true
		case res.local:
			localErr, done = res.err, true
		}
	}
	cancel()
	if pending > 0 {
		go drain(r, results, pending, giveBack)
	}
	if won != nil {
		return won, nil
	}
	if localErr != nil && ctx.Err() == nil {
		return nil, localErr
	}
	return nil, nil
}

// drain gives back the tasks of polls that answered after another won.
func drain[T any](r *Router, results <-chan pollResult[T], n int, giveBack func(context.Context, *T)) {
	for range n {
		res := <-results
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
	t, err := fanOut(r, ctx, func(ctx context.Context, svc api.Service) (*api.WorkflowTask, error) {
		resp, err := svc.PollWorkflowTask(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.Task, nil
	}, func(ctx context.Context, t *api.WorkflowTask) {
		if t.Query != nil {
			return // a query nobody answers times out on its server
		}
		_, _ = r.FailWorkflowTask(ctx, &api.FailWorkflowTaskRequest{TaskToken: t.TaskToken, Cause: api.CauseNotStarted, Identity: req.Identity})
	})
	if err != nil {
		return nil, err
	}
	return &api.PollWorkflowTaskResponse{Task: t}, nil
}

// PollActivityTask implements api.Service (see the fan-out above).
func (r *Router) PollActivityTask(ctx context.Context, req *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	t, err := fanOut(r, ctx, func(ctx context.Context, svc api.Service) (*api.ActivityTask, error) {
		resp, err := svc.PollActivityTask(ctx, req)
		if err != nil {
			return nil, err
		}
		return resp.Task, nil
	}, func(ctx context.Context, t *api.ActivityTask) {
		_, _ = r.FailActivity(ctx, &api.FailActivityRequest{TaskToken: t.TaskToken, NotStarted: true, Identity: req.Identity})
	})
	if err != nil {
		return nil, err
	}
	return &api.PollActivityTaskResponse{Task: t}, nil
}

// DescribeTaskQueue implements api.Service: the backlogs and pollers of
// every live server, merged.
func (r *Router) DescribeTaskQueue(ctx context.Context, req *api.DescribeTaskQueueRequest) (*api.DescribeTaskQueueResponse, error) {
	resp, err := r.local.DescribeTaskQueue(ctx, req)
	if err != nil || Forwarded(ctx) {
		return resp, err
	}
	for _, svc := range r.livePeers() {
		if p, err := svc.DescribeTaskQueue(ctx, req); err == nil {
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
	for _, svc := range r.livePeers() {
		p, err := svc.ListTaskQueues(ctx, req)
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

// livePeers returns a client of every other live server.
func (r *Router) livePeers() []api.Service {
	r.node.mu.Lock()
	addrs := r.node.table.peers(r.node.opts.ID)
	r.node.mu.Unlock()
	ids := make([]string, 0, len(addrs))
	for id := range addrs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	var out []api.Service
	for _, id := range ids {
		if svc, err := r.peers.get(addrs[id]); err == nil {
			out = append(out, svc)
		}
	}
	return out
}

// giveBackTimeout bounds the call that returns an unreceived task.
const giveBackTimeout = 10 * time.Second
