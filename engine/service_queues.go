package engine

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// pollers remembers who polled which task queue and when, for
// DescribeTaskQueue: a queue whose workers are gone shows no recent poller.
// It lives in memory only: after a restart a queue shows its pollers again
// as soon as they poll.
type pollers struct {
	mu sync.Mutex
	m  map[pollerKey]*pollerSeen
	// queues remembers when each queue was last polled, for each kind of
	// task, whoever polled it (describe's Unpolled): kept after the
	// pollers themselves are forgotten.
	queues map[queueKind]*pollerSeen
	// since is when the engine started: polls before it are not known.
	since time.Time
}

// queueKind is a task queue and the kind of task polled on it.
type queueKind struct {
	queue    string
	activity bool
}

type pollerKey struct {
	queue, identity string
	activity        bool
}

type pollerSeen struct {
	last   time.Time
	active int
}

// maxPollers bounds the remembered pollers: past it, those idle longest
// beyond PollerRetention are forgotten first (identities change with
// every worker restart).
const maxPollers = 4096

// begin records a poll starting now; the returned function records its end.
func (p *pollers) begin(queue, identity string, activity bool, now func() time.Time) func() {
	if identity == "" {
		identity = "(no identity)"
	}
	k := pollerKey{queue, identity, activity}
	p.mu.Lock()
	if p.m == nil {
		p.m = map[pollerKey]*pollerSeen{}
	}
	s := p.m[k]
	if s == nil {
		if len(p.m) >= maxPollers {
			p.pruneLocked(now())
		}
		s = &pollerSeen{}
		p.m[k] = s
	}
	q := &pollerSeen{} // a worker's sticky queue: no run waits on it alone
	if !isSticky(queue) {
		q = p.queueLocked(queueKind{queue, activity}, now)
	}
	s.active++
	q.active++
	s.last = now()
	q.last = s.last
	p.mu.Unlock()
	return func() {
		p.mu.Lock()
		s.active--
		q.active--
		s.last = now()
		q.last = s.last
		p.mu.Unlock()
	}
}

// queueLocked returns what is known of the polls of k, made on first use.
// Workers' sticky queues are not kept, so only past maxPollers task queues
// are those idle beyond PollerRetention forgotten (a queue forgotten so
// would read as never polled since the engine started).
func (p *pollers) queueLocked(k queueKind, now func() time.Time) *pollerSeen {
	if p.queues == nil {
		p.queues = map[queueKind]*pollerSeen{}
	}
	q := p.queues[k]
	if q == nil {
		if len(p.queues) >= maxPollers {
			t := now()
			for k, q := range p.queues {
				if q.active == 0 && t.Sub(q.last) > api.PollerRetention {
					delete(p.queues, k)
				}
			}
		}
		q = &pollerSeen{}
		p.queues[k] = q
	}
	return q
}

// lastPoll says whether a worker polls queue for the kind of task now, and
// when one last did (zero: not since the engine started).
func (p *pollers) lastPoll(queue string, activity bool) (polling bool, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if q := p.queues[queueKind{queue, activity}]; q != nil {
		return q.active > 0, q.last
	}
	return false, time.Time{}
}

// pruneLocked forgets the pollers idle for longer than PollerRetention.
func (p *pollers) pruneLocked(now time.Time) {
	for k, s := range p.m {
		if s.active == 0 && now.Sub(s.last) > api.PollerRetention {
			delete(p.m, k)
		}
	}
}

// snapshot returns the pollers per queue (sticky queues left out unless
// asked for by name), pruning the old ones.
func (p *pollers) snapshot(now time.Time, only string) map[string]*api.TaskQueueInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.pruneLocked(now)
	out := map[string]*api.TaskQueueInfo{}
	for k, s := range p.m {
		if only != "" && k.queue != only || only == "" && isSticky(k.queue) {
			continue
		}
		q := out[k.queue]
		if q == nil {
			q = &api.TaskQueueInfo{Name: k.queue}
			out[k.queue] = q
		}
		pi := api.PollerInfo{Identity: k.identity, LastSeen: s.last, Polling: s.active}
		if s.active > 0 {
			pi.LastSeen = now
		}
		if k.activity {
			q.ActivityPollers = append(q.ActivityPollers, pi)
		} else {
			q.WorkflowPollers = append(q.WorkflowPollers, pi)
		}
	}
	return out
}

func isSticky(queue string) bool { return strings.Contains(queue, "/sticky/") }

func sortPollers(ps []api.PollerInfo) {
	slices.SortFunc(ps, func(a, b api.PollerInfo) int { return strings.Compare(a.Identity, b.Identity) })
}

// queueInfo completes a queue's description with its backlog: the queued
// tasks a poller would still get (a queue keeps the entries of tasks that
// went stale — a run terminated, a query given up — until it is polled).
func (e *Engine) queueInfo(q *api.TaskQueueInfo) api.TaskQueueInfo {
	for _, it := range e.wftQ.Items(q.Name) {
		if e.wftLive(it) {
			q.WorkflowBacklog++
		}
	}
	var live []actItem
	for _, it := range e.actQ.Items(q.Name) {
		if e.actLive(it) {
			q.ActivityBacklog++
			live = append(live, it)
		}
	}
	q.ActivityLimits, q.ActivityKeys = e.limits.describe(q.Name, live)
	sortPollers(q.WorkflowPollers)
	sortPollers(q.ActivityPollers)
	return *q
}

// wftLive reports whether a queued workflow task item is still current,
// by the checks its dispatch makes.
func (e *Engine) wftLive(it wftItem) bool {
	switch {
	case it.task != nil:
		return true
	case it.query != nil:
		e.queriesMu.Lock()
		_, live := e.queries[it.query.id]
		e.queriesMu.Unlock()
		return live
	}
	unlock := e.lock(it.ref.WorkflowID)
	defer unlock()
	entry := e.openRun(it.ref.WorkflowID)
	if entry == nil || entry.ref != it.ref {
		return false
	}
	w := &entry.state.WFT
	return w.Scheduled && !w.Started && w.Seq == it.seq
}

// actLive reports whether a queued activity attempt is still current.
func (e *Engine) actLive(it actItem) bool {
	if it.task != nil {
		return true
	}
	unlock := e.lock(it.ref.WorkflowID)
	defer unlock()
	entry := e.openRun(it.ref.WorkflowID)
	if entry == nil || entry.ref != it.ref {
		return false
	}
	a, ok := entry.state.Activities[it.schedID]
	return ok && a.State == api.ActivityStateScheduled && a.Attempt == it.attempt
}

// DescribeTaskQueue implements api.Service.
func (e *Engine) DescribeTaskQueue(ctx context.Context, req *api.DescribeTaskQueueRequest) (*api.DescribeTaskQueueResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if err := e.m.CheckID("task queue", req.TaskQueue, true); err != nil {
		return nil, err
	}
	q := e.pollers.snapshot(e.now(), req.TaskQueue)[req.TaskQueue]
	if q == nil {
		q = &api.TaskQueueInfo{Name: req.TaskQueue}
	}
	return &api.DescribeTaskQueueResponse{Queue: e.queueInfo(q)}, nil
}

// ListTaskQueues implements api.Service.
func (e *Engine) ListTaskQueues(ctx context.Context, req *api.ListTaskQueuesRequest) (*api.ListTaskQueuesResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	qs := e.pollers.snapshot(e.now(), "")
	for _, name := range e.TaskQueues() { // queues with a backlog or a waiting poller
		if qs[name] == nil {
			qs[name] = &api.TaskQueueInfo{Name: name}
		}
	}
	resp := &api.ListTaskQueuesResponse{}
	for _, name := range sortedKeys(qs) {
		if !strings.HasPrefix(name, req.NamePrefix) {
			continue
		}
		q := e.queueInfo(qs[name])
		if q.WorkflowBacklog+q.ActivityBacklog+len(q.WorkflowPollers)+len(q.ActivityPollers) == 0 {
			continue // only stale entries
		}
		resp.Queues = append(resp.Queues, q)
	}
	return resp, nil
}

// CountWorkflows implements api.Service: one pass over the list index.
func (e *Engine) CountWorkflows(ctx context.Context, req *api.CountWorkflowsRequest) (*api.CountWorkflowsResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	filter := &api.ListWorkflowsRequest{WorkflowType: req.WorkflowType, WorkflowIDPrefix: req.WorkflowIDPrefix,
		StartedAfter: req.StartedAfter, StartedBefore: req.StartedBefore}
	// The status index: a run's status and start time are in its key, so
	// only a type filter needs the entry's value decoded.
	prefix := history.Key().Str("s").Bytes()
	var counts [16]int64
	paused := map[string]int64{} // by what they wait for: their entries are decoded (few runs wait for a person)
	resp := &api.CountWorkflowsResponse{}
	var after []byte
	const batch = 1000
	for {
		recs, err := e.store.Scan(ctx, history.SpaceIndex, history.ScanOptions{Prefix: prefix, After: after, Limit: batch})
		if err != nil {
			return nil, storeErr(err)
		}
		for _, r := range recs {
			after = r.Key
			if !indexKeyMatches(r.Key, filter) {
				continue
			}
			status, pause, ok := e.countedAs(r, filter)
			if !ok {
				continue
			}
			if pause != "" {
				paused[pause]++
			}
			resp.Total++
			if int(status) < len(counts) {
				counts[status]++
			}
		}
		if len(recs) < batch {
			break
		}
	}
	for s, n := range counts {
		if n > 0 {
			resp.ByStatus = append(resp.ByStatus, api.StatusCount{Status: api.Status(s), Count: n})
		}
	}
	for _, kind := range slices.Sorted(maps.Keys(paused)) {
		resp.Paused = append(resp.Paused, api.PauseCount{Kind: kind, Count: paused[kind]})
	}
	resp.Quarantined = e.countCorrupt(filter)
	resp.Total += resp.Quarantined
	return resp, nil
}

// countedAs says how CountWorkflows counts a status index entry: the run's
// status and, for a paused run, what it waits for (its entry is decoded
// then, and for a type filter). ok is false for an entry the filter drops
// and for a quarantined run, which is counted apart (countCorrupt).
func (e *Engine) countedAs(r history.Record, filter *api.ListWorkflowsRequest) (status api.Status, pause string, ok bool) {
	status, ref := statusIndexRun(r.Key)
	if filter.WorkflowType != "" || status == api.StatusPaused {
		info, ok := e.listEntry(r, filter)
		if !ok {
			return 0, "", false
		}
		status, ref = info.Status, history.RunRef{WorkflowID: info.WorkflowID, RunID: info.RunID}
		if status == api.StatusPaused && info.Pause != nil {
			pause = info.Pause.Kind
		}
	}
	return status, pause, e.corrupt.lookup(ref.WorkflowID, ref.RunID) == nil
}

// statusIndexRun reads a status index key: the run's status and ids.
func statusIndexRun(key []byte) (api.Status, history.RunRef) {
	kr := history.ReadKey(key)
	kr.Str() // "s"
	status := api.Status(kr.Int())
	kr.Int() // the start time
	wf := kr.Str()
	return status, history.RunRef{WorkflowID: wf, RunID: kr.Str()}
}
