package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// TestMain says in one line when the Postgres suites were skipped.
func TestMain(m *testing.M) { pgtest.Main(m) }

func Greet(_ context.Context, name string) (string, error) { return "hello " + name, nil }

func SleepyHello(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	if err := sdk.Sleep(ctx, 24*time.Hour); err != nil {
		return "", err
	}
	return sdk.ExecuteActivity(ctx, Greet, name).Get(ctx)
}

func TestSleepADayInMilliseconds(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	env.RegisterWorkflow(SleepyHello)
	env.RegisterActivity(Greet)
	env.Start()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := env.Clock.Now()
	var out string
	if err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: "sleepy"}, SleepyHello, "ada", &out); err != nil {
		t.Fatal(err)
	}
	if out != "hello ada" {
		t.Fatalf("result %q", out)
	}
	if slept := env.Clock.Now().Sub(start); slept < 24*time.Hour {
		t.Fatalf("fake clock moved %s, want at least 24h", slept)
	}
}

// TestGivenStore: an env given a store runs on it — on Postgres
// (CAIRN_TEST_STORE=postgres) serving every shard under a lease — and
// leaves it open when the test ends.
func TestGivenStore(t *testing.T) {
	st, owner := storetest.Embedded(t, "testenv")
	if st == nil {
		mem, err := badgerstore.Open(badgerstore.Options{InMemory: true})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = mem.Close() })
		st = mem
	}
	t.Run("env", func(t *testing.T) {
		opts := testenv.Options{}
		opts.Engine.Store = st
		if owner != nil {
			opts.Engine.Shards = owner
		}
		env := testenv.New(t, opts)
		env.RegisterWorkflow(SleepyHello)
		env.RegisterActivity(Greet)
		env.Start()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		var out string
		if err := env.ExecuteWorkflow(ctx, client.StartOptions{ID: "given"}, SleepyHello, "ada", &out); err != nil {
			t.Fatal(err)
		}
	})
	// The env is gone; the store is open and holds the run.
	ctx := context.Background()
	runs, err := st.(history.RunLister).Runs(ctx, nil, 0)
	if err != nil || len(runs) != 1 || runs[0].WorkflowID != "given" {
		t.Fatalf("the runs of the store the env was given: %v, %v", runs, err)
	}
	if last, err := st.LastEventID(ctx, runs[0]); err != nil || last < 5 {
		t.Fatalf("the run's last event in the given store: %d, %v", last, err)
	}
}
