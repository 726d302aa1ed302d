package engine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// TestModelCallAttemptIsHistorys: a model call whose attempts 1 and 3
// failed without reporting usage and whose attempts 2 and 4 reported some
// is at attempt 4 in the transcript, as in history — not 2, the number of
// usage reports — and describe's usage counts its 4 attempts.
func TestModelCallAttemptIsHistorys(t *testing.T) {
	h := newHarness(t)
	h.start("agent", "Agent")
	c := schedule("chat", "Chat", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Minute,
		RetryPolicy: &history.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 1, MaximumAttempts: 10}})
	c.ScheduleActivity.Metered = true
	c.ScheduleActivity.Input = history.Payload{Encoding: history.EncodingTranscript}
	h.complete(h.pollWFT("q"), c)

	used := history.Usage{Model: "m", PromptTokens: 100, CompletionTokens: 10}
	for attempt := int32(1); attempt <= 3; attempt++ {
		task := h.pollActivity("q")
		if task.Attempt != attempt {
			t.Fatalf("attempt %d dispatched as %d", attempt, task.Attempt)
		}
		req := &api.FailActivityRequest{TaskToken: task.TaskToken, Failure: history.Failure{Message: "provider 503"}, Identity: "w"}
		if attempt == 2 {
			req.Usage = used
		}
		if _, err := h.eng.FailActivity(h.ctx(), req); err != nil {
			t.Fatal(err)
		}
		h.advance(time.Second) // the retry is due
	}
	task := h.pollActivity("q")
	if _, err := h.eng.CompleteActivity(h.ctx(), &api.CompleteActivityRequest{TaskToken: task.TaskToken, Result: jsonPayload(`"hi"`),
		Usage: used, Identity: "w"}); err != nil {
		t.Fatal(err)
	}

	var started int32
	for _, ev := range h.history("agent") {
		if s, ok := ev.Attrs.(*history.ActivityStarted); ok {
			started = s.Attempt
		}
	}
	if started != 4 {
		t.Fatalf("history's last ActivityStarted is attempt %d, want 4", started)
	}
	tr, err := h.eng.GetTranscript(h.ctx(), &api.GetTranscriptRequest{WorkflowID: "agent"})
	if err != nil {
		t.Fatal(err)
	}
	var call *api.ModelCallInfo
	for _, it := range tr.Items {
		if it.ModelCall != nil {
			call = it.ModelCall
		}
	}
	if call == nil || call.Attempt != 4 || call.State != api.CallCompleted {
		t.Fatalf("the transcript's model call: %+v, want completed at attempt 4 (history's)", call)
	}
	if u := h.describe("agent").Usage; u == nil || u.Total.Attempts != 4 || u.Total.Tokens() != 220 {
		t.Fatalf("describe's usage %+v, want 220 tokens over 4 attempts", u)
	}
}
