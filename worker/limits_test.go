package worker_test

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
	"github.com/cairnflow/cairn/worker"
)

// Limits are outcomes, end to end: what a worker sends over a limit ends
// in a durable outcome — never in a lease or task timeout.

// BigPayment's result is n bytes: over the payload limit in these tests.
func BigPayment(_ context.Context, n int) (string, error) { return strings.Repeat("r", n), nil }

// PayThenReport pays (a side effect) and returns what became of the result.
func PayThenReport(ctx sdk.Context, n int) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	_, err := sdk.ExecuteActivity(ctx, BigPayment, n).Get(ctx)
	var app *sdk.ApplicationError
	if errors.As(err, &app) {
		return "error " + app.Type + ": " + app.Message, nil
	}
	return "no error", err
}

// BigResult returns n bytes as its own result.
func BigResult(_ sdk.Context, n int) (string, error) { return strings.Repeat("w", n), nil }

// checkPaidWithoutResult: the payment ran once, the workflow heard
// ResultTooLarge (not a timeout, not an unknown outcome), and the history
// says completed-without-result.
func checkPaidWithoutResult(t *testing.T, ctx context.Context, c client.Client, id, got string) {
	t.Helper()
	if !strings.Contains(got, "error "+sdk.FailureTypeResultTooLarge) || !strings.Contains(got, "over the limit") {
		t.Fatalf("workflow saw %q", got)
	}
	evs, err := c.GetHistory(ctx, id, "")
	must(t, err)
	var completed *history.ActivityCompleted
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityCompleted:
			completed = a
		case *history.ActivityOutcomeUnknown, *history.ActivityTimedOut, *history.ActivityFailed:
			t.Fatalf("%s in history", ev.Type())
		case *history.ActivityStarted:
			if a.Attempt != 1 {
				t.Fatalf("attempt %d: the payment ran again", a.Attempt)
			}
		}
	}
	if completed == nil || completed.ResultOmitted == "" || len(completed.Result.Data) != 0 {
		t.Fatalf("completion %+v", completed)
	}
}

func TestOversizedActivityResultOverPayloadLimit(t *testing.T) {
	env := newEnv(t, testenv.Options{Engine: engine.Options{Limits: engine.Limits{MaxPayloadBytes: 1024}}})
	env.RegisterWorkflow(PayThenReport)
	env.RegisterActivity(BigPayment, activities.Options{Effect: activities.SideEffect})
	env.Start()
	ctx := testCtx(t)
	var got string
	must(t, env.ExecuteWorkflow(ctx, client.StartOptions{ID: "pay"}, PayThenReport, 3000, &got))
	checkPaidWithoutResult(t, ctx, env.Client, "pay", got)
	// At the limit, the result arrives.
	must(t, env.ExecuteWorkflow(ctx, client.StartOptions{ID: "pay-at"}, PayThenReport, 1000, &got))
	if got != "no error" {
		t.Fatalf("at the limit: %q", got)
	}
}

func TestOversizedWorkflowResultEndsTheRun(t *testing.T) {
	env := newEnv(t, testenv.Options{Engine: engine.Options{Limits: engine.Limits{MaxPayloadBytes: 1024}}})
	env.RegisterWorkflow(BigResult)
	env.Start()
	ctx := testCtx(t)
	err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: "big"}, BigResult, 3000, nil)
	checkTerminatedForLimit(t, ctx, env.Client, "big", err)
}

// Echo answers its "echo" update with n bytes: over the limit, the
// update fails with ResultTooLarge and the run goes on.
func Echo(ctx sdk.Context) (string, error) {
	done := false
	if err := sdk.SetUpdateHandler(ctx, "echo", func(ctx sdk.Context, n int) (string, error) {
		done = n == 0
		return strings.Repeat("e", n), nil
	}, sdk.UpdateHandlerOptions{}); err != nil {
		return "", err
	}
	err := sdk.Await(ctx, func() bool { return done })
	return "done", err
}

func TestOversizedUpdateResultFailsTheUpdate(t *testing.T) {
	env := newEnv(t, testenv.Options{Engine: engine.Options{Limits: engine.Limits{MaxPayloadBytes: 1024}}})
	env.RegisterWorkflow(Echo)
	env.Start()
	ctx := testCtx(t)
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "echo", TaskQueue: env.TaskQueue()}, Echo, nil)
	must(t, err)
	update := func(n int) error {
		h, err := env.Client.UpdateWorkflow(ctx, client.UpdateOptions{WorkflowID: "echo", Name: "echo", Args: n})
		if err != nil {
			return err
		}
		return h.Get(ctx, nil)
	}
	var app *sdk.ApplicationError
	if err := update(3000); !errors.As(err, &app) || app.Type != sdk.FailureTypeResultTooLarge {
		t.Fatalf("an oversized update result: %v", err)
	}
	must(t, update(0))
	var got string
	if err := run.Get(ctx, &got); err != nil || got != "done" {
		t.Fatalf("the run after an oversized update result: %q, %v", got, err)
	}
}

func checkTerminatedForLimit(t *testing.T, ctx context.Context, c client.Client, id string, err error) {
	t.Helper()
	if !errors.Is(err, client.ErrTerminated) || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("result: %v", err)
	}
	d, derr := c.DescribeWorkflow(ctx, id, "")
	must(t, derr)
	if d.Info.Status != api.StatusTerminated {
		t.Fatalf("status %s", d.Info.Status)
	}
	evs, herr := c.GetHistory(ctx, id, "")
	must(t, herr)
	var failed *history.WorkflowTaskFailed
	for _, ev := range evs {
		if f, ok := ev.Attrs.(*history.WorkflowTaskFailed); ok {
			failed = f
		}
	}
	if failed == nil || failed.Cause != api.CauseLimitExceeded {
		t.Fatalf("no WorkflowTaskFailed with the cause: %+v", failed)
	}
}

// TestOverTransportLimit: a server whose request body limit is below the
// engine's payload limit refuses the report itself; the worker still ends
// in the same outcomes.
func TestOverTransportLimit(t *testing.T) {
	ctx := testCtx(t)
	eng := realEngine(t)
	srv := httptest.NewServer(httpapi.NewHandler(eng, httpapi.Options{MaxBodyBytes: 16 << 10}))
	t.Cleanup(srv.Close)
	c, err := client.Dial(srv.URL, client.Options{}, client.DialOptions{})
	must(t, err)
	t.Cleanup(func() { _ = c.Close() })
	w, err := worker.New(c, worker.Options{TaskQueue: "tl"})
	must(t, err)
	must(t, w.RegisterWorkflow(PayThenReport))
	must(t, w.RegisterWorkflow(BigResult))
	must(t, w.RegisterActivity(BigPayment, activities.Options{Effect: activities.SideEffect}))
	runWorker(t, w)

	var got string
	_, err = c.ExecuteWorkflow(ctx, client.StartOptions{ID: "pay", TaskQueue: "tl"}, PayThenReport, 64<<10, &got)
	must(t, err)
	if !strings.Contains(got, "error "+sdk.FailureTypeResultTooLarge) || !strings.Contains(got, "refused") {
		t.Fatalf("workflow saw %q", got)
	}
	_, err = c.ExecuteWorkflow(ctx, client.StartOptions{ID: "big", TaskQueue: "tl"}, BigResult, 64<<10, nil)
	checkTerminatedForLimit(t, ctx, c, "big", err)
}

// countingService counts the activity completions a worker sends.
type countingService struct {
	api.Service
	completions atomic.Int64
}

func (s *countingService) CompleteActivity(ctx context.Context, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	s.completions.Add(1)
	return s.Service.CompleteActivity(ctx, req)
}

type countingClient struct {
	client.Client
	svc *countingService
}

func (c countingClient) Service() api.Service { return c.svc }

// Held's activity waits for release.
func Held(ctx sdk.Context, _ string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	return sdk.ExecuteActivityByName[string](ctx, "Wait", "x").Get(ctx)
}

// TestReportToQuarantinedRunIsNotRetried: a run quarantined while its
// activity ran refuses the report with data_corrupt; the worker does not
// retry it forever.
func TestReportToQuarantinedRunIsNotRetried(t *testing.T) {
	ctx := testCtx(t)
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	must(t, err)
	fs := faultstore.New(st)
	eng, err := engine.Open(engine.Options{Store: fs})
	must(t, err)
	t.Cleanup(func() {
		_ = eng.Close()
		_ = st.Close()
	})
	local := client.NewLocal(eng, client.Options{})
	svc := &countingService{Service: local.Service()}
	w, err := worker.New(countingClient{Client: local, svc: svc}, worker.Options{TaskQueue: "q"})
	must(t, err)
	started, release := make(chan struct{}), make(chan struct{})
	must(t, w.RegisterWorkflow(Held))
	must(t, w.RegisterActivity(func(context.Context, string) (string, error) {
		close(started)
		<-release
		return "done", nil
	}, activities.Options{Name: "Wait"}))
	stop := make(chan struct{})
	runDone := make(chan struct{})
	go func() {
		defer close(runDone)
		wctx, cancel := context.WithCancel(context.Background())
		go func() { <-stop; cancel() }()
		_ = w.Run(wctx)
	}()
	run, err := local.StartWorkflow(ctx, client.StartOptions{ID: "held", TaskQueue: "q"}, Held, "x")
	must(t, err)
	<-started
	fs.Inject(faultstore.Rule{Op: faultstore.OpReadEvents, Err: faultstore.Corrupt("bit flip")})
	if _, err := local.Service().GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: "held", RunID: run.RunID()}); !errors.Is(err, api.ErrDataCorrupt) {
		t.Fatalf("history of the damaged run: %v", err)
	}
	close(release)
	close(stop) // Run returns once the report is delivered or given up
	<-runDone
	if n := svc.completions.Load(); n != 1 {
		t.Fatalf("%d completions sent to a quarantined run, want 1", n)
	}
}
