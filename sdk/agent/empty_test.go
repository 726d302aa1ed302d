package agent_test

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// Terse asks one question; its input says whether an empty answer will do.
func Terse(ctx sdk.Context, allowEmpty bool) (agent.Result, error) {
	return agent.New(ctx, agent.Options{Model: "fake-1", AllowEmptyAnswer: allowEmpty}).Run(ctx, "Anything to say?")
}

// An empty answer is the model failing: the call is retried, and the run
// completes with the answer the retry got — not with an empty one. An
// agent whose options allow an empty answer takes it.
func TestEmptyModelAnswerIsRetried(t *testing.T) {
	for _, allow := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		srv := fakellm.New(fakellm.Script{{Content: "Yes.", Faults: []fakellm.Reply{fakellm.Say(""), fakellm.Say(" \n")}}})
		hs := httptest.NewServer(srv)
		t.Cleanup(hs.Close)
		m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1"})
		must(t, err)
		env := storeEnv(t, testenv.Options{}) // skips the retries' backoff
		env.RegisterWorkflow(Terse)
		must(t, m.Register(env.Worker))
		env.Start()
		run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "terse", TaskQueue: env.TaskQueue()}, Terse, allow)
		must(t, err)
		var res agent.Result
		must(t, run.Get(ctx, &res))
		want, calls := "Yes.", int64(3)
		if allow {
			want, calls = "", 1
		}
		if res.Final != want || res.StopReason != "final" || srv.Calls() != calls {
			t.Fatalf("allow empty %v: result %+v after %d model calls, want %q after %d", allow, res, srv.Calls(), want, calls)
		}
	}
}
