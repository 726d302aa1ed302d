package sdk

import (
	"fmt"

	"github.com/cairnflow/cairn/history"
)

// Awaitable is the untyped side of a Future, for Selector.AddFuture.
type Awaitable interface {
	// IsReady reports whether Get would return without blocking.
	IsReady() bool
	futureState() *futureState
}

// Future is the result of an asynchronous operation (an activity, a child
// workflow, a timer). Get blocks the calling coroutine until it is ready.
type Future[T any] interface {
	Awaitable
	// Get waits for the result. It does not return early when ctx is
	// canceled: the operation itself resolves with a *CanceledError once
	// its cancellation is done.
	Get(ctx Context) (T, error)
}

// Settable completes a Future made by NewFuture.
type Settable[T any] interface {
	// Set completes the future with a value or an error; later calls are
	// ignored.
	Set(v T, err error)
	// SetValue is Set(v, nil).
	SetValue(v T)
	// SetError is Set(zero, err).
	SetError(err error)
}

// futureState is the untyped state every future shares: either an encoded
// payload (decoded by Get into the future's type) or a value, or an error.
type futureState struct {
	ready      bool
	hasPayload bool
	payload    history.Payload
	value      any
	err        error
	owner      readyListener // told once when the future resolves
}

// readyListener is told when a future resolves (to stop listening for
// cancellation).
type readyListener interface{ onFutureReady() }

func (s *futureState) resolve(p history.Payload, err error) {
	if s.ready {
		return
	}
	s.ready, s.payload, s.hasPayload, s.err = true, p, err == nil, err
	if o := s.owner; o != nil {
		s.owner = nil
		o.onFutureReady()
	}
}

func (s *futureState) setValue(v any, err error) {
	if s.ready {
		return
	}
	s.ready, s.value, s.err = true, v, err
	if o := s.owner; o != nil {
		s.owner = nil
		o.onFutureReady()
	}
}

type future[T any] struct {
	e       *Execution
	st      futureState
	decoded bool
	val     T
	decErr  error
}

func newFuture[T any](e *Execution) *future[T] { return &future[T]{e: e} }

func (f *future[T]) IsReady() bool             { return f.st.ready }
func (f *future[T]) futureState() *futureState { return &f.st }

func (f *future[T]) Get(ctx Context) (T, error) {
	if !f.st.ready {
		f.e.awaitFuture(&f.st)
	}
	var zero T
	if f.st.err != nil {
		return zero, f.st.err
	}
	if !f.decoded {
		f.decoded = true
		switch {
		case f.st.hasPayload:
			if p, ok := any(&f.val).(*history.Payload); ok {
				*p = f.st.payload // a raw result, as recorded
			} else if err := f.e.conv.FromPayload(f.st.payload, &f.val); err != nil {
				f.decErr = err
			}
		case f.st.value != nil:
			v, ok := f.st.value.(T)
			if !ok {
				f.decErr = fmt.Errorf("sdk: future holds %T, not %T", f.st.value, zero)
			}
			f.val = v
		}
	}
	if f.decErr != nil {
		return zero, f.decErr
	}
	return f.val, nil
}

func (f *future[T]) Set(v T, err error) {
	if f.e.inQuery {
		panic(errQueryMutation)
	}
	if err != nil {
		f.st.setValue(nil, err)
		return
	}
	f.st.setValue(v, nil)
}
func (f *future[T]) SetValue(v T)       { f.Set(v, nil) }
func (f *future[T]) SetError(err error) { var zero T; f.Set(zero, err) }

// NewFuture returns a future and its setter, to hand results between
// coroutines.
func NewFuture[T any](ctx Context) (Future[T], Settable[T]) {
	f := newFuture[T](mustCtx(ctx).e)
	return f, f
}

func readyFuture[T any](e *Execution, err error) *future[T] {
	f := newFuture[T](e)
	f.st.setValue(nil, err)
	return f
}

// Receivable is the untyped side of a channel, for Selector.AddReceive.
type Receivable interface {
	// Name returns the channel's name (the signal name for signal
	// channels).
	Name() string
	// canReceive: a Receive would not block (a value is there, a sender
	// waits, or the channel is closed).
	canReceive() bool
}

// ReceiveChannel is the receiving side of a workflow channel.
type ReceiveChannel[T any] interface {
	Receivable
	// Receive blocks until a value arrives and returns it; on a closed,
	// drained channel it returns the zero value.
	Receive(ctx Context) T
	// ReceiveOK is Receive that also reports false on a closed, drained
	// channel (like v, ok := <-ch).
	ReceiveOK(ctx Context) (T, bool)
	// ReceiveAsync returns a value if one is there, without blocking.
	ReceiveAsync() (T, bool)
	// Len returns the number of buffered values.
	Len() int
}

// Channel is a workflow channel: the only channel workflow coroutines may
// block on.
type Channel[T any] interface {
	ReceiveChannel[T]
	// Send blocks until the value is buffered or taken by a receiver.
	// Sending on a closed channel panics.
	Send(ctx Context, v T)
	// SendAsync sends without blocking and reports whether it could.
	SendAsync(v T) bool
	// Close closes the channel; receivers drain what is buffered.
	Close()
}

type sendReq[T any] struct {
	v    T
	done bool
}

type channelImpl[T any] struct {
	e       *Execution
	name    string
	size    int
	buf     []T
	senders []*sendReq[T]
	closed  bool
}

func newChannel[T any](e *Execution, name string, size int) *channelImpl[T] {
	return &channelImpl[T]{e: e, name: name, size: size}
}

// NewChannel returns an unbuffered workflow channel.
func NewChannel[T any](ctx Context) Channel[T] { return newChannel[T](mustCtx(ctx).e, "", 0) }

// NewNamedChannel returns an unbuffered workflow channel with a name shown
// in stack traces and errors.
func NewNamedChannel[T any](ctx Context, name string) Channel[T] {
	return newChannel[T](mustCtx(ctx).e, name, 0)
}

// NewBufferedChannel returns a workflow channel buffering up to size values.
func NewBufferedChannel[T any](ctx Context, size int) Channel[T] {
	return newChannel[T](mustCtx(ctx).e, "", size)
}

func (c *channelImpl[T]) Name() string { return c.name }
func (c *channelImpl[T]) Len() int     { return len(c.buf) }

func (c *channelImpl[T]) canReceive() bool {
	return len(c.buf) > 0 || len(c.senders) > 0 || c.closed
}

func (c *channelImpl[T]) ReceiveAsync() (T, bool) {
	if c.e.inQuery {
		panic(errQueryMutation)
	}
	if len(c.buf) > 0 {
		v := c.buf[0]
		var zero T
		c.buf[0] = zero
		c.buf = c.buf[1:]
		// A blocked sender's value moves into the freed buffer slot.
		if len(c.senders) > 0 {
			s := c.senders[0]
			c.senders = c.senders[1:]
			c.buf = append(c.buf, s.v)
			s.done = true
		}
		return v, true
	}
	if len(c.senders) > 0 {
		s := c.senders[0]
		c.senders = c.senders[1:]
		s.done = true
		return s.v, true
	}
	var zero T
	return zero, false
}

func (c *channelImpl[T]) ReceiveOK(ctx Context) (T, bool) {
	if !c.canReceive() {
		c.e.block(c.canReceive)
	}
	if v, ok := c.ReceiveAsync(); ok {
		return v, true
	}
	var zero T
	return zero, false // closed
}

func (c *channelImpl[T]) Receive(ctx Context) T {
	v, _ := c.ReceiveOK(ctx)
	return v
}

func (c *channelImpl[T]) SendAsync(v T) bool {
	if c.e.inQuery {
		panic(errQueryMutation)
	}
	if c.closed {
		panic(fmt.Sprintf("sdk: send on closed channel %q", c.name))
	}
	if len(c.buf) < c.size {
		c.buf = append(c.buf, v)
		return true
	}
	return false
}

func (c *channelImpl[T]) Send(ctx Context, v T) {
	if c.SendAsync(v) {
		return
	}
	s := &sendReq[T]{v: v}
	c.senders = append(c.senders, s)
	c.e.block(func() bool { return s.done || c.closed })
	if !s.done {
		panic(fmt.Sprintf("sdk: send on closed channel %q", c.name))
	}
}

func (c *channelImpl[T]) Close() {
	if c.e.inQuery {
		panic(errQueryMutation)
	}
	c.closed = true
}

// signalChannel buffers a signal's payloads until workflow code receives
// them; GetSignalChannel gives a typed view.
type signalChannel struct {
	name string
	buf  []history.Payload
}

type signalView[T any] struct {
	e  *Execution
	ch *signalChannel
}

func (s signalView[T]) Name() string     { return s.ch.name }
func (s signalView[T]) Len() int         { return len(s.ch.buf) }
func (s signalView[T]) canReceive() bool { return len(s.ch.buf) > 0 }

// ReceiveAsync pops a signal if one is buffered. A payload that does not
// decode into T panics (the task fails and is retried: fix the code or the
// signal's type).
func (s signalView[T]) ReceiveAsync() (T, bool) {
	var v T
	if s.e.inQuery {
		panic(errQueryMutation)
	}
	if len(s.ch.buf) == 0 {
		return v, false
	}
	p := s.ch.buf[0]
	s.ch.buf[0] = history.Payload{}
	s.ch.buf = s.ch.buf[1:]
	if err := s.e.conv.FromPayload(p, &v); err != nil {
		panic(fmt.Errorf("sdk: signal %q: %w", s.ch.name, err))
	}
	return v, true
}

func (s signalView[T]) ReceiveOK(ctx Context) (T, bool) {
	if len(s.ch.buf) == 0 {
		s.e.block(s.canReceive)
	}
	return s.ReceiveAsync()
}

func (s signalView[T]) Receive(ctx Context) T {
	v, _ := s.ReceiveOK(ctx)
	return v
}

// Selector waits on several futures and channels at once, like a select
// statement. Cases are checked in the order they were added; the first
// ready one runs.
type Selector interface {
	// AddFuture adds a case that runs fn once f is ready (at most once per
	// selector). Read the result in fn with f.Get.
	AddFuture(f Awaitable, fn func()) Selector
	// AddReceive adds a case that runs fn when c has a value (more=true) or
	// is closed and drained (more=false). fn must receive from c.
	AddReceive(c Receivable, fn func(more bool)) Selector
	// AddDefault makes Select run fn instead of blocking when no case is
	// ready.
	AddDefault(fn func())
	// Select blocks until a case is ready and runs it.
	Select(ctx Context)
	// HasPending reports whether a case is ready now.
	HasPending() bool
}

type selectCase struct {
	fut      *futureState
	fired    bool
	onFuture func()
	ch       Receivable
	onRecv   func(more bool)
}

type selector struct {
	e     *Execution
	cases []*selectCase
	dflt  func()
}

// NewSelector returns an empty selector.
func NewSelector(ctx Context) Selector { return &selector{e: mustCtx(ctx).e} }

func (s *selector) AddFuture(f Awaitable, fn func()) Selector {
	s.cases = append(s.cases, &selectCase{fut: f.futureState(), onFuture: fn})
	return s
}

func (s *selector) AddReceive(c Receivable, fn func(more bool)) Selector {
	s.cases = append(s.cases, &selectCase{ch: c, onRecv: fn})
	return s
}

func (s *selector) AddDefault(fn func()) { s.dflt = fn }

func (s *selector) ready() *selectCase {
	for _, c := range s.cases {
		if c.fut != nil {
			if c.fut.ready && !c.fired {
				return c
			}
		} else if c.ch.canReceive() {
			return c
		}
	}
	return nil
}

func (s *selector) HasPending() bool { return s.ready() != nil }

func (s *selector) Select(ctx Context) {
	c := s.ready()
	if c == nil {
		if s.dflt != nil {
			s.dflt()
			return
		}
		s.e.block(func() bool { return s.ready() != nil })
		c = s.ready()
	}
	if c.fut != nil {
		c.fired = true
		if c.onFuture != nil {
			c.onFuture()
		}
		return
	}
	if c.onRecv != nil {
		more := true
		if cl, ok := c.ch.(interface{ drainedClosed() bool }); ok && cl.drainedClosed() {
			more = false
		}
		c.onRecv(more)
	}
}

func (c *channelImpl[T]) drainedClosed() bool {
	return c.closed && len(c.buf) == 0 && len(c.senders) == 0
}
