package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// approvalID is the workflow id of the dev demo's accounts-payable agent
// (demo/payables), whose payment waits for a person's approval.
const approvalID = "pay-INV-9"

// payablesActor runs the accounts-payable agent's worker (its scripted
// model served on loopback, its fake provider's files in data-payables)
// and starts its run, which waits for a person to approve the payment.
func payablesActor(c client.Client, data string) (actor, error) {
	dir := data + "-payables"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return actor{}, err
	}
	model, url, err := servePayablesModel()
	if err != nil {
		return actor{}, err
	}
	w, err := payablesWorker(c, dir, url)
	if err != nil {
		_ = model.Close()
		return actor{}, err
	}
	return payablesRun(c, w, model), nil
}

// servePayablesModel serves the agent's scripted model on a free loopback
// port and returns it with its base URL.
func servePayablesModel() (*http.Server, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", fmt.Errorf("the payables agent's model: %w", err)
	}
	model := &http.Server{Handler: fakellm.NewFunc(payables.Reply), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = model.Serve(ln) }()
	return model, "http://" + ln.Addr().String() + "/v1", nil
}

// payablesWorker is the agent's worker, its tools' files in dir.
func payablesWorker(c client.Client, dir, modelURL string) (*worker.Worker, error) {
	m, err := llm.New(llm.Config{BaseURL: modelURL, Model: payables.FakeModel})
	if err != nil {
		return nil, err
	}
	w, err := worker.New(c, worker.Options{TaskQueue: payables.TaskQueue, Identity: "cairn-dev-payables-worker", GracefulStop: 2 * time.Second})
	if err != nil {
		return nil, err
	}
	return w, payables.Register(w, &payables.Tools{Dir: dir}, m)
}

// payablesRun starts the agent's run (again after a restart over the same
// data: an id that ran already is left as it is) and runs the worker.
func payablesRun(c client.Client, w *worker.Worker, model *http.Server) actor {
	ctx, cancel := context.WithCancel(context.Background())
	return actor{
		run: func() error {
			defer model.Close()
			_, err := c.StartWorkflow(ctx, client.StartOptions{ID: approvalID, TaskQueue: payables.TaskQueue, ReusePolicy: api.RejectDuplicate},
				payables.PayInvoiceAgent, payables.Task{InvoiceID: "INV-9"})
			if err != nil && !errors.Is(err, api.ErrAlreadyStarted) {
				return fmt.Errorf("start %s: %w", approvalID, err)
			}
			return w.Run(ctx)
		},
		interrupt: func(error) { cancel() },
	}
}
