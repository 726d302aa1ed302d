package sdk

import (
	"slices"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Context is the workflow's context: it carries the run, the activity and
// child-workflow options, values, and cancellation. It is not a
// context.Context — workflow code must not use Go's contexts, goroutines,
// channels or clocks, only the SDK's.
type Context interface {
	// Done returns a channel that is closed when the context is canceled.
	// Use it with a Selector or ReceiveAsync.
	Done() ReceiveChannel[struct{}]
	// Err returns a *CanceledError once the context is canceled, else nil.
	Err() error
	// Value returns the value stored under key by WithValue, or nil.
	Value(key any) any

	impl() *wfContext
}

// CancelFunc cancels a context made by WithCancel and everything started
// with it: pending activities get a cancel request, pending timers are
// canceled, Await and channel operations on it return.
type CancelFunc func()

// ActivityOptions configure the activities a context starts. Zero values
// take the engine's defaults; TaskQueue defaults to the workflow's.
type ActivityOptions struct {
	TaskQueue              string
	ScheduleToCloseTimeout time.Duration
	ScheduleToStartTimeout time.Duration
	StartToCloseTimeout    time.Duration
	HeartbeatTimeout       time.Duration
	RetryPolicy            *RetryPolicy
	// ActivityID overrides the deterministic id ("1", "2", …). Every
	// activity started with the context gets it, so set it per call.
	ActivityID string
	// ShareResult asks the engine to store the result as a payload chunk
	// (when larger than api.ShareResultMinBytes), which the workflow then
	// receives, as a history.Payload, in the form Payload{Ref: RootRef,
	// Data}: a payload of its own may reference it (Payload.StoredRef)
	// instead of copying it. The agent loop sets it on tool calls.
	ShareResult bool
	// LimitKey names the limits the activity counts against beside its
	// type: keys separated by commas, such as "openai/gpt-4o,tenant/acme"
	// (a model provider, a model, a tenant). The server limits how many
	// activities of a key are in flight and start per second
	// (`cairn task-queue limit`) and serves the keys of a queue in turn.
	// Changing it does not affect replay.
	LimitKey string
}

// RetryPolicy governs activity retries (see history.RetryPolicy).
type RetryPolicy = history.RetryPolicy

// ChildWorkflowOptions configure the child workflows a context starts.
type ChildWorkflowOptions struct {
	// WorkflowID defaults to "<parent workflow id>/<parent run id>/<n>".
	WorkflowID string
	// TaskQueue defaults to the parent's.
	TaskQueue         string
	ExecutionTimeout  time.Duration
	RunTimeout        time.Duration
	TaskTimeout       time.Duration
	ParentClosePolicy history.ParentClosePolicy
	ReusePolicy       api.ReusePolicy
}

type wfContext struct {
	e         *Execution
	scope     *cancelScope
	actOpts   *ActivityOptions
	childOpts *ChildWorkflowOptions
	vals      *valueNode
}

type valueNode struct {
	key, val any
	next     *valueNode
}

func (c *wfContext) impl() *wfContext { return c }

func (c *wfContext) Done() ReceiveChannel[struct{}] { return c.scope.doneChannel() }

func (c *wfContext) Err() error {
	if c.scope.canceled {
		return &CanceledError{Message: "context canceled"}
	}
	return nil
}

func (c *wfContext) Value(key any) any {
	for n := c.vals; n != nil; n = n.next {
		if n.key == key {
			return n.val
		}
	}
	return nil
}

func (c *wfContext) with() *wfContext {
	cp := *c
	return &cp
}

// mustCtx returns ctx's implementation; a nil ctx is a programming error.
func mustCtx(ctx Context) *wfContext {
	if ctx == nil {
		panic("sdk: nil workflow Context")
	}
	return ctx.impl()
}

// WithActivityOptions returns a copy of ctx whose activities use opts.
func WithActivityOptions(ctx Context, opts ActivityOptions) Context {
	c := mustCtx(ctx).with()
	if opts.RetryPolicy != nil {
		rp := *opts.RetryPolicy
		rp.NonRetryableErrorTypes = slices.Clone(rp.NonRetryableErrorTypes)
		opts.RetryPolicy = &rp
	}
	c.actOpts = &opts
	return c
}

// GetActivityOptions returns the activity options ctx carries.
func GetActivityOptions(ctx Context) ActivityOptions {
	if o := mustCtx(ctx).actOpts; o != nil {
		return *o
	}
	return ActivityOptions{}
}

// WithChildWorkflowOptions returns a copy of ctx whose child workflows use
// opts.
func WithChildWorkflowOptions(ctx Context, opts ChildWorkflowOptions) Context {
	c := mustCtx(ctx).with()
	c.childOpts = &opts
	return c
}

// WithValue returns a copy of ctx carrying val under key.
func WithValue(ctx Context, key, val any) Context {
	c := mustCtx(ctx).with()
	c.vals = &valueNode{key: key, val: val, next: c.vals}
	return c
}

// WithCancel returns a copy of ctx with its own cancellation, canceled when
// cancel is called or when ctx is canceled.
func WithCancel(ctx Context) (Context, CancelFunc) {
	p, _ := mutating(ctx)
	c := p.with()
	child := newCancelScope(c.e, c.scope)
	c.scope = child
	return c, child.cancel
}

// NewDisconnectedContext returns a copy of ctx that is not canceled when ctx
// is: use it for cleanup after cancellation (e.g. a compensating activity).
func NewDisconnectedContext(ctx Context) (Context, CancelFunc) {
	c := mustCtx(ctx).with()
	c.scope = newCancelScope(c.e, nil)
	return c, c.scope.cancel
}

// cancelScope is a node of the cancellation tree. Listeners (child scopes,
// pending activities and timers) run in registration order when it is
// canceled, so the commands they issue are deterministic.
type cancelScope struct {
	e         *Execution
	parent    *cancelScope
	parentKey uint64
	canceled  bool
	listeners map[uint64]cancelListener
	done      *channelImpl[struct{}]
}

// cancelListener is told when its scope is canceled: a child scope, a
// pending activity, timer or child workflow.
type cancelListener interface{ onScopeCanceled() }

func (s *cancelScope) onScopeCanceled() { s.cancel() }

func newCancelScope(e *Execution, parent *cancelScope) *cancelScope {
	s := &cancelScope{e: e, parent: parent}
	if parent != nil {
		if parent.canceled {
			s.canceled = true
		} else {
			s.parentKey = parent.onCancel(s)
		}
	}
	return s
}

// onCancel registers l to be told when the scope is canceled and returns a
// key for removeListener. It returns 0 (and does not register) when the
// scope is already canceled.
func (s *cancelScope) onCancel(l cancelListener) uint64 {
	if s.canceled {
		return 0
	}
	s.e.listenerSeq++
	if s.listeners == nil {
		s.listeners = map[uint64]cancelListener{}
	}
	s.listeners[s.e.listenerSeq] = l
	return s.e.listenerSeq
}

func (s *cancelScope) removeListener(key uint64) {
	if key != 0 {
		delete(s.listeners, key)
	}
}

func (s *cancelScope) cancel() {
	if s.canceled {
		return
	}
	s.canceled = true
	if s.parent != nil {
		s.parent.removeListener(s.parentKey)
	}
	if s.done != nil {
		s.done.Close()
	}
	keys := make([]uint64, 0, len(s.listeners))
	for k := range s.listeners {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if l, ok := s.listeners[k]; ok {
			delete(s.listeners, k)
			l.onScopeCanceled()
		}
	}
}

func (s *cancelScope) doneChannel() ReceiveChannel[struct{}] {
	if s.done == nil {
		s.done = newChannel[struct{}](s.e, "done", 0)
		if s.canceled {
			s.done.Close()
		}
	}
	return s.done
}
