package ui

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/cairnflow/cairn/engine/api"
)

// The schedules page: every schedule with its next action, and one
// schedule's spec, state, next and recent actions, with pause, unpause and
// trigger.

// schedulesView is the list of schedules ("schedules", [] when none).
type schedulesView struct {
	Schedules []api.ScheduleInfo `view:"keep"`
}

func (h *Handler) apiSchedules(r *http.Request) (any, error) {
	ctx, cancel := ctxOf(r)
	defer cancel()
	resp, err := h.svc.ListSchedules(ctx, &api.ListSchedulesRequest{PageSize: 1000})
	if err != nil {
		return nil, err
	}
	return schedulesView{Schedules: resp.Schedules}, nil
}

func (h *Handler) apiSchedule(r *http.Request) (any, error) {
	id := strings.TrimSpace(r.URL.Query().Get("id"))
	if id == "" {
		return nil, invalid("id is required")
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	resp, err := h.svc.DescribeSchedule(ctx, &api.DescribeScheduleRequest{ScheduleID: id})
	if err != nil {
		return nil, err
	}
	return resp.Info, nil
}

// scheduleAction is the body of POST /api/schedule: {"scheduleId", "action":
// "pause"|"unpause"|"trigger", "note"}.
type scheduleAction struct {
	ScheduleID string `json:"scheduleId"`
	Action     string `json:"action"`
	Note       string `json:"note"`
}

// scheduleDone answers a schedule action.
type scheduleDone struct {
	ScheduleID string
	Action     string
}

func (h *Handler) apiScheduleAction(r *http.Request, body []byte) (any, error) {
	var a scheduleAction
	dec := json.NewDecoder(strings.NewReader(string(body)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&a); err != nil {
		return nil, invalid("malformed request: %v", err)
	}
	if a.ScheduleID == "" {
		return nil, invalid("scheduleId is required")
	}
	req := &api.PatchScheduleRequest{ScheduleID: a.ScheduleID, Note: a.Note, Identity: "web UI"}
	switch a.Action {
	case "pause":
		req.Pause = true
	case "unpause":
		req.Unpause = true
	case "trigger":
		req.TriggerNow, req.TriggerOverlap = true, api.OverlapAllowAll
	default:
		return nil, invalid("action %q: want pause, unpause or trigger", a.Action)
	}
	ctx, cancel := ctxOf(r)
	defer cancel()
	_, err := h.svc.PatchSchedule(ctx, req)
	return scheduleDone{a.ScheduleID, a.Action}, err
}
