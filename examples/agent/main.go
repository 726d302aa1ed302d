// Command agent is the accounts-payable agent's worker program: the
// founding article's agent, driven by a model (demo/payables).
//
// By default the model is the scripted fake, served by this process: it
// follows the invoice the task names (INV-9 and INV-3 get paid, INV-7 is
// over budget). Set CAIRN_MODEL_URL to an OpenAI-compatible endpoint (and
// CAIRN_MODEL to its model, OPENAI_API_KEY to its key) to drive the agent
// with a real one.
//
// The fake ledger, payment provider and outbox are files in a data
// directory: $PAYABLES_DIR, by default cairn/examples-agent under the user's
// cache directory (the system's temporary directory when it has none). The
// worker prints it when it starts; it is never the current directory.
//
//	cairn server &                                    # or cairn dev
//	go run ./examples/agent run                       # the worker
//	cairn workflow start --type PayInvoiceAgent --id pay-INV-9 --task-queue payables --input '{"InvoiceID":"INV-9"}'
//	cairn workflow watch pay-INV-9                    # the model's answers, live (they stream by default)
//	cairn workflow signal pay-INV-9 --name approve --input '{"Approved":true,"By":"ap-clerk"}'
//	go run ./examples/agent replay --history h.json   # replay an export
package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/demo/payables"
	"github.com/cairnflow/cairn/worker"
	"github.com/cairnflow/cairn/worker/workercli"
)

func main() {
	os.Exit(workercli.Main(func(r worker.Registrar) error {
		return register(r, os.Getenv, os.Stderr)
	}, workercli.Options{Name: "agent", TaskQueue: payables.TaskQueue}))
}

// register registers the agent on r, with the model and the fake
// providers the environment (getenv) names; a live worker says where the
// providers' files are on log.
func register(r worker.Registrar, getenv func(string) string, log io.Writer) error {
	dir, err := dataDir(getenv)
	if err != nil {
		return err
	}
	if _, live := r.(*worker.Worker); live {
		fmt.Fprintf(log, "agent: the fake ledger, payment provider and outbox are files in %s (set PAYABLES_DIR to change it)\n", dir)
	}
	url, model := getenv("CAIRN_MODEL_URL"), getenv("CAIRN_MODEL")
	if model == "" {
		model = payables.FakeModel
	}
	if url == "" {
		if url, err = serveFake(); err != nil {
			return err
		}
	}
	m, err := llm.New(llm.Config{BaseURL: url, Model: model})
	if err != nil {
		return err
	}
	return payables.Register(r, &payables.Tools{Dir: dir}, m)
}

// dataDir returns (and makes) the directory of the fake providers' files:
// $PAYABLES_DIR, else cairn/examples-agent in the user's cache directory,
// else in the system's temporary directory.
func dataDir(getenv func(string) string) (string, error) {
	dir := getenv("PAYABLES_DIR")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			base = os.TempDir()
		}
		dir = filepath.Join(base, "cairn", "examples-agent")
	}
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("the data directory: %w", err)
	}
	return dir, nil
}

// serveFake serves the scripted model on a loopback port of this process.
func serveFake() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("fake model: %w", err)
	}
	go func() { _ = http.Serve(ln, fakellm.NewFunc(payables.Reply)) }()
	return "http://" + ln.Addr().String() + "/v1", nil
}
