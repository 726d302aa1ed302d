package engine

import (
	"context"
	"errors"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	sched "github.com/cairnflow/cairn/engine/schedule"
	"github.com/cairnflow/cairn/history"
)

// The schedule methods of api.Service (schedules.go has the firing).

// CreateSchedule implements api.Service.
func (e *Engine) CreateSchedule(ctx context.Context, req *api.CreateScheduleRequest) (*api.CreateScheduleResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	spec, err := e.validateSchedule(req.ScheduleID, &req.Schedule)
	if err != nil {
		return nil, err
	}
	id := req.ScheduleID
	if err := e.shards.check(id); err != nil {
		return nil, err
	}
	ent := &schedEntry{spec: spec}
	ent.mu.Lock()
	defer ent.mu.Unlock()
	e.scheds.mu.Lock()
	if e.scheds.m == nil {
		e.scheds.m = map[string]*schedEntry{}
	}
	if _, ok := e.scheds.m[id]; ok {
		e.scheds.mu.Unlock()
		return nil, api.Errorf(api.ErrAlreadyStarted, "schedule %q already exists", id)
	}
	e.scheds.m[id] = ent
	e.scheds.mu.Unlock()
	now := e.now()
	rec := &scheduleRecord{ID: id, Schedule: req.Schedule, CreateTime: now, UpdateTime: now, LastNominal: now}
	err = e.putSchedule(ctx, "", id, rec, &history.Condition{Space: history.SpaceSchedule, Key: schedKey(id), Exists: false})
	if err != nil {
		e.scheds.mu.Lock()
		delete(e.scheds.m, id)
		e.scheds.mu.Unlock()
		if errors.Is(err, history.ErrConflict) {
			return nil, api.Errorf(api.ErrAlreadyStarted, "schedule %q already exists", id)
		}
		return nil, err
	}
	ent.rec = rec
	e.armSchedule(ent)
	return &api.CreateScheduleResponse{}, nil
}

// lockSchedule returns a served schedule with its lock held (unlock it).
func (e *Engine) lockSchedule(id string) (*schedEntry, error) {
	if id == "" {
		return nil, api.Errorf(api.ErrInvalidArgument, "a schedule id is required")
	}
	if err := e.shards.check(id); err != nil {
		return nil, err
	}
	ent := e.scheds.get(id)
	if ent != nil {
		ent.mu.Lock()
		if ent.rec != nil {
			return ent, nil
		}
		ent.mu.Unlock()
	}
	return nil, api.Errorf(api.ErrNotFound, "schedule %q", id)
}

// DescribeSchedule implements api.Service.
func (e *Engine) DescribeSchedule(ctx context.Context, req *api.DescribeScheduleRequest) (*api.DescribeScheduleResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	ent, err := e.lockSchedule(req.ScheduleID)
	if err != nil {
		return nil, err
	}
	rec, spec := ent.rec.clone(), ent.spec
	ent.mu.Unlock()
	e.refreshRecent(ctx, rec)
	return &api.DescribeScheduleResponse{Info: scheduleInfo(rec, spec)}, nil
}

// scheduleInfo is what a schedule's record tells its callers.
func scheduleInfo(rec *scheduleRecord, spec *sched.Compiled) api.ScheduleInfo {
	info := api.ScheduleInfo{ScheduleID: rec.ID, Schedule: rec.Schedule, CreateTime: rec.CreateTime, UpdateTime: rec.UpdateTime,
		RecentActions: rec.Recent, Actions: rec.Actions, OverlapSkipped: rec.OverlapSkipped, MissedCatchup: rec.MissedCatchup}
	for _, b := range rec.Buffered {
		info.Buffered = append(info.Buffered, b.Nominal)
	}
	if spec != nil && !rec.Schedule.Paused {
		t := rec.LastNominal
		for len(info.NextActionTimes) < maxNextTimes {
			n, ok := spec.Next(t)
			if !ok {
				break
			}
			info.NextActionTimes = append(info.NextActionTimes, n)
			t = n
		}
	}
	return info
}

// ListSchedules implements api.Service: from the store, by id.
func (e *Engine) ListSchedules(ctx context.Context, req *api.ListSchedulesRequest) (*api.ListSchedulesResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	size := req.PageSize
	if size <= 0 || size > 1000 {
		size = 100
	}
	opts := history.ScanOptions{Prefix: history.Key().Str("s").Bytes(), Limit: size + 1}
	if len(req.NextPageToken) > 0 {
		opts.After = req.NextPageToken
	}
	recs, err := e.store.Scan(ctx, history.SpaceSchedule, opts)
	if err != nil {
		return nil, storeErr(err)
	}
	resp := &api.ListSchedulesResponse{}
	for i, r := range recs {
		if i == size {
			resp.NextPageToken = recs[i-1].Key
			break
		}
		rec, err := decodeSchedule(r.Value)
		if err != nil {
			return nil, err
		}
		spec, _ := compileSpec(rec.Schedule.Spec) // nil if it no longer compiles: no next times
		resp.Schedules = append(resp.Schedules, scheduleInfo(rec, spec))
	}
	return resp, nil
}

// UpdateSchedule implements api.Service.
func (e *Engine) UpdateSchedule(ctx context.Context, req *api.UpdateScheduleRequest) (*api.UpdateScheduleResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	spec, err := e.validateSchedule(req.ScheduleID, &req.Schedule)
	if err != nil {
		return nil, err
	}
	ent, err := e.lockSchedule(req.ScheduleID)
	if err != nil {
		return nil, err
	}
	defer ent.mu.Unlock()
	now := e.now()
	rec := ent.rec.clone()
	paused, note := rec.Schedule.Paused, rec.Schedule.Note
	rec.Schedule = req.Schedule
	rec.Schedule.Paused, rec.Schedule.Note = paused, note
	rec.UpdateTime = now
	// The new spec starts from now: its times before are not caught up.
	rec.LastNominal = latest(rec.LastNominal, now)
	if err := e.installSchedule(ctx, "", ent, rec); err != nil {
		return nil, err
	}
	ent.spec = spec
	e.rearmSchedule(ent)
	return &api.UpdateScheduleResponse{}, nil
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// rearmSchedule arms a schedule whose next due time may have moved
// earlier or later: a stale heap entry finds nothing due and re-arms.
func (e *Engine) rearmSchedule(ent *schedEntry) {
	ent.armed = time.Time{}
	e.armSchedule(ent)
}

// PatchSchedule implements api.Service: pause or unpause, then trigger
// now, then backfill.
func (e *Engine) PatchSchedule(ctx context.Context, req *api.PatchScheduleRequest) (*api.PatchScheduleResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	if req.Pause && req.Unpause {
		return nil, api.Errorf(api.ErrInvalidArgument, "pause or unpause, not both")
	}
	if req.TriggerOverlap > api.OverlapAllowAll {
		return nil, api.Errorf(api.ErrInvalidArgument, "unknown overlap policy %d", req.TriggerOverlap)
	}
	ent, err := e.lockSchedule(req.ScheduleID)
	if err != nil {
		return nil, err
	}
	defer ent.mu.Unlock()
	var backfill [][]time.Time
	for _, r := range req.Backfill {
		if r.Overlap > api.OverlapAllowAll || r.End.Before(r.Start) {
			return nil, api.Errorf(api.ErrInvalidArgument, "backfill range %s–%s (overlap %s)", r.Start, r.End, r.Overlap)
		}
		times, more := ent.spec.Between(r.Start, r.End, maxBackfill)
		if more > 0 {
			return nil, api.Errorf(api.ErrLimitExceeded, "backfill %s–%s names %d actions, over %d", r.Start, r.End, len(times)+more, maxBackfill)
		}
		backfill = append(backfill, times)
	}
	now := e.now()
	rec := ent.rec.clone()
	switch {
	case req.Pause:
		rec.Schedule.Paused, rec.Schedule.Note = true, req.Note
	case req.Unpause:
		// The times that passed while paused are not caught up.
		rec.Schedule.Paused, rec.Schedule.Note = false, req.Note
		rec.LastNominal = latest(rec.LastNominal, now)
	case req.Note != "":
		rec.Schedule.Note = req.Note
	}
	var actErr error
	if req.TriggerNow || len(backfill) > 0 {
		e.refreshRecent(ctx, rec)
		rec.owner = ent
		if req.TriggerNow {
			actErr = e.act(ctx, rec, now, api.TriggerNow, req.TriggerOverlap, now, nil)
		}
		for i, times := range backfill {
			for _, n := range times {
				if actErr == nil {
					actErr = e.act(ctx, rec, n, api.TriggerBackfill, req.Backfill[i].Overlap, now, nil)
				}
			}
		}
	}
	// What was started is recorded even when a later action failed.
	if err := e.installSchedule(ctx, "", ent, rec); err != nil {
		return nil, err
	}
	e.rearmSchedule(ent)
	if actErr != nil {
		return nil, actErr
	}
	return &api.PatchScheduleResponse{}, nil
}

// DeleteSchedule implements api.Service.
func (e *Engine) DeleteSchedule(ctx context.Context, req *api.DeleteScheduleRequest) (*api.DeleteScheduleResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	ent, err := e.lockSchedule(req.ScheduleID)
	if err != nil {
		return nil, err
	}
	defer ent.mu.Unlock()
	if err := e.putSchedule(ctx, "", req.ScheduleID, nil, nil); err != nil {
		return nil, err
	}
	ent.rec = nil
	e.scheds.mu.Lock()
	delete(e.scheds.m, req.ScheduleID)
	e.scheds.mu.Unlock()
	return &api.DeleteScheduleResponse{}, nil
}
