package storecopy

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/cairnflow/cairn/history"
)

// Difference is one record or event the target holds differently from
// the source, or that only one of them holds.
type Difference struct {
	// Space and Key (hex) name a record.
	Space string `json:"space,omitempty"`
	Key   string `json:"key,omitempty"`
	// WorkflowID, RunID and EventID name a run or one of its events
	// (EventID 0: the run as a whole).
	WorkflowID string `json:"workflowId,omitempty"`
	RunID      string `json:"runId,omitempty"`
	EventID    int64  `json:"eventId,omitempty"`
	// Reason says what differs.
	Reason string `json:"reason"`
}

// String names the place and says what differs.
func (d Difference) String() string {
	if d.Space != "" {
		return fmt.Sprintf("%s record %s: %s", d.Space, d.Key, d.Reason)
	}
	if d.EventID != 0 {
		return fmt.Sprintf("workflow %q run %q event %d: %s", d.WorkflowID, d.RunID, d.EventID, d.Reason)
	}
	return fmt.Sprintf("workflow %q run %q: %s", d.WorkflowID, d.RunID, d.Reason)
}

func recordDiff(sp history.Space, key []byte, reason string) Difference {
	return Difference{Space: sp.String(), Key: hex.EncodeToString(key), Reason: reason}
}

func eventDiff(run history.RunRef, id int64, reason string) Difference {
	return Difference{WorkflowID: run.WorkflowID, RunID: run.RunID, EventID: id, Reason: reason}
}

// maxDifferences bounds the differences a MismatchError lists.
const maxDifferences = 20

// MismatchError is ErrMismatch with what differs: the first differences
// found, and how many more there were.
type MismatchError struct {
	Differences []Difference
	// More counts the differences found past the listed ones.
	More int
}

func mismatch(d ...Difference) *MismatchError { return &MismatchError{Differences: d} }

// Error lists the differences.
func (e *MismatchError) Error() string {
	var b strings.Builder
	b.WriteString(ErrMismatch.Error())
	if len(e.Differences) > 0 {
		b.WriteString(" (the target was not empty, or the source changed since the copy began): ")
	}
	for i, d := range e.Differences {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(d.String())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "; and %d more", e.More)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrMismatch) true.
func (e *MismatchError) Is(target error) bool { return target == ErrMismatch }

// add records a difference.
func (e *MismatchError) add(d Difference) {
	if len(e.Differences) < maxDifferences {
		e.Differences = append(e.Differences, d)
		return
	}
	e.More++
}

// count is the number of differences found.
func (e *MismatchError) count() int { return len(e.Differences) + e.More }
