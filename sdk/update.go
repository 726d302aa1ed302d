package sdk

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// ErrUnknownUpdate: the run has no handler for an update's name (the
// update is rejected).
var ErrUnknownUpdate = errors.New("sdk: unknown update")

// errWorkflowClosing rejects an update that arrives after the workflow
// function returned: its handler would never run.
var errWorkflowClosing = errors.New("sdk: the workflow is closing: no update handler would run")

// UpdateHandlerOptions configure an update handler (SetUpdateHandler).
type UpdateHandlerOptions struct {
	// Validator, when set, decides whether an update is accepted before
	// anything is recorded: a function func(Context[, I]) error taking
	// the handler's input type. It runs against the run's current state
	// on a worker, outside the workflow's coroutines: it must only read
	// workflow state, never block or issue commands (activities, timers,
	// signals, side effects). Returning an error — or panicking, or
	// trying to block or issue a command — rejects the update: the caller
	// gets the error's message and history is unchanged. Nil accepts
	// every update.
	Validator any
}

// updateHandler is a registered update handler.
type updateHandler struct {
	fn        reflect.Value
	inType    reflect.Type
	outType   reflect.Type
	validator reflect.Value // invalid: none
}

// SetUpdateHandler registers handler for the updates named name,
// replacing any earlier one. handler has the shape
// func(Context[, I]) ([O,] error); it runs as workflow code, in its own
// coroutine (like Go), once the update is accepted and recorded, and
// may do anything workflow code does: run activities, sleep, wait. What
// it returns is recorded (history.WorkflowUpdateCompleted) and answered
// to the caller; an error it returns fails the update (not the run).
//
// Register handlers at the start of the workflow function, before it
// blocks: an update is validated against the run's state and its handler
// looked up when the update's turn comes. A run whose workflow function
// returns (or continues as new) while a handler still runs closes
// without that update's result: wait with
// Await(ctx, func() bool { return AllHandlersFinished(ctx) }) first.
func SetUpdateHandler(ctx Context, name string, handler any, opts UpdateHandlerOptions) error {
	_, e := mutating(ctx) // not from a query handler or a validator
	if name == "" {
		return errors.New("sdk: an update handler needs a name")
	}
	v, in, out, err := checkSignature(handler, wfContextType, "update handler "+name)
	if err != nil {
		return err
	}
	h := &updateHandler{fn: v, inType: in, outType: out}
	if opts.Validator != nil {
		vv := reflect.ValueOf(opts.Validator)
		t := vv.Type()
		want := "func(sdk.Context) error"
		if in != nil {
			want = fmt.Sprintf("func(sdk.Context, %s) error", in)
		}
		if vv.Kind() != reflect.Func || vv.IsNil() || t.IsVariadic() || t.NumIn() < 1 || t.In(0) != wfContextType ||
			(in == nil && t.NumIn() != 1) || (in != nil && (t.NumIn() != 2 || t.In(1) != in)) || t.NumOut() != 1 || t.Out(0) != errorType {
			return fmt.Errorf("sdk: the validator of update %q has signature %T; want %s", name, opts.Validator, want)
		}
		h.validator = vv
	}
	e.updates[name] = h
	return nil
}

// AllHandlersFinished reports whether every accepted update's handler has
// returned. Wait on it before the workflow function returns, so that no
// accepted update is left without its result:
//
//	_ = sdk.Await(ctx, func() bool { return sdk.AllHandlersFinished(ctx) })
func AllHandlersFinished(ctx Context) bool {
	return mustCtx(ctx).e.updatesRunning == 0
}

// ValidateUpdate decides whether the run accepts the update name with
// input args, from its current state, without changing it: rejected is
// the validator's error (or ErrUnknownUpdate, or a *PanicError from a
// validator that panicked or tried to block or issue a command); nil
// accepts. err is set when the Execution cannot answer (closed, broken).
func (e *Execution) ValidateUpdate(name string, args history.Payload) (rejected, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.closed:
		return nil, ErrClosed
	case e.broken != nil:
		return nil, e.broken
	}
	if e.workflowClosed || e.rootReturned {
		return errWorkflowClosing, nil
	}
	h, ok := e.updates[name]
	if !ok {
		names := make([]string, 0, len(e.updates))
		for n := range e.updates {
			names = append(names, n)
		}
		slices.Sort(names)
		known := "none"
		if len(names) > 0 {
			known = strings.Join(names, ", ")
		}
		return fmt.Errorf("%w %q (the run has handlers for: %s)", ErrUnknownUpdate, name, known), nil
	}
	if !h.validator.IsValid() {
		return nil, nil
	}
	args2 := []reflect.Value{reflect.ValueOf(Context(&wfContext{e: e, scope: e.rootScope}))}
	if h.inType != nil {
		v := reflect.New(h.inType)
		if err := e.conv.FromPayload(args, v.Interface()); err != nil {
			return fmt.Errorf("sdk: update %q: decode input: %w", name, err), nil
		}
		args2 = append(args2, v.Elem())
	}
	e.inQuery = true
	defer func() {
		e.inQuery = false
		if r := recover(); r != nil {
			rejected = newPanicError(r, stackOf())
		}
	}()
	out := h.validator.Call(args2)
	rejected, _ = out[0].Interface().(error)
	return rejected, nil
}

// startUpdate runs the handler of an accepted update in a coroutine of
// its own (created in the order of the events, so replay is exact).
func (e *Execution) startUpdate(a *history.WorkflowUpdateAccepted) {
	e.updatesRunning++
	id, name, input := a.UpdateID, a.Name, a.Input
	e.spawn("update "+name+" "+id, func() { e.runUpdate(id, name, input) })
}

func (e *Execution) runUpdate(id, name string, input history.Payload) {
	h, ok := e.updates[name]
	if !ok {
		// Accepted while the handler was registered, but this code does
		// not register it (by the time the update's turn comes).
		e.updateDone(id, nil, nil, NewNonRetryableError(fmt.Sprintf("no handler is registered for update %q", name), "UnknownUpdate"))
		return
	}
	args := []reflect.Value{reflect.ValueOf(Context(&wfContext{e: e, scope: e.rootScope}))}
	if h.inType != nil {
		v := reflect.New(h.inType)
		if err := e.conv.FromPayload(input, v.Interface()); err != nil {
			e.updateDone(id, nil, nil, NewNonRetryableError(fmt.Sprintf("update %s: %v", name, err), "InvalidInput"))
			return
		}
		args = append(args, v.Elem())
	}
	out := h.fn.Call(args)
	err, _ := out[len(out)-1].Interface().(error)
	var result any
	if h.outType != nil {
		result = out[0].Interface()
	}
	e.updateDone(id, h, result, err)
}

// updateDone turns a handler's return into the CompleteUpdate command.
func (e *Execution) updateDone(id string, h *updateHandler, result any, err error) {
	if e.closing.Load() {
		return // unwinding: decide nothing
	}
	e.updatesRunning--
	c := &api.CompleteUpdateCommand{UpdateID: id}
	if err == nil && h != nil && h.outType != nil {
		p, encErr := e.conv.ToPayload(result)
		if encErr != nil {
			err = fmt.Errorf("sdk: update %s: encode result: %w", id, encErr)
		} else {
			c.Result = p
		}
	}
	if err != nil {
		f := ErrorToFailure(err)
		c.Failure = &f
	}
	e.addCommand(api.Command{Type: api.CommandCompleteUpdate, CompleteUpdate: c}, nil)
}
