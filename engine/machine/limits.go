package machine

import (
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
)

// Limits bound what one run may hold. Every limit ends in a typed, durable
// outcome with nothing partially written (docs/reliability.md, "Limits are
// outcomes"): a client's input over a limit is refused with
// api.ErrLimitExceeded; a workflow task whose commands break one fails with
// cause api.CauseLimitExceeded recorded in history, and the run is
// terminated after MaxWorkflowTaskRefusals of them (at once at the history
// limit); an activity's oversized result or details are recorded without
// them, never refused into a lease timeout.
type Limits struct {
	// MaxPayloadBytes bounds the bytes any single payload (input, result,
	// signal, heartbeat details) adds: what it references as a stored
	// chunk does not count. Default 2 MB.
	MaxPayloadBytes int
	// InlinePayloadBytes is the largest payload recorded inline in its
	// event; a larger one is stored as a content-addressed chunk and the
	// event keeps its reference. Default 16 KiB.
	InlinePayloadBytes int
	// MaxHistoryEvents bounds a run's history. Default 51,200.
	MaxHistoryEvents int64
	// SuggestContinueAsNewAt sets WorkflowTask.ContinueAsNewSuggested from
	// this history length on. Default 10,240.
	SuggestContinueAsNewAt int64
	// SuggestContinueAsNewBytes makes workflow code see the suggestion
	// from this history size on (sdk.WorkflowInfo.HistorySize: the encoded
	// size of the events it has seen). Default 8 MiB.
	SuggestContinueAsNewBytes int64
	// MaxPendingActivities, MaxPendingChildren and MaxPendingTimers bound
	// what one run may have outstanding. Default 2,000 each.
	MaxPendingActivities int
	MaxPendingChildren   int
	MaxPendingTimers     int
	// MaxIDBytes bounds workflow, run, activity and timer ids, names and
	// task queue names. Default 1,000.
	MaxIDBytes int
	// MaxSignals bounds the signals one run may receive. Default 10,000.
	MaxSignals int
	// MaxUpdates bounds the updates one run may accept (each is
	// remembered in the run's state, to deduplicate update ids). Default
	// 1,000: a run that takes more should continue as new.
	MaxUpdates int
	// MaxWorkflowTaskRefusals is how many workflow tasks in a row may be
	// refused for breaking a limit (or fail with api.CauseLimitExceeded or
	// api.CauseBadCommands) before the run is terminated with that reason:
	// replaying the same history through the same code would produce the
	// same commands forever. Default 3.
	MaxWorkflowTaskRefusals int
}

// DefaultLimits returns the documented defaults.
func DefaultLimits() Limits {
	return Limits{
		MaxPayloadBytes:           2 << 20,
		InlinePayloadBytes:        16 << 10,
		MaxHistoryEvents:          51200,
		SuggestContinueAsNewAt:    api.DefaultSuggestContinueAsNewAt,
		SuggestContinueAsNewBytes: api.DefaultSuggestContinueAsNewBytes,
		MaxPendingActivities:      2000,
		MaxPendingChildren:        2000,
		MaxPendingTimers:          2000,
		MaxIDBytes:                1000,
		MaxSignals:                10000,
		MaxWorkflowTaskRefusals:   3,
		MaxUpdates:                1000,
	}
}

// FillDefaults sets every limit left zero to its default
// (DefaultLimits).
func (l *Limits) FillDefaults() {
	d := DefaultLimits()
	if l.MaxPayloadBytes == 0 {
		l.MaxPayloadBytes = d.MaxPayloadBytes
	}
	if l.InlinePayloadBytes == 0 {
		l.InlinePayloadBytes = d.InlinePayloadBytes
	}
	if l.MaxHistoryEvents == 0 {
		l.MaxHistoryEvents = d.MaxHistoryEvents
	}
	if l.SuggestContinueAsNewAt == 0 {
		l.SuggestContinueAsNewAt = d.SuggestContinueAsNewAt
	}
	if l.SuggestContinueAsNewBytes == 0 {
		l.SuggestContinueAsNewBytes = d.SuggestContinueAsNewBytes
	}
	if l.MaxPendingActivities == 0 {
		l.MaxPendingActivities = d.MaxPendingActivities
	}
	if l.MaxPendingChildren == 0 {
		l.MaxPendingChildren = d.MaxPendingChildren
	}
	if l.MaxPendingTimers == 0 {
		l.MaxPendingTimers = d.MaxPendingTimers
	}
	if l.MaxIDBytes == 0 {
		l.MaxIDBytes = d.MaxIDBytes
	}
	if l.MaxSignals == 0 {
		l.MaxSignals = d.MaxSignals
	}
	if l.MaxWorkflowTaskRefusals == 0 {
		l.MaxWorkflowTaskRefusals = d.MaxWorkflowTaskRefusals
	}
	if l.MaxUpdates == 0 {
		l.MaxUpdates = d.MaxUpdates
	}
}

// Validate reports limits that cannot work.
func (l Limits) Validate() error {
	if l.MaxPayloadBytes < 0 || l.InlinePayloadBytes < 0 || l.MaxHistoryEvents < 0 || l.SuggestContinueAsNewAt < 0 || l.SuggestContinueAsNewBytes < 0 ||
		l.MaxPendingActivities < 0 || l.MaxPendingChildren < 0 || l.MaxPendingTimers < 0 || l.MaxIDBytes < 0 ||
		l.MaxSignals < 0 || l.MaxWorkflowTaskRefusals < 0 || l.MaxUpdates < 0 {
		return fmt.Errorf("%w: limits must not be negative", api.ErrInvalidArgument)
	}
	return nil
}

// Defaults are the values the engine uses when a request leaves a timeout
// or policy unset.
type Defaults struct {
	// TaskTimeout bounds a workflow task. Default 10 s.
	TaskTimeout time.Duration
	// StartToCloseTimeout is used for activities that set neither
	// start-to-close nor schedule-to-close. Default 10 min.
	StartToCloseTimeout time.Duration
	// RetryInitialInterval is the first retry backoff. Default 1 s.
	RetryInitialInterval time.Duration
	// RetryBackoffCoefficient multiplies each backoff. Default 2.
	RetryBackoffCoefficient float64
	// StickyTimeout is how long a workflow task waits on a worker's sticky
	// queue before it falls back to the normal queue. Default 2 s.
	StickyTimeout time.Duration
	// WorkflowTaskMaxBackoff caps the delay between retries of a failing
	// workflow task. Default 10 min.
	WorkflowTaskMaxBackoff time.Duration
}

// DefaultDefaults returns the documented defaults.
func DefaultDefaults() Defaults {
	return Defaults{
		TaskTimeout:             10 * time.Second,
		StartToCloseTimeout:     10 * time.Minute,
		RetryInitialInterval:    time.Second,
		RetryBackoffCoefficient: 2,
		StickyTimeout:           2 * time.Second,
		WorkflowTaskMaxBackoff:  10 * time.Minute,
	}
}

// FillDefaults sets every value left zero to its default
// (DefaultDefaults).
func (d *Defaults) FillDefaults() {
	z := DefaultDefaults()
	if d.TaskTimeout == 0 {
		d.TaskTimeout = z.TaskTimeout
	}
	if d.StartToCloseTimeout == 0 {
		d.StartToCloseTimeout = z.StartToCloseTimeout
	}
	if d.RetryInitialInterval == 0 {
		d.RetryInitialInterval = z.RetryInitialInterval
	}
	if d.RetryBackoffCoefficient == 0 {
		d.RetryBackoffCoefficient = z.RetryBackoffCoefficient
	}
	if d.StickyTimeout == 0 {
		d.StickyTimeout = z.StickyTimeout
	}
	if d.WorkflowTaskMaxBackoff == 0 {
		d.WorkflowTaskMaxBackoff = z.WorkflowTaskMaxBackoff
	}
}
