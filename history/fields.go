package history

import (
	"math"
	"time"
)

// Each attribute type lists its fields, in order, by calling a fieldVisitor
// once per field with the field's JSON name and a pointer to it. That one
// list drives the binary codec (codec.go), the JSON export and import
// (json.go) and the tests, so a field cannot be forgotten by one of them.
//
// The order is the wire order: it must be the order of the struct's fields
// (the tests check this against github.com/vmihailenco/msgpack/v5), and new
// fields are only ever appended at the end of a struct. JSON names are the Go
// field names in lower camel case, with "ID" written "Id"; the tests check
// that too.

// fielder is implemented by every attribute type and by the nested structs
// (Failure, ActivityOptions, RetryPolicy).
type fielder interface {
	fields(v fieldVisitor)
}

// fieldVisitor is called once per field. Enum fields pass their name table
// (for JSON); Payload, Failure, ActivityOptions and RetryPolicy have methods
// of their own.
type fieldVisitor interface {
	str(name string, p *string)
	boolean(name string, p *bool)
	int64(name string, p *int64)
	int32(name string, p *int32)
	duration(name string, p *time.Duration)
	float64(name string, p *float64)
	strings(name string, p *[]string)
	time(name string, p *time.Time)
	enum(name string, p *uint8, names []string)
	payload(name string, p *Payload)
	// object visits a nested struct held by value (Failure,
	// ActivityOptions).
	object(name string, p fielder)
	failurePtr(name string, p **Failure)
	retryPolicyPtr(name string, p **RetryPolicy)
}

// Enum names used in JSON; the index is the numeric value.
var (
	effectClassNames       = []string{Read: "Read", Idempotent: "Idempotent", SideEffect: "SideEffect"}
	resolutionNames        = []string{ResolvedHappened: "happened", ResolvedNotHappened: "not-happened", ResolvedFailed: "failed", ResolvedPerform: "perform"}
	parentClosePolicyNames = []string{ParentCloseTerminate: "Terminate", ParentCloseRequestCancel: "RequestCancel", ParentCloseAbandon: "Abandon"}
)

func (f *Failure) fields(v fieldVisitor) {
	v.str("type", &f.Type)
	v.str("message", &f.Message)
	v.boolean("nonRetryable", &f.NonRetryable)
	v.payload("details", &f.Details)
	v.str("stack", &f.Stack)
}

func (p *RetryPolicy) fields(v fieldVisitor) {
	v.duration("initialInterval", &p.InitialInterval)
	v.float64("backoffCoefficient", &p.BackoffCoefficient)
	v.duration("maximumInterval", &p.MaximumInterval)
	v.int32("maximumAttempts", &p.MaximumAttempts)
	v.strings("nonRetryableErrorTypes", &p.NonRetryableErrorTypes)
}

func (o *ActivityOptions) fields(v fieldVisitor) {
	v.str("taskQueue", &o.TaskQueue)
	v.duration("scheduleToStartTimeout", &o.ScheduleToStartTimeout)
	v.duration("startToCloseTimeout", &o.StartToCloseTimeout)
	v.duration("scheduleToCloseTimeout", &o.ScheduleToCloseTimeout)
	v.duration("heartbeatTimeout", &o.HeartbeatTimeout)
	v.retryPolicyPtr("retryPolicy", &o.RetryPolicy)
	v.str("limitKey", &o.LimitKey)
}

func (a *WorkflowStarted) fields(v fieldVisitor) {
	v.str("workflowType", &a.WorkflowType)
	v.str("taskQueue", &a.TaskQueue)
	v.payload("input", &a.Input)
	v.duration("executionTimeout", &a.ExecutionTimeout)
	v.duration("runTimeout", &a.RunTimeout)
	v.duration("taskTimeout", &a.TaskTimeout)
	v.int32("attempt", &a.Attempt)
	v.str("continuedFromRunId", &a.ContinuedFromRunID)
	v.str("firstRunId", &a.FirstRunID)
	v.str("parentWorkflowId", &a.ParentWorkflowID)
	v.str("parentRunId", &a.ParentRunID)
	v.int64("parentInitiatedEventId", &a.ParentInitiatedEventID)
	v.str("identity", &a.Identity)
	v.object("budget", &a.Budget)
	v.duration("retention", &a.Retention)
	v.str("traceParent", &a.TraceParent)
	v.str("traceState", &a.TraceState)
}

func (a *WorkflowCompleted) fields(v fieldVisitor) {
	v.payload("result", &a.Result)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *WorkflowFailed) fields(v fieldVisitor) {
	v.object("failure", &a.Failure)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *WorkflowCanceled) fields(v fieldVisitor) {
	v.payload("details", &a.Details)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *WorkflowTerminated) fields(v fieldVisitor) {
	v.str("reason", &a.Reason)
	v.payload("details", &a.Details)
	v.str("identity", &a.Identity)
	v.str("resetRunId", &a.ResetRunID)
}

func (a *WorkflowTimedOut) fields(v fieldVisitor) {
	v.str("timeout", &a.Timeout)
}

func (a *WorkflowContinuedAsNew) fields(v fieldVisitor) {
	v.str("newRunId", &a.NewRunID)
	v.str("workflowType", &a.WorkflowType)
	v.str("taskQueue", &a.TaskQueue)
	v.payload("input", &a.Input)
	v.duration("runTimeout", &a.RunTimeout)
	v.duration("taskTimeout", &a.TaskTimeout)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *WorkflowCancelRequested) fields(v fieldVisitor) {
	v.str("reason", &a.Reason)
	v.str("identity", &a.Identity)
}

func (a *WorkflowTaskCompleted) fields(v fieldVisitor) {
	v.int64("seenEventId", &a.SeenEventID)
	v.str("identity", &a.Identity)
	v.int32("attempt", &a.Attempt)
}

func (a *WorkflowTaskFailed) fields(v fieldVisitor) {
	v.str("cause", &a.Cause)
	v.object("failure", &a.Failure)
	v.str("identity", &a.Identity)
	v.int32("attempt", &a.Attempt)
}

func (a *ActivityScheduled) fields(v fieldVisitor) {
	v.str("activityId", &a.ActivityID)
	v.str("activityType", &a.ActivityType)
	v.payload("input", &a.Input)
	v.object("options", &a.Options)
	v.enum("effect", (*uint8)(&a.Effect), effectClassNames)
	v.str("idempotencyKey", &a.IdempotencyKey)
	v.boolean("hasReconcile", &a.HasReconcile)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
	v.boolean("metered", &a.Metered)
	v.boolean("shareResult", &a.ShareResult)
	v.str("occurrenceKey", &a.OccurrenceKey)
}

func (a *ActivityStarted) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int32("attempt", &a.Attempt)
	v.int64("leaseEpoch", &a.LeaseEpoch)
	v.str("identity", &a.Identity)
	v.boolean("reconcile", &a.Reconcile)
}

func (a *ActivityCompleted) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int64("startedEventId", &a.StartedEventID)
	v.payload("result", &a.Result)
	v.str("identity", &a.Identity)
	v.str("resultOmitted", &a.ResultOmitted)
	v.object("usage", &a.Usage)
}

func (a *ActivityFailed) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int64("startedEventId", &a.StartedEventID)
	v.object("failure", &a.Failure)
	v.int32("attempt", &a.Attempt)
	v.str("identity", &a.Identity)
	v.object("usage", &a.Usage)
}

func (a *ActivityTimedOut) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int64("startedEventId", &a.StartedEventID)
	v.str("timeout", &a.Timeout)
	v.object("lastFailure", &a.LastFailure)
	v.int32("attempt", &a.Attempt)
	v.object("usage", &a.Usage)
}

func (a *ActivityCanceled) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int64("startedEventId", &a.StartedEventID)
	v.payload("details", &a.Details)
	v.object("usage", &a.Usage)
}

func (a *ActivityCancelRequested) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *ActivityOutcomeUnknown) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int64("startedEventId", &a.StartedEventID)
	v.int32("attempt", &a.Attempt)
	v.str("reason", &a.Reason)
	v.str("idempotencyKey", &a.IdempotencyKey)
}

func (a *ActivityResolved) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.enum("resolution", (*uint8)(&a.Resolution), resolutionNames)
	v.payload("result", &a.Result)
	v.failurePtr("failure", &a.Failure)
	v.str("by", &a.By)
	v.str("reason", &a.Reason)
	v.str("resultOmitted", &a.ResultOmitted)
}

func (a *ActivityDeduplicated) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.str("idempotencyKey", &a.IdempotencyKey)
	v.payload("result", &a.Result)
	v.str("originalRunId", &a.OriginalRunID)
	v.int64("originalEventId", &a.OriginalEventID)
	v.str("resultOmitted", &a.ResultOmitted)
	v.str("originalWorkflowId", &a.OriginalWorkflowID)
}

func (a *ActivityDuplicateDetected) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int32("attempt", &a.Attempt)
	v.int64("leaseEpoch", &a.LeaseEpoch)
	v.str("idempotencyKey", &a.IdempotencyKey)
	v.payload("result", &a.Result)
	v.str("identity", &a.Identity)
	v.boolean("possible", &a.Possible)
	v.int32("otherAttempt", &a.OtherAttempt)
	v.str("outcome", &a.Outcome)
	v.str("detail", &a.Detail)
}

func (a *ActivityKeyed) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.enum("effect", (*uint8)(&a.Effect), effectClassNames)
	v.str("idempotencyKey", &a.IdempotencyKey)
	v.boolean("hasReconcile", &a.HasReconcile)
	v.str("declaredBy", &a.DeclaredBy)
	v.str("occurrenceKey", &a.OccurrenceKey)
}

func (a *ActivityLateReport) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.int32("attempt", &a.Attempt)
	v.int64("leaseEpoch", &a.LeaseEpoch)
	v.str("idempotencyKey", &a.IdempotencyKey)
	v.str("verdict", &a.Verdict)
	v.str("outcome", &a.Outcome)
	v.payload("result", &a.Result)
	v.str("identity", &a.Identity)
	v.int32("otherAttempt", &a.OtherAttempt)
	v.str("detail", &a.Detail)
}

func (a *TimerStarted) fields(v fieldVisitor) {
	v.str("timerId", &a.TimerID)
	v.duration("duration", &a.Duration)
	v.time("fireAt", &a.FireAt)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *TimerFired) fields(v fieldVisitor) {
	v.str("timerId", &a.TimerID)
	v.int64("startedEventId", &a.StartedEventID)
}

func (a *TimerCanceled) fields(v fieldVisitor) {
	v.str("timerId", &a.TimerID)
	v.int64("startedEventId", &a.StartedEventID)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *SignalReceived) fields(v fieldVisitor) {
	v.str("name", &a.Name)
	v.payload("input", &a.Input)
	v.str("identity", &a.Identity)
}

func (a *SignalExternalSent) fields(v fieldVisitor) {
	v.str("workflowId", &a.WorkflowID)
	v.str("runId", &a.RunID)
	v.str("name", &a.Name)
	v.payload("input", &a.Input)
	v.boolean("delivered", &a.Delivered)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *MarkerRecorded) fields(v fieldVisitor) {
	v.str("name", &a.Name)
	v.str("id", &a.ID)
	v.payload("data", &a.Data)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *ChildWorkflowStarted) fields(v fieldVisitor) {
	v.str("workflowId", &a.WorkflowID)
	v.str("runId", &a.RunID)
	v.str("workflowType", &a.WorkflowType)
	v.str("taskQueue", &a.TaskQueue)
	v.payload("input", &a.Input)
	v.enum("parentClosePolicy", (*uint8)(&a.ParentClosePolicy), parentClosePolicyNames)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *ChildWorkflowCompleted) fields(v fieldVisitor) {
	v.int64("initiatedEventId", &a.InitiatedEventID)
	v.str("workflowId", &a.WorkflowID)
	v.str("runId", &a.RunID)
	v.payload("result", &a.Result)
}

func (a *ChildWorkflowFailed) fields(v fieldVisitor) {
	v.int64("initiatedEventId", &a.InitiatedEventID)
	v.str("workflowId", &a.WorkflowID)
	v.str("runId", &a.RunID)
	v.object("failure", &a.Failure)
}

func (a *WorkflowUpdateAccepted) fields(v fieldVisitor) {
	v.str("updateId", &a.UpdateID)
	v.str("name", &a.Name)
	v.payload("input", &a.Input)
	v.str("identity", &a.Identity)
}

func (a *WorkflowUpdateCompleted) fields(v fieldVisitor) {
	v.str("updateId", &a.UpdateID)
	v.int64("acceptedEventId", &a.AcceptedEventID)
	v.payload("result", &a.Result)
	v.failurePtr("failure", &a.Failure)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *ChildWorkflowCancelRequested) fields(v fieldVisitor) {
	v.int64("initiatedEventId", &a.InitiatedEventID)
	v.str("workflowId", &a.WorkflowID)
	v.str("runId", &a.RunID)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *WorkflowReset) fields(v fieldVisitor) {
	v.str("kind", &a.Kind)
	v.str("baseWorkflowId", &a.BaseWorkflowID)
	v.str("baseRunId", &a.BaseRunID)
	v.int64("atEventId", &a.AtEventID)
	v.str("reason", &a.Reason)
	v.str("identity", &a.Identity)
	v.str("effects", &a.Effects)
	v.int32("reapplied", &a.Reapplied)
}

func (a *ActivityHeld) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.str("originKey", &a.OriginKey)
	v.str("reason", &a.Reason)
}

// binEncoder writes a struct's fields as a MessagePack array, in order.
type binEncoder struct {
	w mpWriter
	n int // fields written into the innermost open array
}

// writeStruct writes f as an array. The header is reserved as one byte and
// patched (widened when there are 16 fields or more) once the fields are
// counted.
func (e *binEncoder) writeStruct(f fielder) {
	at := len(e.w.b)
	e.w.b = append(e.w.b, mpFixArray)
	outer := e.n
	e.n = 0
	f.fields(e)
	n := e.n
	e.n = outer
	if n < 16 {
		e.w.b[at] = mpFixArray | byte(n)
		return
	}
	// Widen to array16 (no struct has 65536 fields).
	e.w.b = append(e.w.b, 0, 0)
	copy(e.w.b[at+3:], e.w.b[at+1:len(e.w.b)-2])
	e.w.b[at], e.w.b[at+1], e.w.b[at+2] = mpArray16, byte(n>>8), byte(n)
}

func (e *binEncoder) str(_ string, p *string)             { e.n++; e.w.writeString(*p) }
func (e *binEncoder) boolean(_ string, p *bool)           { e.n++; e.w.writeBool(*p) }
func (e *binEncoder) int64(_ string, p *int64)            { e.n++; e.w.writeInt(*p) }
func (e *binEncoder) int32(_ string, p *int32)            { e.n++; e.w.writeInt(int64(*p)) }
func (e *binEncoder) duration(_ string, p *time.Duration) { e.n++; e.w.writeInt(int64(*p)) }
func (e *binEncoder) float64(_ string, p *float64)        { e.n++; e.w.writeFloat64(*p) }
func (e *binEncoder) time(_ string, p *time.Time)         { e.n++; e.w.writeTime(*p) }
func (e *binEncoder) enum(_ string, p *uint8, _ []string) {
	e.n++
	e.w.writeUint(uint64(*p))
}

func (e *binEncoder) strings(_ string, p *[]string) {
	e.n++
	if *p == nil {
		e.w.writeNil()
		return
	}
	e.w.writeArrayHeader(len(*p))
	for _, s := range *p {
		e.w.writeString(s)
	}
}

func (e *binEncoder) payload(_ string, p *Payload) {
	e.n++
	e.w.b = append(e.w.b, mpFixArray|3)
	e.w.writeString(p.Encoding)
	e.w.writeBin(p.Data)
	e.w.writeBin(p.Ref)
}

func (e *binEncoder) object(_ string, p fielder) { e.n++; e.writeStruct(p) }

func (e *binEncoder) failurePtr(_ string, p **Failure) {
	e.n++
	if *p == nil {
		e.w.writeNil()
		return
	}
	e.writeStruct(*p)
}

func (e *binEncoder) retryPolicyPtr(_ string, p **RetryPolicy) {
	e.n++
	if *p == nil {
		e.w.writeNil()
		return
	}
	e.writeStruct(*p)
}

// binDecoder reads a struct written by binEncoder, tolerating arrays of any
// length: fields missing at the end (a record written before they existed)
// keep their zero value, and extra elements at the end (written by a newer
// version) are skipped. A nil reads as the zero value of any field.
type binDecoder struct {
	r      mpReader
	remain int // elements left in the innermost array
	// path names the nested structs being read, for error messages.
	path  [4]string
	depth int
	// errField is the field being read when the first error occurred.
	errField string
	// ed, when not nil, provides memory for nested values.
	ed *EventDecoder
}

// reset prepares d to read the private copy body (nil: to be pooled). It
// sets fields one by one: copying a whole binDecoder costs a bulk write
// barrier while the garbage collector runs.
func (d *binDecoder) reset(body []byte, ed *EventDecoder) {
	d.r.b, d.r.off, d.r.err, d.r.owned = body, 0, nil, true
	d.remain, d.depth, d.errField, d.ed = 0, 0, "", ed
}

// next reports whether the innermost array has another element for the
// field called name, consuming it.
func (d *binDecoder) next(name string) bool {
	if d.remain == 0 || d.r.err != nil {
		return false
	}
	d.remain--
	d.errField = name
	return true
}

// readStruct reads an array into f (which holds zero values).
func (d *binDecoder) readStruct(name string, f fielder) {
	n, isNil := d.r.readArrayLen()
	if isNil || d.r.err != nil {
		return
	}
	outer := d.remain
	d.remain = n
	if d.depth < len(d.path) {
		d.path[d.depth] = name
	}
	d.depth++
	f.fields(d)
	for ; d.remain > 0 && d.r.err == nil; d.remain-- {
		d.r.skip()
	}
	if d.r.err == nil {
		d.depth--
	}
	d.remain = outer
}

// fieldPath names the field where the first error occurred.
func (d *binDecoder) fieldPath() string {
	s := ""
	for i := 1; i < d.depth && i < len(d.path); i++ {
		s += d.path[i] + "."
	}
	return s + d.errField
}

func (d *binDecoder) str(name string, p *string) {
	if d.next(name) {
		*p = d.r.readString()
	}
}

func (d *binDecoder) boolean(name string, p *bool) {
	if d.next(name) {
		*p = d.r.readBool()
	}
}

func (d *binDecoder) int64(name string, p *int64) {
	if d.next(name) {
		*p = d.r.readInt(math.MinInt64, math.MaxInt64)
	}
}

func (d *binDecoder) int32(name string, p *int32) {
	if d.next(name) {
		*p = int32(d.r.readInt(math.MinInt32, math.MaxInt32))
	}
}

func (d *binDecoder) duration(name string, p *time.Duration) {
	if d.next(name) {
		*p = time.Duration(d.r.readInt(math.MinInt64, math.MaxInt64))
	}
}

func (d *binDecoder) float64(name string, p *float64) {
	if d.next(name) {
		*p = d.r.readFloat()
	}
}

func (d *binDecoder) time(name string, p *time.Time) {
	if d.next(name) {
		*p = d.r.readTime()
	}
}

func (d *binDecoder) enum(name string, p *uint8, _ []string) {
	if d.next(name) {
		*p = uint8(d.r.readInt(0, math.MaxUint8))
	}
}

func (d *binDecoder) strings(name string, p *[]string) {
	if !d.next(name) {
		return
	}
	n, isNil := d.r.readArrayLen()
	if isNil || d.r.err != nil {
		return
	}
	s := d.ed.newStrings(n)
	for i := range s {
		s[i] = d.r.readString()
	}
	*p = s
}

func (d *binDecoder) payload(name string, p *Payload) {
	if !d.next(name) {
		return
	}
	n, isNil := d.r.readArrayLen()
	if isNil || d.r.err != nil {
		return
	}
	if n > 0 {
		p.Encoding = d.r.readString()
	}
	if n > 1 {
		p.Data = d.r.readBin()
	}
	if n > 2 {
		p.Ref = d.r.readBin()
		if len(p.Ref) != 0 && len(p.Ref) != HashSize {
			d.r.failf("%s: chunk reference of %d bytes", name, len(p.Ref))
		}
	}
	for ; n > 3 && d.r.err == nil; n-- {
		d.r.skip()
	}
}

func (d *binDecoder) object(name string, p fielder) {
	if d.next(name) {
		d.readStruct(name, p)
	}
}

func (d *binDecoder) failurePtr(name string, p **Failure) {
	if !d.next(name) || d.r.readNil() {
		return
	}
	f := new(Failure)
	d.readStruct(name, f)
	*p = f
}

func (d *binDecoder) retryPolicyPtr(name string, p **RetryPolicy) {
	if !d.next(name) || d.r.readNil() {
		return
	}
	rp := d.ed.newRetryPolicy()
	d.readStruct(name, rp)
	*p = rp
}

func (a *BudgetUpdated) fields(v fieldVisitor) {
	v.object("budget", &a.Budget)
	v.boolean("stop", &a.Stop)
	v.str("by", &a.By)
	v.str("reason", &a.Reason)
	v.int64("workflowTaskCompletedEventId", &a.WorkflowTaskCompletedEventID)
}

func (a *BudgetExceeded) fields(v fieldVisitor) {
	v.int64("scheduledEventId", &a.ScheduledEventID)
	v.str("reason", &a.Reason)
	v.object("used", &a.Used)
	v.int64("turns", &a.Turns)
}
