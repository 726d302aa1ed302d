package agent_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// Chatter asks the model one question, with the default model options.
func Chatter(ctx sdk.Context, q string) (agent.Result, error) {
	return agent.New(ctx, agent.Options{Model: "fake-1"}).Run(ctx, q)
}

// A model call whose worker died is retried within seconds with the
// default options: the call has a heartbeat timeout, so its lease is
// short (the worker heartbeats it while the model thinks). It used to
// wait for its 5-minute start-to-close timeout.
func TestModelCallOfADeadWorkerIsRetriedWithinSeconds(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	received := make(chan struct{})
	release := make(chan struct{})
	var once sync.Once
	srv := fakellm.NewFunc(func(r fakellm.Request) fakellm.Reply {
		if r.Seq == 0 { // the first attempt: the model is slow, and its worker dies meanwhile
			once.Do(func() { close(received) })
			<-release
		}
		return fakellm.Say("Hello.")
	})
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	t.Cleanup(func() { close(release) }) // before the server closes
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1"})
	must(t, err)
	env := storeEnv(t, testenv.Options{NoTimeSkipping: true})
	// The first worker talks to the engine through a link the test cuts:
	// from then on it can neither heartbeat nor report, as a process that
	// died.
	link := &severable{Service: env.Engine}
	w1, err := worker.New(client.NewLocal(link, client.Options{}), worker.Options{TaskQueue: env.TaskQueue(), Identity: "first",
		Clock: env.Clock, GracefulStop: 10 * time.Millisecond})
	must(t, err)
	must(t, w1.RegisterWorkflow(Chatter))
	must(t, m.Register(w1))
	stop1 := env.RunWorker(w1)
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "dead-worker", TaskQueue: env.TaskQueue()}, Chatter, "Hi.")
	must(t, err)
	select {
	case <-received:
	case <-ctx.Done():
		t.Fatal("the model call never reached the model")
	}
	scheduled := scheduledModelCall(t, ctx, env.Client, "dead-worker")
	if hb := scheduled.Options.HeartbeatTimeout; hb <= 0 || hb > 15*time.Second {
		t.Fatalf("the model call's heartbeat timeout is %s: a dead worker's call waits for %s", hb, scheduled.Options.StartToCloseTimeout)
	}
	link.cut.Store(true)
	stop1()
	w2 := env.NewWorker(worker.Options{Identity: "second"})
	must(t, w2.RegisterWorkflow(Chatter))
	must(t, m.Register(w2))
	env.RunWorker(w2)
	start := env.Clock.Now()
	for !modelCallRetried(t, ctx, env.Client, "dead-worker") {
		if waited := env.Clock.Now().Sub(start); waited > 30*time.Second {
			t.Fatalf("the model call was not retried within %s of the worker's death", waited)
		}
		env.Clock.Advance(time.Second)
		env.Engine.Settle()
	}
	// The run's next workflow task waits on the dead worker's sticky
	// queue until the sticky timeout: move the clock past it.
	waitFor(t, ctx, env.Client, "dead-worker", func(ev history.Event) bool { return ev.Type() == history.TypeActivityCompleted })
	env.Clock.Advance(5 * time.Second)
	var res agent.Result
	must(t, run.Get(ctx, &res))
	if res.Final != "Hello." {
		t.Fatalf("result %+v", res)
	}
}

// severable is a link to the engine that the test can cut: once cut, the
// calls a worker makes while it runs fail as if the network were gone.
type severable struct {
	api.Service
	cut atomic.Bool
}

func (s *severable) down() error { return fmt.Errorf("%w: the link is cut", api.ErrUnavailable) }

func (s *severable) PollWorkflowTask(ctx context.Context, r *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	if s.cut.Load() {
		return nil, s.down()
	}
	return s.Service.PollWorkflowTask(ctx, r)
}

func (s *severable) PollActivityTask(ctx context.Context, r *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	if s.cut.Load() {
		return nil, s.down()
	}
	return s.Service.PollActivityTask(ctx, r)
}

func (s *severable) RecordActivityHeartbeat(ctx context.Context, r *api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	if s.cut.Load() {
		return nil, s.down()
	}
	return s.Service.RecordActivityHeartbeat(ctx, r)
}

func (s *severable) CompleteActivity(ctx context.Context, r *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	if s.cut.Load() {
		return nil, s.down()
	}
	return s.Service.CompleteActivity(ctx, r)
}

func (s *severable) FailActivity(ctx context.Context, r *api.FailActivityRequest) (*api.FailActivityResponse, error) {
	if s.cut.Load() {
		return nil, s.down()
	}
	return s.Service.FailActivity(ctx, r)
}

// scheduledModelCall returns the run's first model call as scheduled.
func scheduledModelCall(t *testing.T, ctx context.Context, c client.Client, id string) *history.ActivityScheduled {
	t.Helper()
	evs, err := c.GetHistory(ctx, id, "")
	must(t, err)
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.ActivityType == llm.ActivityName {
			return s
		}
	}
	t.Fatal("no model call scheduled")
	return nil
}

// modelCallRetried reports whether a second attempt of the model call
// was dispatched (or made: a Read activity's start is recorded with its
// outcome).
func modelCallRetried(t *testing.T, ctx context.Context, c client.Client, id string) bool {
	t.Helper()
	d, err := c.DescribeWorkflow(ctx, id, "")
	must(t, err)
	for _, a := range d.PendingActivities {
		if a.ActivityType == llm.ActivityName && a.Attempt >= 2 && a.State == api.ActivityStateStarted {
			return true
		}
	}
	evs, err := c.GetHistory(ctx, id, "")
	must(t, err)
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityStarted); ok && s.Attempt >= 2 {
			return true
		}
	}
	return false
}
