package sdk

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"

	"github.com/cairnflow/cairn/history"
)

// ErrInvalidRegistration is wrapped by every registration error.
var ErrInvalidRegistration = errors.New("sdk: invalid registration")

// RegisterOptions names a workflow at registration. An empty Name takes the
// function's name without its package ("PayInvoice").
type RegisterOptions struct {
	Name string
}

// RegisterActivityOptions declare an activity at registration.
//
// The worker's user-facing options (activities.Options) translate into this
// struct; the registry only needs what workflow code sends with each
// ScheduleActivity command.
type RegisterActivityOptions struct {
	// Name overrides the activity type name; empty takes the function's
	// name without its package ("SendPayment").
	Name string
	// Effect says what a lost lease or unknown outcome means (default Read).
	Effect history.EffectClass
	// BusinessKey, when set, identifies the logical action instead of the
	// canonical encoding of the input: the idempotency key is derived from
	// it. Accepted shapes, where I is the activity's input type:
	//	func(I) (string, error)
	//	func(I) string
	//	func(any) (string, error)
	// An empty key is an error.
	BusinessKey any
	// HasReconcile says the activity declares a Reconcile lookup the engine
	// may run when an attempt's outcome is unknown.
	HasReconcile bool
	// Metered says the activity reports usage (a model call) and counts
	// against the run's budget.
	Metered bool
}

// Registry holds workflow and activity definitions by name. It is shared by
// workers, executions and replayers; register everything before use. It is
// safe for concurrent use.
type Registry struct {
	mu         sync.RWMutex
	workflows  map[string]*WorkflowDefinition
	activities map[string]*ActivityDefinition
	// names maps a function's entry PC to its registered name, so that
	// ExecuteActivity(ctx, fn, …) finds a renamed activity.
	names map[uintptr]string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{
		workflows:  map[string]*WorkflowDefinition{},
		activities: map[string]*ActivityDefinition{},
		names:      map[uintptr]string{},
	}
}

// WorkflowDefinition is a registered workflow function.
type WorkflowDefinition struct {
	name    string
	fn      reflect.Value
	inType  reflect.Type // nil: no input
	outType reflect.Type // nil: no result
}

// Name returns the workflow type name.
func (d *WorkflowDefinition) Name() string { return d.name }

// InputType returns the type of the workflow's input, or nil.
func (d *WorkflowDefinition) InputType() reflect.Type { return d.inType }

// ResultType returns the type of the workflow's result, or nil.
func (d *WorkflowDefinition) ResultType() reflect.Type { return d.outType }

// ActivityDefinition is a registered activity function with its options.
type ActivityDefinition struct {
	name    string
	fn      reflect.Value
	inType  reflect.Type // nil: no input
	outType reflect.Type // nil: no result
	opts    RegisterActivityOptions
	key     func(any) (string, error)
}

// Name returns the activity type name.
func (d *ActivityDefinition) Name() string { return d.name }

// Effect returns the declared effect class.
func (d *ActivityDefinition) Effect() history.EffectClass { return d.opts.Effect }

// Metered reports whether the activity is declared metered (it reports
// usage and counts against the run's budget).
func (d *ActivityDefinition) Metered() bool { return d.opts.Metered }

// HasReconcile reports whether the activity declares a Reconcile lookup.
func (d *ActivityDefinition) HasReconcile() bool { return d.opts.HasReconcile }

// Options returns the options the activity was registered with.
func (d *ActivityDefinition) Options() RegisterActivityOptions { return d.opts }

// Func returns the activity function as registered.
func (d *ActivityDefinition) Func() any { return d.fn.Interface() }

// InputType returns the type of the activity's input, or nil.
func (d *ActivityDefinition) InputType() reflect.Type { return d.inType }

// ResultType returns the type of the activity's result, or nil.
func (d *ActivityDefinition) ResultType() reflect.Type { return d.outType }

// BusinessKey returns the declared business key for input (a value of the
// input type, or anything the converter can turn into it), and false when
// the activity declares none.
func (d *ActivityDefinition) BusinessKey(input any) (string, bool, error) {
	if d.key == nil {
		return "", false, nil
	}
	k, err := d.key(input)
	return k, true, err
}

// RawInput reports whether the activity takes its input as a raw
// history.Payload, as recorded (possibly by reference), instead of a
// decoded value.
func (d *ActivityDefinition) RawInput() bool { return d.inType == payloadType }

// Invoke decodes input, calls the activity and encodes its result. The
// activity's error is returned as is (turn it into a failure with
// ErrorToFailure); a panic is returned as a *PanicError. An activity whose
// input type is history.Payload gets input as it is.
func (d *ActivityDefinition) Invoke(ctx context.Context, conv Converter, input history.Payload) (result history.Payload, err error) {
	if conv == nil {
		conv = DefaultConverter()
	}
	args := []reflect.Value{reflect.ValueOf(ctx)}
	if d.inType == payloadType {
		args = append(args, reflect.ValueOf(input))
	} else if d.inType != nil {
		in := reflect.New(d.inType)
		if err := conv.FromPayload(input, in.Interface()); err != nil {
			return history.Payload{}, NewNonRetryableError(err.Error(), "InvalidInput")
		}
		args = append(args, in.Elem())
	}
	defer func() {
		if r := recover(); r != nil {
			err = newPanicError(r, stackOf())
		}
	}()
	out := d.fn.Call(args)
	if e := out[len(out)-1].Interface(); e != nil {
		return history.Payload{}, e.(error)
	}
	if d.outType == nil {
		return history.Payload{}, nil
	}
	if d.outType == payloadType {
		return out[0].Interface().(history.Payload), nil // a raw result: sent as it is (it may extend a chunk)
	}
	return conv.ToPayload(out[0].Interface())
}

var (
	contextType    = reflect.TypeFor[context.Context]()
	wfContextType  = reflect.TypeFor[Context]()
	errorType      = reflect.TypeFor[error]()
	stringType     = reflect.TypeFor[string]()
	anyType        = reflect.TypeFor[any]()
	payloadType    = reflect.TypeFor[history.Payload]()
	registryErrorf = func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidRegistration, fmt.Sprintf(format, args...))
	}
)

// checkSignature validates func(first[, I]) ([O,] error) and returns I and O.
func checkSignature(fn any, first reflect.Type, what string) (reflect.Value, reflect.Type, reflect.Type, error) {
	v := reflect.ValueOf(fn)
	if fn == nil || v.Kind() != reflect.Func || v.IsNil() {
		return v, nil, nil, registryErrorf("%s must be a function, got %T", what, fn)
	}
	t := v.Type()
	shape := fmt.Sprintf("func(%s[, I]) ([O,] error)", first)
	if t.IsVariadic() || t.NumIn() < 1 || t.NumIn() > 2 || t.In(0) != first {
		return v, nil, nil, registryErrorf("%s %s has signature %s; want %s", what, funcName(fn), t, shape)
	}
	if t.NumOut() < 1 || t.NumOut() > 2 || t.Out(t.NumOut()-1) != errorType {
		return v, nil, nil, registryErrorf("%s %s has signature %s; want %s (the last result must be error)", what, funcName(fn), t, shape)
	}
	var in, out reflect.Type
	if t.NumIn() == 2 {
		in = t.In(1)
	}
	if t.NumOut() == 2 {
		out = t.Out(0)
	}
	return v, in, out, nil
}

// RegisterWorkflow registers a workflow function of the shape
// func(sdk.Context[, I]) ([O,] error).
func (r *Registry) RegisterWorkflow(fn any, opts ...RegisterOptions) error {
	v, in, out, err := checkSignature(fn, wfContextType, "workflow")
	if err != nil {
		return err
	}
	var o RegisterOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	name, err := typeName(fn, o.Name)
	if err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.workflows[name]; dup {
		return registryErrorf("workflow %q is already registered", name)
	}
	r.workflows[name] = &WorkflowDefinition{name: name, fn: v, inType: in, outType: out}
	r.names[v.Pointer()] = name
	return nil
}

// RegisterActivity registers an activity function of the shape
// func(context.Context[, I]) ([O,] error) with its options.
func (r *Registry) RegisterActivity(fn any, opts ...RegisterActivityOptions) error {
	v, in, out, err := checkSignature(fn, contextType, "activity")
	if err != nil {
		return err
	}
	var o RegisterActivityOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.Effect > history.SideEffect {
		return registryErrorf("activity %s: unknown effect class %d", funcName(fn), o.Effect)
	}
	name, err := typeName(fn, o.Name)
	if err != nil {
		return err
	}
	def := &ActivityDefinition{name: name, fn: v, inType: in, outType: out, opts: o}
	if o.BusinessKey != nil {
		if def.key, err = businessKeyFunc(name, in, o.BusinessKey); err != nil {
			return err
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.activities[name]; dup {
		return registryErrorf("activity %q is already registered", name)
	}
	r.activities[name] = def
	r.names[v.Pointer()] = name
	return nil
}

// businessKeyFunc validates a BusinessKey function and returns it as
// func(any) (string, error). An input of another type than the key
// function's parameter is converted through canonical msgpack.
func businessKeyFunc(activity string, in reflect.Type, key any) (func(any) (string, error), error) {
	kv := reflect.ValueOf(key)
	kt := kv.Type()
	if kt.Kind() != reflect.Func || kt.IsVariadic() || kt.NumIn() != 1 || kt.NumOut() < 1 || kt.NumOut() > 2 ||
		kt.Out(0) != stringType || (kt.NumOut() == 2 && kt.Out(1) != errorType) {
		return nil, registryErrorf("activity %s: BusinessKey has type %s; want func(I) (string, error), func(I) string or func(any) (string, error)", activity, kt)
	}
	if in == nil {
		return nil, registryErrorf("activity %s: BusinessKey needs an activity that takes an input", activity)
	}
	pt := kt.In(0)
	if pt != anyType && !in.AssignableTo(pt) {
		return nil, registryErrorf("activity %s: BusinessKey takes %s but the activity's input is %s", activity, pt, in)
	}
	return func(input any) (key string, err error) {
		arg := reflect.ValueOf(input)
		if pt != anyType && (!arg.IsValid() || !arg.Type().AssignableTo(pt)) {
			conv := reflect.New(pt)
			p, err := DefaultConverter().ToPayload(input)
			if err == nil {
				err = DefaultConverter().FromPayload(p, conv.Interface())
			}
			if err != nil {
				return "", fmt.Errorf("sdk: business key of %s: input %T is not a %s: %w", activity, input, pt, err)
			}
			arg = conv.Elem()
		}
		if !arg.IsValid() {
			arg = reflect.Zero(pt)
		}
		defer func() {
			if r := recover(); r != nil {
				err = fmt.Errorf("sdk: business key of %s panicked: %v", activity, r)
			}
		}()
		out := kv.Call([]reflect.Value{arg})
		if len(out) == 2 && !out[1].IsNil() {
			return "", out[1].Interface().(error)
		}
		k := out[0].String()
		if k == "" {
			return "", fmt.Errorf("sdk: business key of %s is empty", activity)
		}
		return k, nil
	}, nil
}

// Workflow returns the workflow registered under name.
func (r *Registry) Workflow(name string) (*WorkflowDefinition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.workflows[name]
	return d, ok
}

// Activity returns the activity registered under name.
func (r *Registry) Activity(name string) (*ActivityDefinition, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	d, ok := r.activities[name]
	return d, ok
}

// WorkflowTypes returns the registered workflow names, sorted.
func (r *Registry) WorkflowTypes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.workflows))
	for n := range r.workflows {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ActivityTypes returns the registered activity names, sorted.
func (r *Registry) ActivityTypes() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.activities))
	for n := range r.activities {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// nameOf returns the registered name of fn, or the name derived from the
// function itself.
func (r *Registry) nameOf(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() == reflect.String {
		return v.String()
	}
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	r.mu.RLock()
	name, ok := r.names[v.Pointer()]
	r.mu.RUnlock()
	if ok {
		return name
	}
	return funcName(fn)
}

// typeName returns override, or the function's derived name; anonymous
// functions need an explicit name.
func typeName(fn any, override string) (string, error) {
	if override != "" {
		return override, nil
	}
	name := funcName(fn)
	if name == "" || isAnonymous(name) {
		return "", registryErrorf("%s is an anonymous function: give it a Name", runtimeName(fn))
	}
	return name, nil
}

func isAnonymous(name string) bool {
	rest, ok := strings.CutPrefix(name, "func")
	if !ok || rest == "" {
		return false
	}
	for _, c := range rest {
		if (c < '0' || c > '9') && c != '.' {
			return false
		}
	}
	return true
}

var funcNames sync.Map // uintptr → string

// funcName returns fn's name without its package path and package:
// "github.com/acme/pay.SendPayment" → "SendPayment", a method value
// "pay.(*Client).Send-fm" → "Send".
func funcName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return ""
	}
	pc := v.Pointer()
	if n, ok := funcNames.Load(pc); ok {
		return n.(string)
	}
	full := runtimeName(fn)
	name := strings.TrimSuffix(full, "-fm")
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	name = strings.TrimSuffix(name, "[...]")
	// The last dot-separated element: the function, the method, or the
	// "funcN" of a closure (which registration refuses without a Name).
	if i := strings.LastIndexByte(name, '.'); i >= 0 {
		name = name[i+1:]
	}
	funcNames.Store(pc, name)
	return name
}

func runtimeName(fn any) string {
	v := reflect.ValueOf(fn)
	if v.Kind() != reflect.Func || v.IsNil() {
		return fmt.Sprintf("%T", fn)
	}
	f := runtime.FuncForPC(v.Pointer())
	if f == nil {
		return fmt.Sprintf("%T", fn)
	}
	return f.Name()
}
