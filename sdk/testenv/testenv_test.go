package testenv_test

import (
	"context"
	"testing"
	"time"

	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/sdk/testenv"
)

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
