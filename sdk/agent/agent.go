// Package agent is the agent loop for workflow code: a model call, the
// tool calls it asks for run as activities (concurrently when it asks for
// several), their results appended to the transcript, and again — until a
// final answer, the turn limit, or the run's budget.
//
//	func PayInvoice(ctx sdk.Context, inv Invoice) (string, error) {
//		a := agent.New(ctx, agent.Options{
//			Model:  "gpt-4o-mini",
//			System: "You pay approved invoices.",
//			Tools: []agent.Tool{
//				agent.NewTool(ReadInvoice, "Read an invoice by id"),
//				agent.NewTool(SendPayment, "Pay an invoice", agent.RequireApproval()),
//			},
//			Budget: history.Budget{MaxTokens: 50_000, MaxCostUSD: 1},
//		})
//		res, err := a.Run(ctx, "Pay invoice "+inv.ID)
//		return res.Final, err
//	}
//
// Every model call is the metered activity llm.Chat (activities/llm),
// whose input is the transcript stored as content-addressed chunks: each
// turn records only its new messages. Every tool is an activity, with the
// effect class it was registered with on the worker (activities.Options),
// so a resumed or replayed turn lands on the same idempotency keys and a
// side-effecting tool is guarded like any SideEffect activity. A tool
// declared with RequireApproval waits for a person's signal (Approve) before
// it runs; a rejected call, an unknown tool or invalid arguments are
// reported back to the model as the tool's result. The run's budget
// (Options.Budget, enforced by the engine) pauses the run when crossed;
// stopping it ends Run with ErrBudgetExceeded.
package agent

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// Sentinel errors of Run.
var (
	// ErrMaxTurns: the model was still asking for tools after MaxTurns
	// model calls.
	ErrMaxTurns = errors.New("agent: turn limit reached")
	// ErrBudgetExceeded: a person stopped the run's held model call
	// (cairn workflow budget --stop).
	ErrBudgetExceeded = errors.New("agent: budget exceeded")
)

// ModelActivity is the activity type of model calls (llm.ActivityName).
const ModelActivity = "llm.Chat"

// ApprovalSignal is the signal that carries approvals (an Approval), unless
// Options.ApprovalSignal names another.
const ApprovalSignal = history.DefaultApprovalSignal

// Options configure an Agent. Zero values take the defaults in the
// comments.
type Options struct {
	// Model names the model (default: the model activity's Config.Model).
	Model string
	// Provider names the model's provider for the server's limits
	// (default "model"): a model call's limit key is "Provider/Model"
	// ("openai/gpt-4o"; the provider alone when Model is empty), so that
	// `cairn task-queue limit QUEUE --key openai/gpt-4o --max 8` bounds
	// the calls in flight to it across every worker.
	Provider string
	// LimitKey adds keys, comma-separated, to the limit key of the agent's
	// model and tool calls: a tenant ("tenant/acme"), so that one
	// tenant's agents cannot take every model slot (`--key 'tenant/*'`
	// limits each tenant apart; the queue serves keys in turn).
	LimitKey string
	// System is the system prompt.
	System string
	// Tools the model may call.
	Tools []Tool
	// MaxTurns bounds the model calls of one Run (default 20); a resumed
	// agent (Resume) counts those of the runs before too.
	MaxTurns int
	// Budget, when set, is the run's budget (sdk.SetBudget): the engine
	// pauses the run when it is used up.
	Budget history.Budget
	// Stream asks the model call to stream its answer (watchers see it
	// live; only the final message is recorded).
	Stream bool
	// AllowEmptyAnswer accepts an answer with neither text nor a tool call
	// as the final answer. Without it, such an answer fails the model call
	// (llm.FailureEmptyAnswer), which is retried per ModelOptions: a model
	// that answers nothing is failing, and a run should not complete with
	// an empty answer unnoticed.
	AllowEmptyAnswer bool
	// Temperature and MaxTokens are sent to the model when set.
	Temperature *float64
	MaxTokens   int64
	// ModelOptions are the model call's activity options (default:
	// DefaultModelOptions). They replace the defaults whole: keep a
	// HeartbeatTimeout, or a worker that dies during a call leaves it to
	// its start-to-close timeout.
	ModelOptions *sdk.ActivityOptions
	// ToolOptions are the tools' activity options (default: start-to-close
	// 2 min).
	ToolOptions *sdk.ActivityOptions
	// ApprovalTimeout bounds the wait for an approval (0: no bound); a
	// call not approved in time is reported to the model as rejected.
	ApprovalTimeout time.Duration
	// ApprovalSignal names the signal this agent takes approvals from
	// (default ApprovalSignal, "approve"). An agent takes every approval
	// sent while its Run runs, and records those for no call of its own as
	// ignored: two agents of one workflow that run at once need a signal
	// each.
	ApprovalSignal string
	// ApprovalLinks also sends each call awaiting approval as a link
	// (link.go): the activity ApprovalLinkActivity hands the request and
	// its task token to the worker's ApprovalNotifier, and the person (or
	// webhook) following the link decides with CompleteApproval. The
	// signal and the update still decide too; the first decision wins.
	// The link is valid for ApprovalTimeout (default
	// DefaultApprovalLinkTimeout).
	ApprovalLinks bool
	// Resume starts the agent from a conversation carried from the run
	// before (Agent.Carry) instead of a new one: System is not added
	// again (the carried conversation has it), the settings (Model,
	// Tools, …) apply from here on. See carry.go.
	Resume *Carry
	// ContinueAsNew, when set, is called at the start of a turn once the
	// engine suggests continuing as new (sdk.ContinueAsNewSuggested: the
	// history has grown long or large), with the conversation to carry;
	// Run returns the error it returns — sdk.NewContinueAsNewError with
	// an input that holds the Carry, for the workflow to return — or goes
	// on in this run when it returns nil.
	ContinueAsNew func(ctx sdk.Context, c Carry) error
}

// Tool is a tool the model may call: an activity, its name and
// description as the model sees them, and the JSON schema of its input.
type Tool struct {
	// Name is the activity type name, which is also the tool's name.
	Name        string
	Description string
	// Schema is the JSON schema of the input (derived from the input type).
	Schema string
	// RequiresApproval makes a call wait for a person's Approval.
	RequiresApproval bool

	inType reflect.Type // nil: no input
	// derived is Schema as NewTool derived it, and legacySchema the same
	// as versions before fullDescriptionsChange derived it (descriptions
	// cut at their first comma).
	derived, legacySchema string
}

// cutSchema returns the schema versions before fullDescriptionsChange
// sent for t, when it differs from what is sent now.
func (t *Tool) cutSchema() (string, bool) {
	return t.legacySchema, t.legacySchema != "" && t.Schema == t.derived && t.legacySchema != t.Schema
}

// ToolOption adjusts a Tool.
type ToolOption func(*Tool)

// RequireApproval makes every call of the tool wait for a person's
// approval (a signal; see Approve) before it runs.
func RequireApproval() ToolOption { return func(t *Tool) { t.RequiresApproval = true } }

// Named names the tool (and the activity) when it was registered under
// another name than its function's.
func Named(name string) ToolOption { return func(t *Tool) { t.Name = name } }

// NewTool makes a tool of an activity function func(context.Context[, I])
// ([O,] error): its name is the activity's, its schema is derived from I
// (with github.com/invopop/jsonschema: json tags, and jsonschema tags for
// descriptions and constraints). Register the function on the worker as an
// activity, with its effect class; that declaration guards the tool.
func NewTool(fn any, description string, opts ...ToolOption) Tool {
	t := Tool{Name: sdk.TypeName(fn), Description: description, Schema: `{"type":"object","properties":{}}`}
	ft := reflect.TypeOf(fn)
	if ft != nil && ft.Kind() == reflect.Func && ft.NumIn() == 2 {
		t.inType = ft.In(1)
		if schema, legacy, err := inputSchemas(t.inType); err == nil {
			t.Schema, t.derived, t.legacySchema = schema, schema, legacy
		}
	}
	for _, o := range opts {
		o(&t)
	}
	return t
}

// Approval is a person's decision on a tool call, sent as the signal
// ApprovalSignal: {"CallID": "…", "Approved": true, "By": "ada"}. The
// agent reads a signal strictly: its keys are these fields' names, or
// their lower-case JSON spellings (call_id, approved, by, reason), and
// "Approved" must be there. A signal that is not such an object decides
// nothing: it is recorded as ignored, with why (history.IgnoredApproval).
type Approval struct {
	// CallID is the tool call's id (see the transcript, or the
	// approval-requested marker); empty approves the oldest call waiting.
	CallID   string
	Approved bool
	By       string
	Reason   string
}

// Result is what Run returns.
type Result struct {
	// Final is the model's final answer.
	Final string
	// Turns counts the model calls this Run made.
	Turns int
	// Usage sums the model calls' usage (their successful attempts; the
	// engine's ledger counts failed ones too).
	Usage history.Usage
	// StopReason is "final", "max_turns" or "budget".
	StopReason string
}

// Agent runs the loop for one workflow run. Create it with New in
// workflow code; it keeps the transcript across Run calls.
type Agent struct {
	opts  Options
	tools map[string]*Tool
	tr    Transcript
	turn  int // model calls made by this agent (activity ids)
	// carriedTurns counts the model calls of the runs before (Resume).
	carriedTurns int

	// Approvals (see receive): the calls awaiting one, in the order they
	// started waiting; the last decision per call id; those received while
	// a model call was in flight, for a call its answer may ask for.
	waiting   []*approvalSlot
	decided   map[string]Approval
	early     []Approval
	inFlight  bool // a model call is scheduled and not yet answered
	active    bool // Run is running: approvals are received
	listening bool
}

// approvalSlot is a tool call awaiting approval, and the approval that
// decided it once one came.
type approvalSlot struct {
	callID string
	ap     *Approval
	call   history.ToolCall // what the approval-requested marker says
	over   bool             // the wait is over (decided, or timed out)
}

// New returns an agent; with opts.Budget set it sets the run's budget.
func New(ctx sdk.Context, opts Options) *Agent {
	if opts.MaxTurns <= 0 {
		opts.MaxTurns = 20
	}
	if opts.ApprovalSignal == "" {
		opts.ApprovalSignal = ApprovalSignal
	}
	a := &Agent{opts: opts, tools: map[string]*Tool{}, decided: map[string]Approval{}}
	settings := &history.ChatConfig{Model: opts.Model, Temperature: opts.Temperature, MaxTokens: opts.MaxTokens, Stream: opts.Stream,
		AllowEmptyAnswer: opts.AllowEmptyAnswer}
	legacy := legacySchemas(ctx, opts.Tools)
	for i := range opts.Tools {
		t := &opts.Tools[i]
		a.tools[t.Name] = t
		schema := t.Schema
		if cut, differs := t.cutSchema(); legacy && differs {
			schema = cut
		}
		settings.Tools = append(settings.Tools, history.ToolSpec{Name: t.Name, Description: t.Description, Parameters: schema})
	}
	if opts.Resume != nil {
		a.resume(opts.Resume, settings)
	} else {
		a.tr.appendEntry(history.TranscriptEntry{Config: settings})
		if opts.System != "" {
			a.tr.Append(history.ChatMessage{Role: "system", Content: opts.System})
		}
	}
	if !opts.Budget.IsZero() {
		sdk.SetBudget(ctx, opts.Budget)
	}
	return a
}

// legacySchemas reports whether the model must be sent the tools' schemas
// as versions before fullDescriptionsChange derived them: only when one
// differs, and the run's history predates the change.
func legacySchemas(ctx sdk.Context, tools []Tool) bool {
	for i := range tools {
		if _, differs := tools[i].cutSchema(); differs {
			return sdk.GetVersion(ctx, fullDescriptionsChange, sdk.DefaultVersion, 1) < 1
		}
	}
	return false
}

// Transcript returns the conversation so far.
func (a *Agent) Transcript() *Transcript { return &a.tr }

// Run adds the user's message and runs the loop until the model answers
// without asking for a tool (Result.Final), MaxTurns model calls were made
// (ErrMaxTurns), or the budget was stopped (ErrBudgetExceeded). A model
// call that fails for good returns its error.
func (a *Agent) Run(ctx sdk.Context, userMessage string) (Result, error) {
	if userMessage != "" {
		a.tr.Append(history.ChatMessage{Role: "user", Content: userMessage})
	}
	a.active = true
	defer func() { a.active = false }()
	a.listen(ctx)
	var res Result
	for {
		if a.carriedTurns+res.Turns >= a.opts.MaxTurns {
			res.StopReason = "max_turns"
			return res, fmt.Errorf("%w: %d model calls", ErrMaxTurns, res.Turns)
		}
		if err := a.continueAsNew(ctx); err != nil {
			res.StopReason = "continue_as_new"
			return res, err
		}
		answer, err := a.callModel(ctx)
		res.Turns++
		if err != nil {
			a.settleEarly(ctx)
			if isBudgetStop(err) {
				res.StopReason = "budget"
				return res, fmt.Errorf("%w: %w", ErrBudgetExceeded, err)
			}
			return res, err
		}
		res.Usage = res.Usage.Add(answer.Usage)
		msg := answer.Message
		calls := a.prepare(msg.ToolCalls)
		a.settleEarly(ctx)
		if len(msg.ToolCalls) == 0 {
			res.Final, res.StopReason = msg.Content, "final"
			return res, nil
		}
		for _, out := range a.runTools(ctx, msg.ToolCalls, calls) {
			a.tr.appendResult(out)
		}
	}
}

func isBudgetStop(err error) bool {
	var app *sdk.ApplicationError
	return errors.As(err, &app) && app.Type == "BudgetExceeded"
}

// ModelHeartbeatTimeout is the default model call's heartbeat timeout:
// the worker running the call heartbeats it (automatically, every third of
// this) while the model thinks or streams, so a call whose worker died is
// retried on another this long after its last heartbeat (plus the engine's
// lease drift margin, 5 s by default) — not after its start-to-close
// timeout.
const ModelHeartbeatTimeout = 10 * time.Second

// DefaultModelOptions are the model call's activity options unless
// Options.ModelOptions replaces them: start-to-close 5 minutes, heartbeat
// timeout ModelHeartbeatTimeout, retries from 1 s (doubling, at most
// 1 min apart) up to 10 attempts; a Retry-After the endpoint sends sets
// the delay.
func DefaultModelOptions() sdk.ActivityOptions {
	return sdk.ActivityOptions{StartToCloseTimeout: 5 * time.Minute, HeartbeatTimeout: ModelHeartbeatTimeout,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumInterval: time.Minute, MaximumAttempts: 10}}
}

// ModelLimitKey is the limit key of the agent's model calls (unless
// Options.ModelOptions sets one): "Provider/Model", then Options.LimitKey.
func (a *Agent) ModelLimitKey() string {
	provider := a.opts.Provider
	if provider == "" {
		provider = "model"
	}
	key := provider
	if a.opts.Model != "" {
		key += "/" + a.opts.Model
	}
	if a.opts.LimitKey != "" {
		key += "," + a.opts.LimitKey
	}
	return key
}

// callModel makes one model call on the transcript so far.
func (a *Agent) callModel(ctx sdk.Context) (history.ModelResult, error) {
	a.turn++
	o := DefaultModelOptions()
	if a.opts.ModelOptions != nil {
		o = *a.opts.ModelOptions
	}
	o.ActivityID = "model:" + strconv.Itoa(a.turn)
	if o.LimitKey == "" {
		o.LimitKey = a.ModelLimitKey()
	}
	mctx := sdk.WithActivityOptions(ctx, o)
	tip, sent := a.tr.tip, a.tr.sent
	a.inFlight = true
	p, err := sdk.ExecuteActivityByName[history.Payload](mctx, ModelActivity, a.tr.payload()).Get(ctx)
	a.inFlight = false
	if err != nil {
		var ae *sdk.ActivityError
		if errors.As(err, &ae) && ae.ScheduledEventID == 0 {
			// Never recorded (its context was canceled before it was
			// scheduled or sent): the chunk its input carried is not
			// stored, so the next call must not extend it.
			a.tr.tip, a.tr.sent = tip, sent
		}
		return history.ModelResult{}, err
	}
	return a.tr.answer(p)
}

// toolResult is what the model is told of one tool call: the text, and,
// when the tool's result is stored as a chunk of its own, the reference
// the transcript records instead of the text.
type toolResult struct {
	msg  history.ChatMessage
	text string
	ref  *history.ContentRef
}

// preparedCall is a tool call checked before it runs: its tool and decoded
// input, or the error the model is told; and its approval slot when the
// call awaits a person.
type preparedCall struct {
	tool   *Tool
	in     any
	errMsg string
	slot   *approvalSlot
}

// prepare checks the calls of a model's answer and registers, in call
// order, those that await approval (before any runs: an approval received
// meanwhile finds its call).
func (a *Agent) prepare(calls []history.ToolCall) []preparedCall {
	out := make([]preparedCall, len(calls))
	for i, c := range calls {
		p := &out[i]
		p.tool = a.tools[c.Name]
		if p.tool == nil {
			p.errMsg = fmt.Sprintf("error: there is no tool %q; the tools are: %s", c.Name, strings.Join(a.toolNames(), ", "))
			continue
		}
		in, err := p.tool.decode(c.Arguments)
		if err != nil {
			p.errMsg = fmt.Sprintf("error: the arguments of %s are invalid: %v", c.Name, err)
			continue
		}
		p.in = in
		if p.tool.RequiresApproval {
			p.slot = &approvalSlot{callID: c.ID, call: c}
			a.waiting = append(a.waiting, p.slot)
		}
	}
	return out
}

// runTools runs the calls (each in its own coroutine, so they proceed
// concurrently) and returns their results in call order.
func (a *Agent) runTools(ctx sdk.Context, calls []history.ToolCall, prepared []preparedCall) []toolResult {
	out := make([]toolResult, len(calls))
	done := 0
	for i, c := range calls {
		key := history.ToolCallKey(int64(a.turn), calls, i)
		sdk.Go(ctx, func(ctx sdk.Context) {
			text, ref := a.runTool(ctx, c, key, &prepared[i])
			out[i] = toolResult{msg: history.ChatMessage{Role: "tool", ToolCallID: c.ID, Name: c.Name}, text: text, ref: ref}
			done++
		})
	}
	_ = sdk.Await(ctx, func() bool { return done == len(calls) })
	return out
}

// runTool runs one call (key: history.ToolCallKey) and returns what the
// model is told: the text,
// and the reference of the tool's result when it is stored as a chunk of
// its own (the transcript then records the reference, not a copy).
func (a *Agent) runTool(ctx sdk.Context, c history.ToolCall, key string, p *preparedCall) (string, *history.ContentRef) {
	if p.errMsg != "" {
		return p.errMsg, nil
	}
	t := p.tool
	if p.slot != nil {
		ap, timedOut := a.awaitApproval(ctx, key, p.slot)
		if !ap.Approved {
			return a.rejection(ctx, ap, timedOut), nil
		}
	}
	o := sdk.ActivityOptions{StartToCloseTimeout: 2 * time.Minute}
	if a.opts.ToolOptions != nil {
		o = *a.opts.ToolOptions
	}
	o.ActivityID = history.ToolActivityPrefix + key
	o.ShareResult = true // recorded once: the transcript references it
	if o.LimitKey == "" {
		o.LimitKey = a.opts.LimitKey
	}
	tctx := sdk.WithActivityOptions(ctx, o)
	r, err := sdk.ExecuteActivityByName[history.Payload](tctx, t.Name, p.in).Get(ctx)
	if err != nil {
		return "error: " + toolError(err), nil
	}
	text, err := history.ToolResultText(r)
	if err != nil {
		return "error: the tool's result cannot be read: " + err.Error(), nil
	}
	if r.ByRef() && history.IsRoot(r.Ref) { // a chunk of its own (sdk.ActivityOptions.ShareResult)
		return text, &history.ContentRef{Ref: r.StoredRef(), Encoding: r.Encoding}
	}
	return text, nil
}

func toolError(err error) string {
	var app *sdk.ApplicationError
	if errors.As(err, &app) {
		return app.Message
	}
	return err.Error()
}

func (a *Agent) toolNames() []string {
	names := make([]string, 0, len(a.tools))
	for n := range a.tools {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// decode reads the model's JSON arguments into the tool's input type.
func (t *Tool) decode(args string) (any, error) {
	if t.inType == nil {
		return nil, nil
	}
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	v := reflect.New(t.inType)
	dec := json.NewDecoder(strings.NewReader(args))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v.Interface()); err != nil {
		return nil, err
	}
	return v.Elem().Interface(), nil
}

// awaitApproval records that the call waits, waits for its Approval (or
// the timeout: timedOut), and records the decision.
func (a *Agent) awaitApproval(ctx sdk.Context, key string, slot *approvalSlot) (ap Approval, timedOut bool) {
	_ = sdk.RecordMarker(ctx, history.MarkerApprovalRequested, key, a.approvalRequest(slot))
	withdraw := func() {}
	if a.opts.ApprovalLinks {
		withdraw = a.requestByLink(ctx, key, slot)
	}
	has := func() bool { return slot.ap != nil }
	if a.opts.ApprovalTimeout > 0 {
		_, _ = sdk.AwaitWithTimeout(ctx, a.opts.ApprovalTimeout, has)
	} else {
		_ = sdk.Await(ctx, has)
	}
	slot.over = true
	withdraw()
	a.unwait(slot)
	if slot.ap != nil {
		ap = *slot.ap
	} else {
		ap, timedOut = Approval{CallID: slot.callID, Reason: "no approval within " + a.opts.ApprovalTimeout.String()}, true
		a.decided[slot.callID] = ap
	}
	_ = sdk.RecordMarker(ctx, history.MarkerApprovalDecided, key, marker(history.Approval{Approved: ap.Approved, By: ap.By, Reason: ap.Reason}))
	return ap, timedOut
}

// unwait removes a call from those awaiting approval.
func (a *Agent) unwait(slot *approvalSlot) {
	for i, w := range a.waiting {
		if w == slot {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			return
		}
	}
}

// marker encodes an approval the way the engine reads it (msgpack).
func marker(ap history.Approval) history.Payload {
	b, _ := msgpack.Marshal(&ap) // a plain struct: cannot fail
	return history.Payload{Encoding: sdk.EncodingMsgpack, Data: b}
}

// listen starts, once, the coroutine that receives approvals; it takes
// them from the signal channel only while Run runs (another agent of the
// same workflow, or a later Run, gets those sent meanwhile).
func (a *Agent) listen(ctx sdk.Context) {
	if a.listening {
		return
	}
	a.listening = true
	// Received as any, not as Approval: a signal is typed by a person (cairn
	// workflow signal --input …), and one that is not an Approval must not
	// fail every workflow task of the run (the SDK panics on a payload
	// that does not decode into the channel's type).
	ch := sdk.GetSignalChannel[any](ctx, a.opts.ApprovalSignal)
	a.registerApprovalUpdate(ctx)
	sdk.GoNamed(ctx, "agent-approvals", func(ctx sdk.Context) {
		for {
			if sdk.Await(ctx, func() bool { return a.active && ch.Len() > 0 }) != nil {
				a.listening = false // canceled: a later Run listens again
				return
			}
			v, _ := ch.ReceiveAsync()
			a.receive(ctx, v)
		}
	})
}

// receive applies an approval signal's value: to the call it names (an
// empty CallID: the oldest waiting) when that call awaits approval, or —
// when a model call is in flight — holds it for a call the answer may ask
// for (the live stream shows call ids before the answer is recorded).
// Anything else is ignored and recorded as ignored, with why: it never
// decides a later call, nor changes a decision made.
func (a *Agent) receive(ctx sdk.Context, v any) {
	ap, err := a.readApproval(ctx, v)
	switch {
	case err != nil:
		a.ignore(ctx, ap, "the signal is not an agent.Approval: "+err.Error())
	case a.assign(ap):
	case ap.CallID != "" && a.wasDecided(ap.CallID):
		a.ignore(ctx, ap, a.alreadyDecided(ap.CallID))
	case ap.CallID != "" && a.inFlight:
		a.early = append(a.early, ap)
	default:
		a.ignore(ctx, ap, a.notAwaiting(ap.CallID))
	}
}

// assign gives ap to the first call awaiting approval it names, without
// an approval yet; it reports whether there was one.
func (a *Agent) assign(ap Approval) bool {
	for _, w := range a.waiting {
		if w.ap == nil && (ap.CallID == "" || ap.CallID == w.callID) {
			ap.CallID = w.callID
			w.ap = &ap
			a.decided[w.callID] = ap
			return true
		}
	}
	return false
}

func (a *Agent) wasDecided(callID string) bool { _, ok := a.decided[callID]; return ok }

// settleEarly applies the approvals held while the model call was in
// flight to the calls of its answer; the others are ignored.
func (a *Agent) settleEarly(ctx sdk.Context) {
	early := a.early
	a.early = nil
	for _, ap := range early {
		switch {
		case a.assign(ap):
		case a.wasDecided(ap.CallID):
			a.ignore(ctx, ap, a.alreadyDecided(ap.CallID))
		default:
			a.ignore(ctx, ap, a.notAwaiting(ap.CallID))
		}
	}
}

func (a *Agent) alreadyDecided(callID string) string {
	d := a.decided[callID]
	switch {
	case d.Approved:
		return fmt.Sprintf("call %q was already approved by %s", callID, d.By)
	case d.By == "":
		return fmt.Sprintf("call %q was already rejected: %s", callID, d.Reason)
	}
	return fmt.Sprintf("call %q was already rejected by %s", callID, d.By)
}

func (a *Agent) notAwaiting(callID string) string {
	why := "no tool call is awaiting approval"
	if callID != "" {
		why = fmt.Sprintf("no tool call %q is awaiting approval", callID)
	}
	var ids []string
	for _, w := range a.waiting {
		if w.ap == nil {
			ids = append(ids, w.callID)
		}
	}
	if len(ids) > 0 {
		why += "; awaiting: " + strings.Join(ids, ", ")
	}
	return why
}

// approvalIgnoredChange versions recording ignored approvals: a run whose
// history predates it replays without the markers.
const approvalIgnoredChange = "cairn.agent.record-ignored-approvals"

// ignore records an approval that applies to no call (the marker
// MarkerApprovalIgnored: the transcript lists it).
func (a *Agent) ignore(ctx sdk.Context, ap Approval, why string) {
	if sdk.GetVersion(ctx, approvalIgnoredChange, sdk.DefaultVersion, 1) < 1 {
		return
	}
	ig := history.IgnoredApproval{CallID: ap.CallID, Approved: ap.Approved, By: ap.By, Reason: ap.Reason, Why: why}
	b, _ := msgpack.Marshal(&ig) // a plain struct: cannot fail
	_ = sdk.RecordMarker(ctx, history.MarkerApprovalIgnored, ap.CallID, history.Payload{Encoding: sdk.EncodingMsgpack, Data: b})
}

// Transcript is the conversation the agent keeps: an append-only list of
// entries, of which the first `sent` are stored as the chunk `tip`.
type Transcript struct {
	entries []history.TranscriptEntry
	sent    int
	tip     []byte
	// texts holds the content of the entries that record a reference to
	// it (a tool's result), by entry index.
	texts map[int]string
}

// appendResult adds a tool's result: a reference to its stored payload
// when it has one (the text is kept in memory only), else its text.
func (t *Transcript) appendResult(r toolResult) {
	m := r.msg
	if r.ref == nil {
		m.Content = r.text
		t.appendEntry(history.TranscriptEntry{Message: &m})
		return
	}
	if t.texts == nil {
		t.texts = map[int]string{}
	}
	t.texts[len(t.entries)] = r.text
	t.appendEntry(history.TranscriptEntry{Message: &m, Content: r.ref})
}

// Append adds messages.
func (t *Transcript) Append(msgs ...history.ChatMessage) {
	for i := range msgs {
		m := msgs[i]
		t.appendEntry(history.TranscriptEntry{Message: &m})
	}
}

func (t *Transcript) appendEntry(e history.TranscriptEntry) { t.entries = append(t.entries, e) }

// Messages returns the messages so far.
func (t *Transcript) Messages() []history.ChatMessage {
	var out []history.ChatMessage
	for i, e := range t.entries {
		if e.Message != nil {
			m := *e.Message
			if e.Content != nil {
				m.Content = t.texts[i]
			}
			out = append(out, m)
		}
	}
	return out
}

// answer takes a model call's result: the chunk that extends the input
// with the answer's entry (as the worker resolved it: the parent and that
// chunk's bytes). The answer is part of the transcript from then on, stored
// once; an older-style result (a ModelResult value) is appended instead.
func (t *Transcript) answer(p history.Payload) (history.ModelResult, error) {
	if p.Encoding != history.EncodingTranscript {
		var r history.ModelResult
		if err := sdk.DefaultConverter().FromPayload(p, &r); err != nil {
			return r, err
		}
		if r.Message.Role == "" {
			r.Message.Role = "assistant"
		}
		t.Append(r.Message)
		return r, nil
	}
	entries, err := history.DecodeTranscript(p.Data)
	if err != nil {
		return history.ModelResult{}, err
	}
	r, ok := history.AnswerOf(entries)
	if !ok {
		return r, fmt.Errorf("agent: the model call's result holds no message")
	}
	if r.Message.Role == "" {
		r.Message.Role = "assistant"
	}
	if tip := t.tip; p.ByRef() && tip != nil && string(p.Ref) == string(tip) {
		for i := range entries {
			t.appendEntry(entries[i])
		}
		t.tip, t.sent = p.StoredRef(), len(t.entries) // the answer's chunk is the transcript's new tip
		return r, nil
	}
	t.Append(r.Message) // an answer to another prefix: record it with the next turn
	return r, nil
}

// payload returns the model call's input: the stored chunk so far
// extended by the entries added since, and moves the tip past them.
func (t *Transcript) payload() history.Payload {
	tip := t.tip
	if tip == nil {
		tip = history.RootRef
	}
	data, err := history.AppendTranscript(nil, t.entries[t.sent:]...)
	if err != nil {
		panic(err) // our own plain structs: cannot fail
	}
	p := history.Payload{Encoding: history.EncodingTranscript, Ref: tip, Data: data}
	t.tip, t.sent = p.StoredRef(), len(t.entries)
	return p
}
