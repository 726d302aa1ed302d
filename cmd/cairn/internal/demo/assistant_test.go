package demo

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// The assistant is an agent-kit run (the agent loop, llm.Chat against the
// fake endpoint, a tool activity), and reads back as an agent's conversation: the messages
// in order, each model call with its usage, and the tool call linked to
// its activity and completed (GetTranscript).
func TestAssistantTranscript(t *testing.T) {
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.Open(engine.Options{Store: st, Pricing: engine.Pricing{AssistantModel: {Input: 1, Output: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	c := client.NewLocal(eng, client.Options{})
	w, err := worker.New(c, worker.Options{TaskQueue: TaskQueue, Identity: "assistant-test", GracefulStop: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ServeAssistantModel(0)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	m, err := llm.New(llm.Config{BaseURL: srv.URL, Model: AssistantModel})
	if err != nil {
		t.Fatal(err)
	}
	if err := RegisterAssistant(w, &Assistants{}, m); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- w.Run(wctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	var answer string
	if _, err := c.ExecuteWorkflow(ctx, client.StartOptions{ID: "a-1", TaskQueue: TaskQueue}, Assistant, Question{Text: "Can we pay INV-7?"}, &answer); err != nil {
		t.Fatal(err)
	}
	if answer != "INV-7 is $25,000 to Hooli, due 2026-12-15; it is over the $10,000 budget: a person must approve it." {
		t.Fatalf("answer: %q", answer)
	}
	tr, err := eng.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: "a-1"})
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	var tool *api.ToolCallInfo
	calls := 0
	for _, it := range tr.Items {
		k := it.Kind
		switch {
		case it.Message != nil:
			k += ":" + it.Message.Role
		case it.ToolCall != nil:
			tool = it.ToolCall
		case it.ModelCall != nil:
			calls++
			if it.ModelCall.State != api.CallCompleted || it.ModelCall.Usage.Tokens() == 0 || it.ModelCall.Usage.CostUSD == 0 {
				t.Fatalf("model call: %+v", it.ModelCall)
			}
		}
		kinds = append(kinds, k)
	}
	want := "message:system message:user model_call message:assistant tool_call message:tool model_call message:assistant"
	if got := strings.Join(kinds, " "); got != want {
		t.Fatalf("items: %s\nwant:  %s", got, want)
	}
	if tool == nil || tool.Name != "lookup_invoice" || tool.State != api.CallCompleted || tool.ScheduledEventID == 0 || tool.Result == "" {
		t.Fatalf("the tool call is not linked to its activity: %+v", tool)
	}
	if calls != 2 || tr.Usage.Calls != 2 || tr.Usage.Total.CostUSD == 0 {
		t.Fatalf("usage: %+v", tr.Usage)
	}
}
