package api

import (
	"time"

	"github.com/cairnflow/cairn/history"
)

// GetChunksRequest names payload chunks to read.
type GetChunksRequest struct {
	Hashes [][]byte
	// Ancestors also returns each chunk's parent, its parent's parent …
	// (in that order) up to MaxBytes of data.
	Ancestors bool
	// MaxBytes bounds the data of one answer (0 or more than 4 MiB: 4 MiB);
	// at least one chunk is always returned. Ask again for what is missing.
	MaxBytes int
	// Identity names the caller (a worker, a tool), for logs.
	Identity string
}

// GetChunksResponse holds the chunks found, in the order walked.
type GetChunksResponse struct {
	Chunks []history.Chunk
}

// UpdateBudgetRequest changes a run's budget (the current run when RunID
// is empty): a raise lets the held metered activities go on; Stop fails
// them with a non-retryable BudgetExceeded error, which the agent loop
// reports to the workflow (refused with ErrInvalidArgument when none is
// held: cancel the run to end it).
type UpdateBudgetRequest struct {
	WorkflowID string
	RunID      string
	Budget     history.Budget
	Stop       bool
	Identity   string
	Reason     string
}

// UpdateBudgetResponse is the budget's new status.
type UpdateBudgetResponse struct {
	Budget BudgetStatus
}

// StreamKind names a stream event.
type StreamKind string

// The stream event kinds.
const (
	// StreamText is a piece of the answer's text.
	StreamText StreamKind = "text"
	// StreamToolCall is a piece of a tool call (its name, or a fragment of
	// its JSON arguments).
	StreamToolCall StreamKind = "tool_call"
	// StreamDone: the attempt's answer is complete and recorded (the
	// activity completed).
	StreamDone StreamKind = "done"
	// StreamSuperseded: the attempt ended without an answer (it failed, its
	// lease was lost, another attempt took over); what it streamed is not
	// the answer and must not be shown as part of the next attempt's.
	StreamSuperseded StreamKind = "superseded"
)

// StreamDelta is a piece of live output an activity attempt publishes.
type StreamDelta struct {
	Kind StreamKind
	Text string
	// ToolCallIndex, ToolCallID and ToolName identify the tool call a
	// StreamToolCall delta belongs to.
	ToolCallIndex int
	ToolCallID    string
	ToolName      string
}

// PublishStreamRequest publishes an attempt's live output. Nothing is
// written to history; the engine keeps a bounded window per run in memory.
type PublishStreamRequest struct {
	TaskToken []byte
	Deltas    []StreamDelta
}

// PublishStreamResponse says whether the attempt should stop.
type PublishStreamResponse struct {
	CancelRequested bool
}

// StreamEvent is one event of a run's live stream, numbered per run.
type StreamEvent struct {
	Seq              int64
	Time             time.Time
	ScheduledEventID int64
	Attempt          int32
	ActivityType     string
	StreamDelta
}

// WatchStreamRequest reads a run's live stream after AfterSeq, long-polling
// with Wait until there is something or the run closes.
type WatchStreamRequest struct {
	WorkflowID string
	RunID      string
	AfterSeq   int64
	Wait       bool
}

// WatchStreamResponse holds stream events in order. Gap is set when events
// after AfterSeq were dropped from the window (the reader was too slow or
// arrived late); the text of an attempt still streaming is then resent
// whole, as one event. Closed: the run has closed; nothing more will come.
type WatchStreamResponse struct {
	RunID   string
	Events  []StreamEvent
	NextSeq int64
	Gap     bool
	Closed  bool
}

// GetTranscriptRequest names a run (the current one when RunID is empty).
type GetTranscriptRequest struct {
	WorkflowID string
	RunID      string
}

// GetTranscriptResponse is an agent run's conversation as a list of items
// in order: messages, the model calls that answered, and the tool calls
// they asked for with what became of them.
type GetTranscriptResponse struct {
	RunID  string
	Status Status
	Items  []TranscriptItem
	Usage  UsageSummary
	Budget *BudgetStatus
	// Ignored lists, in the order received, the approval signals that
	// applied to no tool call (sdk/agent records them; see docs/agents.md).
	Ignored []IgnoredApproval `json:",omitempty"`
}

// IgnoredApproval is an approval signal the agent received and ignored:
// what it said, why it applied to no call, and the event that records it.
type IgnoredApproval struct {
	EventID  int64
	CallID   string
	Approved bool
	By       string
	Reason   string
	Why      string
}

// The transcript item kinds.
const (
	ItemMessage   = "message"
	ItemModelCall = "model_call"
	ItemToolCall  = "tool_call"
)

// TranscriptItem is one item: exactly the field Kind names is set.
type TranscriptItem struct {
	Kind      string
	Message   *history.ChatMessage `json:",omitempty"`
	ModelCall *ModelCallInfo       `json:",omitempty"`
	ToolCall  *ToolCallInfo        `json:",omitempty"`
}

// The states of model and tool calls in a transcript.
const (
	CallScheduled        = "scheduled"
	CallRunning          = "running"
	CallRetrying         = "retrying"
	CallCompleted        = "completed"
	CallFailed           = "failed"
	CallHeld             = "held" // a model call waiting for a budget raise
	CallAwaitingApproval = "awaiting_approval"
	CallRejected         = "rejected"
	CallUnknown          = "outcome_unknown" // paused for a person
)

// ModelCallInfo describes one model call (a metered activity).
type ModelCallInfo struct {
	ScheduledEventID int64
	ActivityType     string
	Model            string
	State            string
	Attempt          int32
	Usage            history.Usage
	LastFailure      *Failure `json:",omitempty"`
}

// ToolCallInfo describes one tool call the model asked for.
type ToolCallInfo struct {
	ID        string
	Name      string
	Arguments string
	// ScheduledEventID is the tool's activity (0 before it is scheduled,
	// e.g. while it awaits approval or after a rejection).
	ScheduledEventID int64
	State            string
	Effect           history.EffectClass
	IdempotencyKey   string `json:",omitempty"`
	Result           string `json:",omitempty"` // what the model is told
	ApprovedBy       string `json:",omitempty"`
	// EffectKnown says Effect is the call's class: the one its activity
	// was recorded with, or, before it is scheduled (awaiting approval,
	// rejected), its tool's as the tool's workers declared it. False:
	// neither is known (Effect then says nothing).
	EffectKnown bool `json:",omitempty"`
}
