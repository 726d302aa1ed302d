package machine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Activities: retries, timeouts, heartbeats, cancellation and fencing,
// scripted as the engine's tests drove them through the service (see
// newServiceScript).

func cancelActivityCmd(schedID int64) api.Command {
	return api.Command{Type: api.CommandRequestCancelActivity, RequestCancelActivity: &api.RequestCancelActivityCommand{ScheduledEventID: schedID}}
}

func TestActivityNonRetryable(t *testing.T) {
	s := newServiceScript(t)
	retry := &history.RetryPolicy{MaximumAttempts: 10, NonRetryableErrorTypes: []string{"BadInput"}}
	opts := history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry}

	// A failure flagged non-retryable.
	s.startWithActivity("flag", history.Read, opts)
	if err := s.fail(s.poll(), history.Failure{Type: "Other", Message: "no", NonRetryable: true}); err != nil {
		t.Fatal(err)
	}
	s.dispatchWFT()
	f, _ := find[*history.ActivityFailed](t, s.history)
	if f.Attempt != 1 || f.Failure.Message != "no" || !f.Failure.NonRetryable {
		t.Fatalf("activity failed %+v", f)
	}
	s.completeTask(completeWF(`1`))

	// A failure whose type the policy lists.
	s.startWithActivity("typed", history.Read, opts)
	if err := s.fail(s.poll(), history.Failure{Type: "BadInput", Message: "bad"}); err != nil {
		t.Fatal(err)
	}
	s.dispatchWFT()
	wantTypes(t, s.history, "WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityFailed")
	if f, _ := find[*history.ActivityFailed](t, s.history); f.Failure.Type != "BadInput" {
		t.Fatalf("activity failed %+v", f)
	}
	s.golden()
}

func TestActivityMaximumAttempts(t *testing.T) {
	s := newServiceScript(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2}
	s.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute, RetryPolicy: retry})
	if err := s.fail(s.poll(), history.Failure{Type: "E", Message: "one"}); err != nil {
		t.Fatal(err)
	}
	s.wait(time.Second)
	if err := s.fail(s.poll(), history.Failure{Type: "E", Message: "two"}); err != nil {
		t.Fatal(err)
	}
	s.dispatchWFT()
	f, _ := find[*history.ActivityFailed](t, s.history)
	if f.Attempt != 2 || f.Failure.Message != "two" {
		t.Fatalf("activity failed %+v", f)
	}
	if len(s.st.Activities) != 0 {
		t.Fatalf("pending %+v", s.st.Activities)
	}
	s.golden()
}

func TestActivityHeartbeatTimeout(t *testing.T) {
	s := newServiceScript(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 2}
	s.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: 10 * time.Second,
		RetryPolicy: retry})
	act := s.poll()
	if !act.deadline.Equal(testStart.Add(10*time.Second)) || s.st.Activities[3].Options.HeartbeatTimeout != 10*time.Second {
		t.Fatalf("task %+v", act)
	}
	// Heartbeats keep extending the lease well past the first deadline.
	for i := range 5 {
		s.wait(9 * time.Second)
		deadline, cancel, err := s.heartbeat(act, `{"progress":`+string(rune('0'+i))+`}`)
		if err != nil || cancel || !deadline.Equal(s.now.Add(10*time.Second)) {
			t.Fatalf("heartbeat %d: %v %v %v", i, deadline, cancel, err)
		}
	}
	if a := s.st.Activities[3]; a.State != api.ActivityStateStarted || !a.LastHeartbeat.Equal(s.now) ||
		string(a.HeartbeatDetails.Data) != `{"progress":4}` || !a.LeaseDeadline.Equal(s.now.Add(10*time.Second)) {
		t.Fatalf("pending %+v", a)
	}
	// Silence: the lease ends 10 s after the last heartbeat.
	s.wait(10 * time.Second)
	if a := s.st.Activities[3]; a.State != api.ActivityStateBackoff || a.LastFailure == nil {
		t.Fatalf("after heartbeat timeout %+v", a)
	}
	_, _, err := s.heartbeat(act, "")
	wantErr(t, err, api.ErrStaleAttempt)
	s.wait(time.Second)
	// The retry carries the last heartbeat's details.
	act = s.poll()
	if act.attempt != 2 || string(act.details.Data) != `{"progress":4}` {
		t.Fatalf("retry %+v", act)
	}
	s.wait(10 * time.Second)
	s.dispatchWFT()
	to, _ := find[*history.ActivityTimedOut](t, s.history)
	if to.Timeout != "heartbeat" || to.Attempt != 2 {
		t.Fatalf("timed out %+v", to)
	}
	s.golden()
}

func TestActivityCancel(t *testing.T) {
	s := newServiceScript(t)
	s.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour, HeartbeatTimeout: time.Minute})
	act := s.poll()
	if _, cancel, err := s.heartbeat(act, `1`); err != nil || cancel {
		t.Fatalf("cancel requested before the request (%v)", err)
	}
	s.signal("stop", `1`)
	s.complete(cancelActivityCmd(3))
	// A running attempt learns it from its heartbeat; nothing closes yet.
	if _, cancel, err := s.heartbeat(act, `2`); err != nil || !cancel {
		t.Fatalf("heartbeat does not report the cancel request (%v)", err)
	}
	if len(s.st.Activities) != 1 || !s.st.Activities[3].CancelRequested {
		t.Fatalf("pending %+v", s.st.Activities)
	}
	r := act.report(ReportCanceled)
	r.Failure = history.Failure{Type: "Canceled"}
	if err := s.send(r); err != nil {
		t.Fatal(err)
	}
	s.dispatchWFT()
	if _, ev := find[*history.ActivityCanceled](t, s.history); ev.ID != s.st.NextEventID-1 {
		t.Fatalf("ActivityCanceled is event %d of %d", ev.ID, s.st.NextEventID-1)
	}
	s.completeTask(completeWF(`1`))

	// A scheduled activity that no worker took is canceled at once.
	s.startWithActivity("wf2", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour})
	s.signal("stop", `1`)
	s.complete(cancelActivityCmd(3))
	s.dispatchWFT()
	wantTypes(t, s.history, `WorkflowStarted WorkflowTaskCompleted ActivityScheduled SignalReceived WorkflowTaskCompleted
		ActivityCancelRequested ActivityCanceled`)
	s.golden()
}

func TestActivityScheduleToCloseTimeout(t *testing.T) {
	s := newServiceScript(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1}
	s.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: 10 * time.Second,
		ScheduleToCloseTimeout: 25 * time.Second, RetryPolicy: retry})
	for attempt := int32(1); attempt <= 2; attempt++ {
		if act := s.poll(); act.attempt != attempt {
			t.Fatalf("attempt %d, want %d", act.attempt, attempt)
		}
		s.wait(10 * time.Second) // lease expires
		s.wait(time.Second)      // backoff
	}
	// 22 s: attempt 3 runs until the schedule-to-close deadline at 25 s.
	s.poll()
	s.wait(3*time.Second - time.Millisecond)
	s.noWFT()
	s.wait(time.Millisecond)
	s.dispatchWFT()
	to, ev := find[*history.ActivityTimedOut](t, s.history)
	if to.Timeout != "schedule_to_close" || to.Attempt != 3 || !ev.Time.Equal(testStart.Add(25*time.Second)) {
		t.Fatalf("timed out %+v at %v", to, ev.Time)
	}
	s.golden()
}

func TestStaleAttemptsFenced(t *testing.T) {
	s := newServiceScript(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second}
	s.startWithActivity("wf", history.Read, history.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
	old := s.poll()
	s.wait(10 * time.Second)
	s.wait(time.Second)
	cur := s.poll()
	if cur.attempt != 2 || cur.epoch == old.epoch {
		t.Fatalf("re-dispatch %+v", cur)
	}
	n := len(s.history)
	wantErr(t, s.succeed(old, `"late"`), api.ErrStaleAttempt)
	wantErr(t, s.fail(old, history.Failure{Message: "late"}), api.ErrStaleAttempt)
	_, _, err := s.heartbeat(old, "")
	wantErr(t, err, api.ErrStaleAttempt)
	if len(s.history) != n {
		t.Fatal("stale calls wrote events")
	}
	if a := s.st.Activities[3]; a.State != api.ActivityStateStarted || a.LeaseEpoch != cur.epoch {
		t.Fatalf("current attempt disturbed: %+v", a)
	}
	if _, _, err := s.heartbeat(cur, `1`); err != nil {
		t.Fatal(err)
	}
	if err := s.succeed(cur, `"on time"`); err != nil {
		t.Fatal(err)
	}
	s.dispatchWFT()
	if c, _ := find[*history.ActivityCompleted](t, s.history); string(c.Result.Data) != `"on time"` {
		t.Fatalf("completed %+v", c)
	}
	wantErr(t, s.send(cur.report(ReportCompleted)), api.ErrStaleAttempt)
	s.golden()
}

// An Idempotent action counts attempts, not duplicates: the downstream
// deduplicates on the key by contract. A late success of an earlier
// attempt completes the action (the running attempt gets the same result
// from the downstream), and the running attempt's success afterwards is a
// confirmation — never a duplicate alarm.
func TestLateSuccessOfIdempotentActionIsNoDuplicate(t *testing.T) {
	s := newServiceScript(t)
	retry := &history.RetryPolicy{InitialInterval: time.Second}
	s.startWithActivity("wf", history.Idempotent, history.ActivityOptions{StartToCloseTimeout: 10 * time.Second, RetryPolicy: retry})
	old := s.poll()
	if old.key == "" {
		t.Fatal("no idempotency key")
	}
	s.wait(10 * time.Second)
	s.wait(time.Second)
	cur := s.poll()
	if cur.key != old.key || cur.attempt != 2 {
		t.Fatalf("retry %+v", cur)
	}
	late := old.report(ReportCompleted)
	late.Result, late.Identity = jsonPayload(`"paid"`), "old"
	if err := s.send(late); err != nil {
		t.Fatalf("late success of attempt 1: %v, want it accepted", err)
	}
	wantErr(t, s.succeed(cur, `"paid"`), api.ErrStaleAttempt)
	wantTypes(t, s.history, `WorkflowStarted WorkflowTaskCompleted ActivityScheduled ActivityStarted ActivityStarted ActivityCompleted
		ActivityLateReport`)
	c, _ := find[*history.ActivityCompleted](t, s.history)
	lr, _ := find[*history.ActivityLateReport](t, s.history)
	if c.Identity != "old" || lr.Verdict != "confirmation" || lr.Attempt != 2 {
		t.Fatalf("completed %+v, late report %+v", c, lr)
	}
	if s.st.Duplicates != 0 {
		t.Fatalf("duplicates %d, want none", s.st.Duplicates)
	}
	s.golden()
}
