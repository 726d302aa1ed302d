package engine

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/clock"
)

// Activity limits (api.ActivityLimit): the engine hands an activity task to
// a poller only when every limit the activity falls under has a free slot
// and, for a rate, a token. They are enforced where tasks are matched with
// pollers (matching's Gate, installed on actQ), so they hold across every
// worker of the engine:
//
//   - a slot is reserved when the queue admits the attempt for a poller
//     (limiter.admit), bound to the attempt's lease when it is dispatched,
//     and freed when the attempt's state says it no longer runs: it
//     completed, failed, was cancelled, or its lease ended (start-to-close
//     or heartbeat timeout — how the engine notices a dead worker). Every
//     installed run state is checked against the slots its run holds
//     (limiter.sync), so no path that ends an attempt is missed;
//   - when the engine opens (or takes over a shard) the attempts still
//     leased take their slots again (limiter.adopt), over the limit if
//     need be;
//   - a rate is a token bucket per limit (and per key of a family) on the
//     engine's clock; a queue held back by an empty bucket is woken when a
//     token is due.
//
// The configuration is durable (history.SpaceMeta, "alim/…") and read at
// Open. In a cluster each server enforces the limits for the runs of its
// shards (docs/workers.md).

// limitKey is the record key of a limit.
func limitKey(l *api.ActivityLimit) []byte {
	return history.Key().Str("alim").Str(l.TaskQueue).Str(l.ActivityType).Str(l.LimitKey).Bytes()
}

// limiter holds the limits of the task queues and the slots held.
type limiter struct {
	mu     sync.Mutex
	clk    clock.Clock
	queues map[string][]*limitState
	slots  map[slotID]*slot
	runs   map[history.RunRef][]slotID
	// held is len(slots), read without the lock: while no slot is held
	// an installed run state costs one atomic load.
	held atomic.Int64
	// kick wakes a task queue whose held-back tasks may pass now. Never
	// called with mu held.
	kick func(queue string)
}

// limitState is a limit and its counters.
type limitState struct {
	cfg      api.ActivityLimit
	family   string // the prefix of a family limit ("tenant/" of "tenant/*")
	isFamily bool
	inFlight map[string]int // by key of a family ("" otherwise)
	buckets  map[string]*bucket
	wake     clock.Timer // a pending kick for the next token
}

type bucket struct {
	tokens float64
	at     time.Time
}

// slotID is one attempt of an activity.
type slotID struct {
	ref     history.RunRef
	schedID int64
	attempt int32
}

// slot is what an attempt holds: a place in each limit it falls under.
type slot struct {
	queue, activityType, key string
	epoch                    int64 // its lease, once dispatched (0: reserved)
	holds                    []hold
}

type hold struct {
	l   *limitState
	key string
}

func newLimiter(clk clock.Clock) *limiter {
	return &limiter{clk: clk, queues: map[string][]*limitState{}, slots: map[slotID]*slot{},
		runs: map[history.RunRef][]slotID{}}
}

// match says whether an activity of type typ and limit key key (its keys
// separated by commas) falls under l, and under which key of l.
func (l *limitState) match(typ, key string) (string, bool) {
	if l.cfg.ActivityType != "" && l.cfg.ActivityType != typ {
		return "", false
	}
	if l.cfg.LimitKey == "" {
		return "", true
	}
	for rest := key; rest != ""; {
		var k string
		k, rest, _ = strings.Cut(rest, ",")
		if l.isFamily && strings.HasPrefix(k, l.family) {
			return k, true
		}
		if !l.isFamily && k == l.cfg.LimitKey {
			return "", true
		}
	}
	return "", false
}

// burst is how many tokens l's buckets hold.
func (l *limitState) burst() float64 {
	if l.cfg.Burst > 0 {
		return float64(l.cfg.Burst)
	}
	return max(1, math.Ceil(l.cfg.RatePerSecond))
}

// tokens returns key's bucket refilled to now.
func (l *limitState) bucket(key string, now time.Time) *bucket {
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: l.burst(), at: now}
		l.buckets[key] = b
	}
	if now.After(b.at) {
		b.tokens = min(l.burst(), b.tokens+now.Sub(b.at).Seconds()*l.cfg.RatePerSecond)
		b.at = now
	}
	return b
}

// room says whether l has a slot and a token for key now; when a token is
// missing it arranges for queue to be woken when one is due.
func (lm *limiter) room(l *limitState, queue, key string, now time.Time) bool {
	if l.cfg.MaxInFlight > 0 && l.inFlight[key] >= l.cfg.MaxInFlight {
		return false
	}
	if l.cfg.RatePerSecond <= 0 {
		return true
	}
	b := l.bucket(key, now)
	if b.tokens >= 1 {
		return true
	}
	if l.wake == nil {
		d := time.Duration((1 - b.tokens) / l.cfg.RatePerSecond * float64(time.Second))
		l.wake = lm.clk.AfterFunc(max(d, time.Millisecond), func() {
			lm.mu.Lock()
			l.wake = nil
			lm.mu.Unlock()
			lm.kick(queue)
		})
	}
	return false
}

// admit reserves the slots of an attempt about to be handed to a poller,
// or reports false when a limit it falls under has no room. An attempt
// under no limit takes nothing.
func (lm *limiter) admit(queue string, it actItem) bool {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	ls := lm.queues[queue]
	if len(ls) == 0 {
		return true
	}
	id := slotID{it.ref, it.schedID, it.attempt}
	if _, ok := lm.slots[id]; ok {
		return true
	}
	now := lm.clk.Now()
	var holds []hold
	for _, l := range ls {
		k, ok := l.match(it.activityType, it.key)
		if !ok {
			continue
		}
		if !lm.room(l, queue, k, now) {
			return false
		}
		holds = append(holds, hold{l, k})
	}
	if len(holds) == 0 {
		return true
	}
	for _, h := range holds {
		h.l.inFlight[h.key]++
		if h.l.cfg.RatePerSecond > 0 {
			h.l.bucket(h.key, now).tokens--
		}
	}
	lm.addLocked(id, &slot{queue: queue, activityType: it.activityType, key: it.key, holds: holds})
	return true
}

func (lm *limiter) addLocked(id slotID, s *slot) {
	lm.slots[id] = s
	lm.runs[id.ref] = append(lm.runs[id.ref], id)
	lm.held.Add(1)
}

// unadmit gives back the slot of an attempt no poller took, and its
// tokens.
func (lm *limiter) unadmit(it actItem) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	id := slotID{it.ref, it.schedID, it.attempt}
	if s := lm.slots[id]; s != nil && s.epoch == 0 {
		for _, h := range s.holds {
			if h.l.cfg.RatePerSecond > 0 {
				b := h.l.bucket(h.key, lm.clk.Now())
				b.tokens = min(h.l.burst(), b.tokens+1)
			}
		}
		lm.releaseLocked(id)
	}
}

// releaseLocked frees a slot.
func (lm *limiter) releaseLocked(id slotID) {
	s := lm.slots[id]
	if s == nil {
		return
	}
	for _, h := range s.holds {
		if h.l.inFlight[h.key]--; h.l.inFlight[h.key] <= 0 {
			delete(h.l.inFlight, h.key)
		}
	}
	delete(lm.slots, id)
	lm.held.Add(-1)
	ids := slices.DeleteFunc(lm.runs[id.ref], func(x slotID) bool { return x == id })
	if len(ids) == 0 {
		delete(lm.runs, id.ref)
	} else {
		lm.runs[id.ref] = ids
	}
}

// release frees the slot of an attempt that was not dispatched after all
// (its run moved on, or the dispatch failed), and wakes its queue.
func (lm *limiter) release(it actItem) {
	if lm.held.Load() == 0 {
		return
	}
	lm.mu.Lock()
	s := lm.slots[slotID{it.ref, it.schedID, it.attempt}]
	if s == nil || s.epoch != 0 {
		lm.mu.Unlock()
		return
	}
	lm.releaseLocked(slotID{it.ref, it.schedID, it.attempt})
	lm.mu.Unlock()
	lm.kick(s.queue)
}

// bind ties an attempt's slot to the lease it was dispatched under.
func (lm *limiter) bind(it actItem, epoch int64) {
	if lm.held.Load() == 0 {
		return
	}
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if s := lm.slots[slotID{it.ref, it.schedID, it.attempt}]; s != nil {
		s.epoch = epoch
	}
}

// sync frees the slots of ref's attempts that st says no longer run (st
// nil: the run left the engine) and wakes their queues.
func (lm *limiter) sync(ref history.RunRef, st *machine.RunState) {
	if lm.held.Load() == 0 {
		return
	}
	lm.mu.Lock()
	var (
		kick []string
		buf  [8]slotID
	)
	ended := buf[:0]
	for _, id := range lm.runs[ref] {
		if s := lm.slots[id]; !slotLive(s, id, st) {
			ended = append(ended, id)
			if !slices.Contains(kick, s.queue) {
				kick = append(kick, s.queue)
			}
		}
	}
	for _, id := range ended {
		lm.releaseLocked(id)
	}
	lm.mu.Unlock()
	for _, q := range kick {
		lm.kick(q)
	}
}

// slotLive says whether the attempt holding s still runs, or is still
// about to be dispatched, by its run's state.
func slotLive(s *slot, id slotID, st *machine.RunState) bool {
	if st == nil || !st.Status.Open() {
		return false
	}
	a, ok := st.Activities[id.schedID]
	if !ok || a.Attempt != id.attempt {
		return false
	}
	if s.epoch == 0 {
		return a.State == api.ActivityStateScheduled || a.State == api.ActivityStateStarted
	}
	return a.State == api.ActivityStateStarted && a.LeaseEpoch == s.epoch
}

// adopt gives the attempts of st still leased (after a restart, or a shard
// taken over) their slots, over the limits if need be, and frees the slots
// of those that no longer run.
func (lm *limiter) adopt(ref history.RunRef, st *machine.RunState) {
	lm.sync(ref, st)
	lm.mu.Lock()
	defer lm.mu.Unlock()
	if len(lm.queues) == 0 {
		return
	}
	for _, schedID := range sortedKeys(st.Activities) {
		a := st.Activities[schedID]
		ls := lm.queues[a.Options.TaskQueue]
		id := slotID{ref, schedID, a.Attempt}
		if a.State != api.ActivityStateStarted || len(ls) == 0 || lm.slots[id] != nil {
			continue
		}
		s := &slot{queue: a.Options.TaskQueue, activityType: a.ActivityType, key: a.Options.LimitKey, epoch: a.LeaseEpoch}
		for _, l := range ls {
			if k, ok := l.match(s.activityType, s.key); ok {
				s.holds = append(s.holds, hold{l, k})
				l.inFlight[k]++
			}
		}
		if len(s.holds) > 0 {
			lm.addLocked(id, s)
		}
	}
}

// set installs (or, with clear, removes) a limit in memory. A new limit
// counts the attempts already holding a slot on its queue that fall under
// it.
func (lm *limiter) set(cfg api.ActivityLimit, clear bool) {
	lm.mu.Lock()
	ls := lm.queues[cfg.TaskQueue]
	i := slices.IndexFunc(ls, func(l *limitState) bool {
		return l.cfg.ActivityType == cfg.ActivityType && l.cfg.LimitKey == cfg.LimitKey
	})
	switch {
	case clear && i >= 0:
		old := ls[i]
		if old.wake != nil {
			old.wake.Stop()
		}
		for _, s := range lm.slots {
			s.holds = slices.DeleteFunc(s.holds, func(h hold) bool { return h.l == old })
		}
		ls = slices.Delete(ls, i, i+1)
	case clear:
	case i >= 0:
		ls[i].cfg = cfg
		ls[i].buckets = map[string]*bucket{}
	default:
		l := &limitState{cfg: cfg, inFlight: map[string]int{}, buckets: map[string]*bucket{}}
		l.family, l.isFamily = strings.CutSuffix(cfg.LimitKey, "*")
		for _, s := range lm.slots {
			if s.queue != cfg.TaskQueue {
				continue
			}
			if k, ok := l.match(s.activityType, s.key); ok {
				s.holds = append(s.holds, hold{l, k})
				l.inFlight[k]++
			}
		}
		ls = append(ls, l)
		slices.SortFunc(ls, func(a, b *limitState) int {
			return strings.Compare(a.cfg.ActivityType+"\x00"+a.cfg.LimitKey, b.cfg.ActivityType+"\x00"+b.cfg.LimitKey)
		})
	}
	if len(ls) == 0 {
		delete(lm.queues, cfg.TaskQueue)
	} else {
		lm.queues[cfg.TaskQueue] = ls
	}
	lm.mu.Unlock()
	lm.kick(cfg.TaskQueue)
}

// limits returns the limits of queue.
func (lm *limiter) limits(queue string) []api.ActivityLimit {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	var out []api.ActivityLimit
	for _, l := range lm.queues[queue] {
		out = append(out, l.cfg)
	}
	return out
}

// describe returns the limits of queue with their use; waiting are the
// live queued attempts of the queue (their type and LimitKey).
func (lm *limiter) describe(queue string, waiting []actItem) (infos []api.ActivityLimitInfo, keys []api.LimitKeyInfo) {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	byKey := map[string]*api.LimitKeyInfo{}
	keyInfo := func(k string) *api.LimitKeyInfo {
		ki := byKey[k]
		if ki == nil {
			ki = &api.LimitKeyInfo{Key: k}
			byKey[k] = ki
		}
		return ki
	}
	for _, it := range waiting {
		keyInfo(it.key).Waiting++
	}
	for _, s := range lm.slots {
		if s.queue == queue {
			keyInfo(s.key).InFlight++
		}
	}
	for _, l := range lm.queues[queue] {
		info := api.ActivityLimitInfo{Limit: l.cfg}
		fam := map[string]*api.LimitKeyInfo{}
		famInfo := func(k string) *api.LimitKeyInfo {
			ki := fam[k]
			if ki == nil {
				ki = &api.LimitKeyInfo{Key: k}
				fam[k] = ki
			}
			return ki
		}
		for k, n := range l.inFlight {
			info.InFlight += n
			if l.isFamily {
				famInfo(k).InFlight += n
			}
		}
		for _, it := range waiting {
			if k, ok := l.match(it.activityType, it.key); ok {
				info.Waiting++
				if l.isFamily {
					famInfo(k).Waiting++
				}
			}
		}
		for _, k := range sortedKeys(fam) {
			info.Keys = append(info.Keys, *fam[k])
		}
		infos = append(infos, info)
	}
	for _, k := range sortedKeys(byKey) {
		if k != "" || len(byKey) > 1 {
			keys = append(keys, *byKey[k])
		}
	}
	return infos, keys
}

// syncSlots checks the slots of ref's attempts against its current state.
func (e *Engine) syncSlots(ref history.RunRef) {
	if e.limits.held.Load() == 0 {
		return
	}
	unlock := e.lock(ref.WorkflowID)
	defer unlock()
	var st *machine.RunState
	if entry := e.openRun(ref.WorkflowID); entry != nil && entry.ref == ref {
		st = entry.state
	}
	e.limits.sync(ref, st)
}

// blocking describes the first limit of queue that has no room now for an
// activity of type typ and limit key key ("" when none).
func (lm *limiter) blocking(queue, typ, key string) string {
	lm.mu.Lock()
	defer lm.mu.Unlock()
	now := lm.clk.Now()
	for _, l := range lm.queues[queue] {
		k, ok := l.match(typ, key)
		if !ok {
			continue
		}
		name := limitName(l.cfg)
		if k != "" {
			name += " for " + k
		}
		if l.cfg.MaxInFlight > 0 && l.inFlight[k] >= l.cfg.MaxInFlight {
			return fmt.Sprintf("%s: %d of %d in flight", name, l.inFlight[k], l.cfg.MaxInFlight)
		}
		if l.cfg.RatePerSecond > 0 {
			if b := l.buckets[k]; b != nil && b.tokens+now.Sub(b.at).Seconds()*l.cfg.RatePerSecond < 1 {
				return fmt.Sprintf("%s: rate %v/s used up", name, l.cfg.RatePerSecond)
			}
		}
	}
	return ""
}

// limitName names a limit for people: "type llm, key openai/gpt-4o".
func limitName(l api.ActivityLimit) string {
	var parts []string
	if l.ActivityType != "" {
		parts = append(parts, "type "+l.ActivityType)
	}
	if l.LimitKey != "" {
		parts = append(parts, "key "+l.LimitKey)
	}
	if len(parts) == 0 {
		return "the queue's limit"
	}
	return "limit on " + strings.Join(parts, ", ")
}

// ActivityLimitsInUse returns every activity limit with the attempts
// holding a slot of it now (Waiting is not counted: it would scan the
// queues), by task queue, type and key: for metrics.
func (e *Engine) ActivityLimitsInUse() []api.ActivityLimitInfo {
	lm := e.limits
	lm.mu.Lock()
	defer lm.mu.Unlock()
	var out []api.ActivityLimitInfo
	for _, q := range sortedKeys(lm.queues) {
		for _, l := range lm.queues[q] {
			info := api.ActivityLimitInfo{Limit: l.cfg}
			for _, n := range l.inFlight {
				info.InFlight += n
			}
			out = append(out, info)
		}
	}
	return out
}

// checkLimit validates a limit of a SetActivityLimit request.
func (e *Engine) checkLimit(l *api.ActivityLimit, clear bool) error {
	if err := e.m.CheckID("task queue", l.TaskQueue, true); err != nil {
		return err
	}
	if err := e.m.CheckID("activity type", l.ActivityType, false); err != nil {
		return err
	}
	if err := e.m.CheckID("limit key", l.LimitKey, false); err != nil {
		return err
	}
	if strings.Contains(l.LimitKey, ",") || strings.Contains(strings.TrimSuffix(l.LimitKey, "*"), "*") {
		return api.Errorf(api.ErrInvalidArgument, "limit key %q: one key, with at most a trailing * for a family", l.LimitKey)
	}
	if clear {
		return nil
	}
	switch {
	case l.MaxInFlight < 0 || l.Burst < 0:
		return api.Errorf(api.ErrInvalidArgument, "max in flight %d and burst %d must not be negative", l.MaxInFlight, l.Burst)
	case math.IsNaN(l.RatePerSecond) || l.RatePerSecond < 0 || l.RatePerSecond > 1e6:
		return api.Errorf(api.ErrInvalidArgument, "rate %v per second: want 0 to 1e6", l.RatePerSecond)
	case l.Burst > 1e6:
		return api.Errorf(api.ErrInvalidArgument, "burst %d: at most 1e6", l.Burst)
	case l.MaxInFlight == 0 && l.RatePerSecond == 0:
		return api.Errorf(api.ErrInvalidArgument, "a limit needs a max in flight or a rate (to remove one, clear it)")
	}
	return nil
}

// SetActivityLimit implements api.Service.
func (e *Engine) SetActivityLimit(ctx context.Context, req *api.SetActivityLimitRequest) (*api.SetActivityLimitResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	l := req.Limit
	if err := e.checkLimit(&l, req.Clear); err != nil {
		return nil, err
	}
	e.limitsMu.Lock()
	defer e.limitsMu.Unlock()
	cur := e.limits.limits(l.TaskQueue)
	exists := slices.ContainsFunc(cur, func(c api.ActivityLimit) bool {
		return c.ActivityType == l.ActivityType && c.LimitKey == l.LimitKey
	})
	if !req.Clear && !exists && len(cur) >= api.MaxActivityLimitsPerQueue {
		return nil, api.Errorf(api.ErrLimitExceeded, "task queue %q has %d activity limits, the most it may have", l.TaskQueue, len(cur))
	}
	var b history.Batch
	if req.Clear {
		b.Deletes = append(b.Deletes, history.RecordKey{Space: history.SpaceMeta, Key: limitKey(&l)})
	} else {
		v, err := api.MarshalMsgpack(&l)
		if err != nil {
			return nil, fmt.Errorf("%w: encode activity limit: %w", api.ErrInternal, err)
		}
		b.Puts = append(b.Puts, history.Record{Space: history.SpaceMeta, Key: limitKey(&l), Value: v})
	}
	if err := e.store.Commit(ctx, &b); err != nil {
		return nil, storeErr(err)
	}
	e.limits.set(l, req.Clear)
	return &api.SetActivityLimitResponse{Limits: e.limits.limits(l.TaskQueue)}, nil
}

// loadLimits reads the recorded limits when the engine opens.
func (e *Engine) loadLimits(ctx context.Context) error {
	prefix := history.Key().Str("alim").Bytes()
	var after []byte
	for {
		recs, err := e.store.Scan(ctx, history.SpaceMeta, history.ScanOptions{Prefix: prefix, After: after, Limit: 1000})
		if err != nil {
			return fmt.Errorf("engine: read activity limits: %w", storeErr(err))
		}
		for _, r := range recs {
			after = r.Key
			var l api.ActivityLimit
			if err := api.UnmarshalMsgpack(r.Value, &l); err != nil || e.checkLimit(&l, false) != nil {
				e.log.Warn().Hex("key", r.Key).Msg("an activity limit does not decode: ignored (set it again)")
				continue
			}
			e.limits.set(l, false)
		}
		if len(recs) < 1000 {
			return nil
		}
	}
}
