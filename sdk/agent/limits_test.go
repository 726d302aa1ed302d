package agent_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// TenantChatter is an agent of a tenant on the provider "openai".
func TenantChatter(ctx sdk.Context, tenant string) (agent.Result, error) {
	return agent.New(ctx, agent.Options{Provider: "openai", Model: "fake-1", LimitKey: "tenant/" + tenant}).Run(ctx, "Hi.")
}

// The agent kit keys its model calls by provider and model (and the
// tenant it is given), so a server limit on the model holds every
// worker's calls to it: four agents on two workers never have more than
// one call at the model at once.
func TestModelCallsHeldToTheModelsLimit(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var (
		mu        sync.Mutex
		now, most int
	)
	release := make(chan struct{})
	srv := fakellm.NewFunc(func(fakellm.Request) fakellm.Reply {
		mu.Lock()
		now++
		most = max(most, now)
		mu.Unlock()
		<-release
		mu.Lock()
		now--
		mu.Unlock()
		return fakellm.Say("Hello.")
	})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	var once sync.Once
	open := func() { once.Do(func() { close(release) }) }
	t.Cleanup(open)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1"})
	must(t, err)
	env := storeEnv(t, testenv.Options{NoTimeSkipping: true})
	if _, err := env.Engine.SetActivityLimit(ctx, &api.SetActivityLimitRequest{Limit: api.ActivityLimit{TaskQueue: env.TaskQueue(),
		LimitKey: "openai/fake-1", MaxInFlight: 1}}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		w := env.NewWorker(worker.Options{Identity: fmt.Sprint("worker-", i)})
		must(t, w.RegisterWorkflow(TenantChatter))
		must(t, m.Register(w))
		env.RunWorker(w)
	}
	var runs []client.Run
	for i, tenant := range []string{"a", "a", "a", "b"} {
		run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: fmt.Sprint("chat-", i), TaskQueue: env.TaskQueue()}, TenantChatter, tenant)
		must(t, err)
		runs = append(runs, run)
	}
	// Wait until one call is at the model and the three others wait at the
	// server — or, without the limit, two reach the model.
	for {
		mu.Lock()
		over := now >= 2
		mu.Unlock()
		q, err := env.Client.DescribeTaskQueue(ctx, env.TaskQueue())
		must(t, err)
		if over || len(q.ActivityLimits) == 1 && q.ActivityLimits[0].InFlight == 1 && q.ActivityLimits[0].Waiting == 3 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the calls never lined up: %+v", q)
		}
		runtime.Gosched()
	}
	open()
	for _, run := range runs {
		var res agent.Result
		must(t, run.Get(ctx, &res))
	}
	if most != 1 {
		t.Fatalf("%d model calls at the model at once, limit 1", most)
	}
	if key := scheduledModelCall(t, ctx, env.Client, "chat-3").Options.LimitKey; key != "openai/fake-1,tenant/b" {
		t.Fatalf("model call limit key %q", key)
	}
}
