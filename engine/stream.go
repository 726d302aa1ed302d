package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	lru "github.com/hashicorp/golang-lru/v2"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// Live streams. An activity attempt (a model call) publishes its output as
// it is produced (PublishStream); watchers read it (WatchStream, the SSE
// endpoint, `cairn workflow watch`). Nothing of it is written to history:
// only the activity's result is. The engine keeps a bounded window of each
// run's stream in memory, and ends every attempt's stream explicitly: done
// when its activity completed, superseded when the attempt ended any other
// way (failed and retried, lease lost, run closed), so a reader never takes
// two attempts' text for one answer.

// Stream window bounds per run.
const (
	streamWindowEvents = 4096
	streamWindowBytes  = 1 << 20
	closedStreams      = 256 // closed runs whose window is kept for late readers
)

type streamHub struct {
	mu     sync.Mutex
	open   map[history.RunRef]*runStream
	closed *lru.Cache[history.RunRef, *runStream]
}

func newStreamHub() *streamHub {
	c, _ := lru.New[history.RunRef, *runStream](closedStreams) // cannot fail: the size is positive
	return &streamHub{open: map[history.RunRef]*runStream{}, closed: c}
}

// runStream is one run's stream. Guarded by streamHub.mu.
type runStream struct {
	events  []api.StreamEvent
	bytes   int
	next    int64 // the next event's Seq
	first   int64 // the Seq of events[0] (next when empty)
	live    map[int64]liveAttempt
	changed chan struct{}
	closed  bool
}

// liveAttempt is an attempt that has streamed and not ended.
type liveAttempt struct {
	attempt int32
	epoch   int64
	typ     string
}

func (h *streamHub) get(ref history.RunRef, create bool) *runStream {
	if s, ok := h.open[ref]; ok {
		return s
	}
	if s, ok := h.closed.Get(ref); ok {
		return s
	}
	if !create {
		return nil
	}
	s := &runStream{next: 1, first: 1, live: map[int64]liveAttempt{}, changed: make(chan struct{})}
	h.open[ref] = s
	return s
}

// append adds an event (its Seq and Time are set here) and wakes watchers.
func (s *runStream) append(ev api.StreamEvent, now time.Time) {
	ev.Seq, ev.Time = s.next, now
	s.next++
	s.events = append(s.events, ev)
	s.bytes += len(ev.Text) + 64
	for len(s.events) > streamWindowEvents || s.bytes > streamWindowBytes {
		s.bytes -= len(s.events[0].Text) + 64
		s.events = s.events[1:]
		s.first++
	}
	if len(s.events) == 0 {
		s.first = s.next
	}
	close(s.changed)
	s.changed = make(chan struct{})
}

// publish appends an attempt's deltas, superseding an earlier attempt of
// the same activity that is still marked live.
func (h *streamHub) publish(ref history.RunRef, schedID int64, a liveAttempt, deltas []api.StreamDelta, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(ref, true)
	if s.closed {
		return
	}
	if prev, ok := s.live[schedID]; ok && prev.epoch != a.epoch {
		s.append(api.StreamEvent{ScheduledEventID: schedID, Attempt: prev.attempt, ActivityType: prev.typ,
			StreamDelta: api.StreamDelta{Kind: api.StreamSuperseded}}, now)
	}
	s.live[schedID] = a
	for _, d := range deltas {
		s.append(api.StreamEvent{ScheduledEventID: schedID, Attempt: a.attempt, ActivityType: a.typ, StreamDelta: d}, now)
	}
}

// settle ends the streams of attempts a committed transition ended: done
// for an activity that completed, superseded otherwise. A closed run's
// stream is closed.
func (h *streamHub) settle(ref history.RunRef, st *machine.RunState, events []history.Event, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.open[ref]
	if !ok {
		return
	}
	for schedID, la := range s.live {
		if a := st.Activities[schedID]; st.Status.Open() && a != nil && a.State == api.ActivityStateStarted && a.LeaseEpoch == la.epoch {
			continue
		}
		kind := api.StreamSuperseded
		if completedIn(events, schedID) {
			kind = api.StreamDone
		}
		delete(s.live, schedID)
		s.append(api.StreamEvent{ScheduledEventID: schedID, Attempt: la.attempt, ActivityType: la.typ,
			StreamDelta: api.StreamDelta{Kind: kind}}, now)
	}
	if !st.Status.Open() {
		s.closed = true
		close(s.changed)
		s.changed = make(chan struct{})
		delete(h.open, ref)
		h.closed.Add(ref, s)
	}
}

func completedIn(events []history.Event, schedID int64) bool {
	for _, ev := range events {
		switch a := ev.Attrs.(type) {
		case *history.ActivityCompleted:
			if a.ScheduledEventID == schedID {
				return true
			}
		case *history.ActivityResolved:
			if a.ScheduledEventID == schedID && a.Resolution == history.ResolvedHappened {
				return true
			}
		}
	}
	return false
}

// read returns the events after `after`, whether some were dropped, the
// channel closed at the next change, and whether the stream is closed.
func (h *streamHub) read(ref history.RunRef, after int64, open bool) (evs []api.StreamEvent, next int64, gap bool, changed <-chan struct{}, closed bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	s := h.get(ref, open)
	if s == nil {
		return nil, 1, false, nil, true
	}
	if !open && !s.closed {
		// The run closed before its stream had an entry to close.
		s.closed = true
		delete(h.open, ref)
		h.closed.Add(ref, s)
	}
	if after+1 < s.first {
		gap = true
		after = s.first - 1
	}
	if i := int(after + 1 - s.first); i < len(s.events) {
		evs = append([]api.StreamEvent(nil), s.events[i:]...)
	}
	return evs, s.next, gap, s.changed, s.closed
}

// PublishStream implements api.Service.
func (e *Engine) PublishStream(ctx context.Context, req *api.PublishStreamRequest) (*api.PublishStreamResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	var tok actToken
	if err := decodeToken(req.TaskToken, &tok); err != nil {
		return nil, err
	}
	for _, d := range req.Deltas {
		if len(d.Text) > e.m.Limits.MaxPayloadBytes {
			return nil, api.Errorf(api.ErrLimitExceeded, "a stream delta of %d bytes", len(d.Text))
		}
	}
	unlock := e.lock(tok.W)
	defer unlock()
	entry := e.openRun(tok.W)
	if entry == nil || entry.ref.RunID != tok.R {
		return nil, api.Errorf(api.ErrStaleAttempt, "workflow %q run %q is not open", tok.W, tok.R)
	}
	a, err := e.m.Current(entry.state, tok.S, tok.E)
	if err != nil {
		return nil, err
	}
	e.streams.publish(entry.ref, tok.S, liveAttempt{attempt: a.Attempt, epoch: a.LeaseEpoch, typ: a.ActivityType}, req.Deltas, e.now())
	return &api.PublishStreamResponse{CancelRequested: a.CancelRequested}, nil
}

// WatchStream implements api.Service.
func (e *Engine) WatchStream(ctx context.Context, req *api.WatchStreamRequest) (*api.WatchStreamResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	st, _, err := e.snapshot(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return nil, err
	}
	ref := st.Ref()
	caller := ctx
	ctx, cancel := context.WithTimeout(ctx, e.opts.PollTimeout)
	defer cancel()
	for {
		evs, next, gap, changed, closed := e.streams.read(ref, req.AfterSeq, st.Status.Open())
		closed = closed || !st.Status.Open()
		if len(evs) > 0 || gap || closed || !req.Wait {
			return &api.WatchStreamResponse{RunID: ref.RunID, Events: evs, NextSeq: next, Gap: gap, Closed: closed}, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			if err := caller.Err(); err != nil { // as GetHistory: the caller's end is its error
				return nil, fmt.Errorf("cairn: watch stream: %w", err)
			}
			return &api.WatchStreamResponse{RunID: ref.RunID, NextSeq: next}, nil
		case <-e.stop:
			return &api.WatchStreamResponse{RunID: ref.RunID, NextSeq: next}, nil
		}
		if st, _, err = e.snapshot(ctx, req.WorkflowID, ref.RunID); err != nil {
			return nil, err
		}
	}
}
