package api

import (
	"fmt"
	"strings"
	"time"
)

// OverlapPolicy decides what a schedule does when an action comes due
// while the run its previous action started is still open.
type OverlapPolicy uint8

// The overlap policies (Temporal's names).
const (
	// OverlapSkip: the action is skipped (counted in OverlapSkipped).
	OverlapSkip OverlapPolicy = iota
	// OverlapBufferOne: the action waits until the open run closes; at
	// most one waits, a later one is skipped.
	OverlapBufferOne
	// OverlapBufferAll: every action waits, in order, for the run before
	// it to close.
	OverlapBufferAll
	// OverlapCancelOther: the open run is asked to cancel; the action
	// starts once it has closed.
	OverlapCancelOther
	// OverlapTerminateOther: the open run is terminated and the action
	// starts at once.
	OverlapTerminateOther
	// OverlapAllowAll: the action starts whatever is open.
	OverlapAllowAll
)

var overlapNames = []string{"skip", "buffer-one", "buffer-all", "cancel-other", "terminate-other", "allow-all"}

// String returns the policy's name as the CLI takes it ("buffer-one").
func (p OverlapPolicy) String() string {
	if int(p) < len(overlapNames) {
		return overlapNames[p]
	}
	return fmt.Sprintf("overlap(%d)", p)
}

// ParseOverlapPolicy reads a policy name ("skip", "buffer-one", "buffer-all",
// "cancel-other", "terminate-other", "allow-all"; "" is skip).
func ParseOverlapPolicy(s string) (OverlapPolicy, error) {
	if s == "" {
		return OverlapSkip, nil
	}
	for i, n := range overlapNames {
		if strings.EqualFold(s, n) || strings.EqualFold(strings.ReplaceAll(s, "_", "-"), n) {
			return OverlapPolicy(i), nil
		}
	}
	return 0, Errorf(ErrInvalidArgument, "overlap policy %q: want one of %s", s, strings.Join(overlapNames, ", "))
}

// DefaultCatchupWindow is SchedulePolicies.CatchupWindow's default (one
// year, as Temporal's SDKs default to): after downtime, every missed action
// of the last year still fires.
const DefaultCatchupWindow = 365 * 24 * time.Hour

// MinCatchupWindow is the shortest catch-up window a schedule may have.
const MinCatchupWindow = 10 * time.Second

// ScheduleSpec says when a schedule acts (package engine/schedule has the
// arithmetic): a cron expression or an interval with an offset, in a time
// zone, between Start and End, each action delayed by a jitter derived
// from the schedule id and the nominal time.
type ScheduleSpec struct {
	// Cron: 5 fields, 6 with seconds first, @hourly/@daily/@weekly/
	// @monthly/@yearly, or "@every 90s".
	Cron string `json:",omitempty"`
	// Interval and Offset: every Interval since the Unix epoch, plus
	// Offset.
	Interval time.Duration `json:",omitempty"`
	Offset   time.Duration `json:",omitempty"`
	// Jitter delays each action by up to Jitter.
	Jitter time.Duration `json:",omitempty"`
	// TimeZone is an IANA name for Cron (default UTC).
	TimeZone string `json:",omitempty"`
	// Start and End bound the nominal times (zero: none).
	Start time.Time `json:",omitzero"`
	End   time.Time `json:",omitzero"`
}

// ScheduleAction is the run each action starts. Its workflow id is the
// schedule id and the nominal time: "<ScheduleID>-<nominal time, RFC 3339 UTC>".
type ScheduleAction struct {
	WorkflowType     string
	TaskQueue        string
	Input            Payload
	ExecutionTimeout time.Duration `json:",omitempty"`
	RunTimeout       time.Duration `json:",omitempty"`
	TaskTimeout      time.Duration `json:",omitempty"`
}

// SchedulePolicies are the overlap policy and the catch-up window.
type SchedulePolicies struct {
	Overlap OverlapPolicy
	// CatchupWindow: after downtime, a missed action fires if its nominal
	// time is within the window of now; older ones are skipped (counted in
	// MissedCatchup). Zero: DefaultCatchupWindow.
	CatchupWindow time.Duration `json:",omitempty"`
}

// Schedule is what a schedule does and when.
type Schedule struct {
	Spec     ScheduleSpec
	Action   ScheduleAction
	Policies SchedulePolicies
	// Paused and Note: set at create; later changed by PatchSchedule only
	// (UpdateSchedule keeps them).
	Paused bool   `json:",omitempty"`
	Note   string `json:",omitempty"`
}

// The triggers of a schedule's action.
const (
	TriggerScheduled = "scheduled"
	TriggerNow       = "trigger"
	TriggerBackfill  = "backfill"
)

// ScheduleActionResult is one action a schedule took.
type ScheduleActionResult struct {
	// NominalTime is the time the spec named (the trigger's time for a
	// trigger); ActualTime when the run was started.
	NominalTime time.Time
	ActualTime  time.Time
	WorkflowID  string
	RunID       string
	// Trigger: TriggerScheduled, TriggerNow or TriggerBackfill.
	Trigger string
	// Status is the run's status when the schedule last looked (Running
	// until it saw it close).
	Status Status
	// Error says why no run was started (a start refused for good: no
	// RunID).
	Error string `json:",omitempty"`
}

// ScheduleInfo is a schedule and its state.
type ScheduleInfo struct {
	ScheduleID string
	Schedule   Schedule
	CreateTime time.Time
	UpdateTime time.Time
	// RecentActions are the last actions, oldest first (at most 10).
	RecentActions []ScheduleActionResult
	// NextActionTimes are the next nominal times (at most 5), none while
	// paused.
	NextActionTimes []time.Time
	// Buffered are the nominal times waiting for an open run to close.
	Buffered []time.Time
	// Actions counts the runs started; OverlapSkipped the actions skipped
	// by the overlap policy; MissedCatchup those older than the catch-up
	// window after downtime.
	Actions        int64
	OverlapSkipped int64
	MissedCatchup  int64
}

// CreateScheduleRequest creates a schedule. ErrAlreadyExists-like:
// ErrAlreadyStarted when the id is taken; ErrInvalidArgument for a bad spec.
type CreateScheduleRequest struct {
	ScheduleID string
	Schedule   Schedule
	Identity   string
}

// CreateScheduleResponse is empty.
type CreateScheduleResponse struct{}

// DescribeScheduleRequest names a schedule.
type DescribeScheduleRequest struct {
	ScheduleID string
}

// DescribeScheduleResponse is the schedule and its state.
type DescribeScheduleResponse struct {
	Info ScheduleInfo
}

// ListSchedulesRequest lists schedules by id, PageSize at a time (default
// 100), after NextPageToken.
type ListSchedulesRequest struct {
	PageSize      int
	NextPageToken []byte
}

// ListSchedulesResponse is a page of schedules.
type ListSchedulesResponse struct {
	Schedules     []ScheduleInfo
	NextPageToken []byte
}

// UpdateScheduleRequest replaces a schedule's spec, action and policies
// (its pause state, counters and recent actions stay).
type UpdateScheduleRequest struct {
	ScheduleID string
	Schedule   Schedule
	Identity   string
}

// UpdateScheduleResponse is empty.
type UpdateScheduleResponse struct{}

// BackfillRange asks for the actions of the nominal times in (Start, End]
// (the spec's times between them), under Overlap.
type BackfillRange struct {
	Start, End time.Time
	Overlap    OverlapPolicy
}

// PatchScheduleRequest pauses or unpauses a schedule (with a note),
// triggers an action now, or backfills time ranges — in that order, any
// together.
type PatchScheduleRequest struct {
	ScheduleID string
	Pause      bool
	Unpause    bool
	Note       string
	// TriggerNow starts an action at once, its nominal time now, under
	// TriggerOverlap.
	TriggerNow     bool
	TriggerOverlap OverlapPolicy
	Backfill       []BackfillRange
	Identity       string
}

// PatchScheduleResponse is empty.
type PatchScheduleResponse struct{}

// DeleteScheduleRequest deletes a schedule (the runs it started stay).
type DeleteScheduleRequest struct {
	ScheduleID string
	Identity   string
}

// DeleteScheduleResponse is empty.
type DeleteScheduleResponse struct{}
