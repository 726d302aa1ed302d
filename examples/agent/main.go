// Command agent is the accounts-payable agent's worker program: the
// founding article's agent, driven by a model (demo/payables).
//
// By default the model is the scripted fake, served by this process; set
// CAIRN_MODEL_URL to an OpenAI-compatible endpoint (and CAIRN_MODEL to its
// model, OPENAI_API_KEY to its key) to drive the agent with a real one.
//
//	cairn server &                                    # or cairn dev
//	go run ./examples/agent run                       # the worker
//	cairn workflow start --type PayInvoiceAgent --id pay-INV-9 --task-queue payables --input '{"InvoiceID":"INV-9"}'
//	cairn workflow watch pay-INV-9                    # the model's answers, live
//	cairn workflow signal pay-INV-9 --name approve --input '{"Approved":true,"By":"ap-clerk"}'
//	go run ./examples/agent replay --history h.json   # replay an export
package main

import (
	"fmt"
	"net"
	"net/http"
	"os"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/worker"
	"github.com/cairnflow/cairn/worker/workercli"
)

func main() {
	os.Exit(workercli.Main(func(r worker.Registrar) error {
		dir := workercli.Env("PAYABLES_DIR", ".")
		url, model := os.Getenv("CAIRN_MODEL_URL"), workercli.Env("CAIRN_MODEL", payables.FakeModel)
		if url == "" {
			u, err := serveFake()
			if err != nil {
				return err
			}
			url = u
		}
		m, err := llm.New(llm.Config{BaseURL: url, Model: model})
		if err != nil {
			return err
		}
		return payables.Register(r, &payables.Tools{Dir: dir}, m)
	}, workercli.Options{Name: "agent", TaskQueue: payables.TaskQueue}))
}

// serveFake serves the scripted model on a loopback port of this process.
func serveFake() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("fake model: %w", err)
	}
	go func() { _ = http.Serve(ln, fakellm.New(payables.Script())) }()
	return "http://" + ln.Addr().String() + "/v1", nil
}
