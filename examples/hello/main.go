// Command hello is a complete Cairn worker program: a workflow that waits
// for an approval signal and then calls an activity. It is the worker of
// docs/quickstart.md.
//
//	go run ./examples/hello run              # work until Ctrl-C
//	go run ./examples/hello replay --history h.json --trace
package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/worker"
	"github.com/cairnflow/cairn/worker/workercli"
)

// Greeting waits up to a day for someone to approve (the "approve" signal
// carries the approver's name), then composes the greeting. While it waits,
// the "status" query answers where it stands.
func Greeting(ctx sdk.Context, name string) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: 10 * time.Second})
	status := "waiting for approval"
	if err := sdk.SetQueryHandler(ctx, "status", func() (string, error) { return status, nil }); err != nil {
		return "", err
	}
	approvals := sdk.GetSignalChannel[string](ctx, "approve")
	var approver string
	sdk.Go(ctx, func(ctx sdk.Context) { approver = approvals.Receive(ctx) })
	ok, err := sdk.AwaitWithTimeout(ctx, 24*time.Hour, func() bool { return approver != "" })
	if err != nil {
		return "", err
	}
	if !ok {
		return "", sdk.NewNonRetryableError("nobody approved within a day", "NotApproved")
	}
	status = "approved by " + approver
	return sdk.ExecuteActivity(ctx, Compose, Request{Name: name, ApprovedBy: approver}).Get(ctx)
}

// Request is Compose's input.
type Request struct {
	Name       string
	ApprovedBy string
}

// Compose builds the greeting (in a real agent: a model call).
func Compose(_ context.Context, r Request) (string, error) {
	return fmt.Sprintf("Hello, %s! (approved by %s)", strings.TrimSpace(r.Name), r.ApprovedBy), nil
}

func main() {
	os.Exit(workercli.Main(func(r worker.Registrar) error {
		if err := r.RegisterWorkflow(Greeting); err != nil {
			return err
		}
		return r.RegisterActivity(Compose)
	}, workercli.Options{Name: "hello", TaskQueue: "hello"}))
}
