package history

// EventDecoder decodes the records of one read — a whole history, or a page
// of it — about 1.5 times as fast as calling DecodeEvent for each: instead
// of allocating every event's attribute struct and bytes one by one, it
// carves them out of blocks shared by the events it decodes (allocation
// dominates decoding cost).
//
// The price is that the events of one decoder keep each other's blocks
// alive. Use one decoder per read of events that are used together (replay,
// export, a page sent to a worker), and drop it with them; to keep a few
// events of a large read for a long time, use DecodeEvent instead. Records
// over 4 KiB (large payloads) always get memory of their own.
//
// The zero value is ready to use. An EventDecoder is not safe for concurrent
// use; the events it returned are ordinary values, safe to share.
type EventDecoder struct {
	dec binDecoder

	bytes     []byte // unused part of the current byte block
	blockSize int
	strs      []string // unused part of the current []string block

	scheduled slab[ActivityScheduled]
	started   slab[ActivityStarted]
	completed slab[ActivityCompleted]
	taskDone  slab[WorkflowTaskCompleted]
	timer     slab[TimerStarted]
	fired     slab[TimerFired]
	signal    slab[SignalReceived]
	marker    slab[MarkerRecorded]
	policy    slab[RetryPolicy]
}

// Decode is DecodeEvent using the decoder's shared blocks.
func (d *EventDecoder) Decode(data []byte, run RunRef, want int64) (Event, error) {
	return decodeEvent(data, run, want, d)
}

// Block sizes: byte blocks grow from 1 KiB to 32 KiB, so that a short read
// allocates little; bodies above maxSharedBody get memory of their own.
const (
	minByteBlock  = 1 << 10
	maxByteBlock  = 32 << 10
	maxSharedBody = 4 << 10
)

// slab hands out elements of a shared []T, allocating chunks that grow from
// 4 to 64 elements.
type slab[T any] struct {
	free []T
	n    int
}

func (s *slab[T]) alloc() *T {
	if len(s.free) == 0 {
		s.n = min(max(2*s.n, 4), 64)
		s.free = make([]T, s.n)
	}
	p := &s.free[0]
	s.free = s.free[1:]
	return p
}

// copyBody returns a private copy of body for the reader to alias.
func (d *EventDecoder) copyBody(body []byte) []byte {
	n := len(body)
	if d == nil || n > maxSharedBody {
		return append(make([]byte, 0, n), body...)
	}
	if len(d.bytes) < n {
		d.blockSize = min(max(2*d.blockSize, minByteBlock), maxByteBlock)
		d.bytes = make([]byte, max(d.blockSize, n)) // a body larger than the block gets a block its size
	}
	p := d.bytes[:n:n]
	d.bytes = d.bytes[n:]
	copy(p, body)
	return p
}

// newStrings returns a []string of length n.
func (d *EventDecoder) newStrings(n int) []string {
	if d == nil || n > 16 {
		return make([]string, n)
	}
	if len(d.strs) < n {
		d.strs = make([]string, 64)
	}
	s := d.strs[:n:n]
	d.strs = d.strs[n:]
	return s
}

func (d *EventDecoder) newRetryPolicy() *RetryPolicy {
	if d == nil {
		return new(RetryPolicy)
	}
	return d.policy.alloc()
}

// newAttrs returns zero attributes of type t (nil for an unknown type), and
// the same value as a fielder.
func (d *EventDecoder) newAttrs(t EventType) (Attributes, fielder) {
	if d != nil {
		switch t {
		case TypeActivityScheduled:
			a := d.scheduled.alloc()
			return a, a
		case TypeActivityStarted:
			a := d.started.alloc()
			return a, a
		case TypeActivityCompleted:
			a := d.completed.alloc()
			return a, a
		case TypeWorkflowTaskCompleted:
			a := d.taskDone.alloc()
			return a, a
		case TypeTimerStarted:
			a := d.timer.alloc()
			return a, a
		case TypeTimerFired:
			a := d.fired.alloc()
			return a, a
		case TypeSignalReceived:
			a := d.signal.alloc()
			return a, a
		case TypeMarkerRecorded:
			a := d.marker.alloc()
			return a, a
		}
	}
	a := NewAttributes(t)
	if a == nil {
		return nil, nil
	}
	f, ok := a.(fielder)
	if !ok {
		return nil, nil
	}
	return a, f
}
