package agent

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cairnflow/cairn/sdk"
)

// strictApprovalsChange versions the strict reading of approval signals
// (decodeApproval) and the wording of a rejection the model is told
// (rejectionText). Where the older behaviour would have done something
// else, the agent asks sdk.GetVersion which applies: a run whose history
// predates the change replays as it was recorded (a mistyped approval
// read as a rejection), every other run gets the strict reading. Runs in
// which both agree record no version marker.
const strictApprovalsChange = "cairn.agent.strict-approvals"

// The fields of an approval signal, each under either of its two
// accepted spellings: the Go field names of Approval (what the Go client
// sends, and what docs/agents.md shows) and the lower-case names of
// history.Approval's JSON tags (call_id as in history.IgnoredApproval).
const (
	fieldCallID = iota
	fieldApproved
	fieldBy
	fieldReason
	numFields
)

// approvalKeys are the accepted spellings of each field, for messages.
var approvalKeys = [numFields][2]string{
	fieldCallID:   {"CallID", "call_id"},
	fieldApproved: {"Approved", "approved"},
	fieldBy:       {"By", "by"},
	fieldReason:   {"Reason", "reason"},
}

// approvalField returns the field a key names, or -1.
func approvalField(key string) int {
	for f, spellings := range approvalKeys {
		if key == spellings[0] || key == spellings[1] {
			return f
		}
	}
	return -1
}

// readApproval reads an approval signal's value. It reads it strictly
// (decodeApproval); where the lenient reading of older versions
// (legacyApproval) gives another answer, the run's version decides (see
// strictApprovalsChange).
func (a *Agent) readApproval(ctx sdk.Context, v any) (Approval, error) {
	ap, err := decodeApproval(v)
	old, oldErr := legacyApproval(v)
	same := (err == nil) == (oldErr == nil) && ap.CallID == old.CallID && (err != nil || ap == old)
	if same || sdk.GetVersion(ctx, strictApprovalsChange, sdk.DefaultVersion, 1) >= 1 {
		return ap, err
	}
	return old, oldErr
}

// decodeApproval reads a received approval signal's value (as the
// converter decoded it: a map for an object) into an Approval, strictly:
// an object whose keys are Approval's fields, spelt as the Go fields
// (CallID, Approved, By, Reason) or as JSON names (call_id, approved, by,
// reason), with "Approved" present and a boolean, the others strings (or
// null). Anything else — another kind of value, an unknown or misspelt
// key, a field given twice, a value of the wrong type, no decision — is an
// error saying what is wrong; the fields read before it are returned, for
// the ignored-approval record.
func decodeApproval(v any) (Approval, error) {
	var ap Approval
	m, ok := v.(map[string]any)
	if !ok {
		return ap, fmt.Errorf("a %s, not an object", jsonKind(v))
	}
	var used [numFields]string
	for _, k := range sortedKeys(m) {
		f := approvalField(k)
		switch {
		case f < 0:
			return ap, fmt.Errorf("unknown field %q (an approval has CallID, Approved, By and Reason; or call_id, approved, by and reason)", k)
		case used[f] != "":
			return ap, fmt.Errorf("%q and %q are the same field", used[f], k)
		}
		used[f] = k
		if err := setApprovalField(&ap, f, k, m[k]); err != nil {
			return ap, err
		}
	}
	if used[fieldApproved] == "" {
		return ap, errors.New(`it does not say whether the call is approved ("Approved": true or false)`)
	}
	return ap, nil
}

// sortedKeys returns m's keys in order: what decodeApproval reports must
// not depend on the map's iteration order (workflow code is replayed).
func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// setApprovalField sets field f of ap from the value of key.
func setApprovalField(ap *Approval, f int, key string, v any) error {
	if f == fieldApproved {
		b, ok := v.(bool)
		if !ok {
			return fmt.Errorf("%q is a %s, not true or false", key, jsonKind(v))
		}
		ap.Approved = b
		return nil
	}
	if v == nil {
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%q is a %s, not a string", key, jsonKind(v))
	}
	switch f {
	case fieldCallID:
		ap.CallID = s
	case fieldBy:
		ap.By = s
	case fieldReason:
		ap.Reason = s
	}
	return nil
}

// legacyApproval is how versions before strictApprovalsChange read an
// approval signal: through the converter, ignoring unknown keys, so that
// {"approved": true} or {} read as a rejection by nobody. Only runs whose
// history recorded that reading use it (readApproval).
func legacyApproval(v any) (Approval, error) {
	var ap Approval
	if _, isMap := v.(map[string]any); !isMap {
		return ap, fmt.Errorf("a %s, not an object", jsonKind(v))
	}
	conv := sdk.DefaultConverter()
	p, err := conv.ToPayload(v)
	if err != nil {
		return ap, err
	}
	if err := conv.FromPayload(p, &ap); err != nil {
		return Approval{}, err
	}
	return ap, nil
}

// jsonKind names the JSON kind of a decoded value.
func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return "number"
}

// rejection is what the model is told of a call that was not approved:
// rejectionText, or what older versions said where it differs and the
// run's history predates the change (strictApprovalsChange).
func (a *Agent) rejection(ctx sdk.Context, ap Approval, timedOut bool) string {
	text, old := rejectionText(ap, timedOut), legacyRejectionText(ap)
	if text == old || sdk.GetVersion(ctx, strictApprovalsChange, sdk.DefaultVersion, 1) >= 1 {
		return text
	}
	return old
}

// rejectionText says who rejected the call and why — or that nobody
// approved it in time.
func rejectionText(ap Approval, timedOut bool) string {
	if timedOut {
		return fmt.Sprintf("rejected by nobody (the approval timed out): %s. The tool did not run.", ap.Reason)
	}
	who := "rejected by " + ap.By
	if ap.By == "" {
		who = "rejected (the approval names nobody)"
	}
	if ap.Reason == "" {
		return who + ". The tool did not run."
	}
	return fmt.Sprintf("%s: %s. The tool did not run.", who, ap.Reason)
}

// legacyRejectionText is what versions before strictApprovalsChange told
// the model: a rejection naming nobody read as a timeout.
func legacyRejectionText(ap Approval) string {
	who := ap.By
	if who == "" {
		who = "nobody (the approval timed out)"
	}
	return fmt.Sprintf("rejected by %s: %s. The tool did not run.", who, ap.Reason)
}
