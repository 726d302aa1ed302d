package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// Line is a nested part of Order.
type Line struct {
	SKU string `json:"sku" jsonschema:"description=The article, as printed on the label (e.g. A-1)"`
}

// Order's descriptions hold commas (the tag syntax splits there).
type Order struct {
	InvoiceID string `json:"invoice_id" jsonschema:"description=The invoice id, e.g. INV-9"`
	Amount    int    `json:"amount" jsonschema:"description=Amount, in cents, before tax,minimum=1"`
	Note      string `json:"note" jsonschema:"description=Escaped\\, as the tag syntax allows,required"`
	Plain     string `json:"plain" jsonschema:"description=No comma here"`
	Lines     []Line `json:"lines"`
	Extra     Line   `json:"extra"`
}

func (t *tools) PlaceOrder(_ context.Context, o Order) (string, error) {
	t.inc("PlaceOrder")
	return "placed " + o.InvoiceID, nil
}

// A field's description is kept whole, commas included; the keywords
// after it still apply.
func TestToolDescriptionsKeepTheirCommas(t *testing.T) {
	var tl *tools
	tool := agent.NewTool(tl.PlaceOrder, "Place an order.")
	var s struct {
		Properties map[string]struct {
			Description string
			Minimum     *int
			Items       struct {
				Properties map[string]struct{ Description string }
			}
			Properties map[string]struct{ Description string }
		}
		Required []string
	}
	if err := json.Unmarshal([]byte(tool.Schema), &s); err != nil {
		t.Fatal(err)
	}
	for field, want := range map[string]string{
		"invoice_id": "The invoice id, e.g. INV-9",
		"amount":     "Amount, in cents, before tax",
		"note":       "Escaped, as the tag syntax allows",
		"plain":      "No comma here",
	} {
		if got := s.Properties[field].Description; got != want {
			t.Errorf("%s: description %q, want %q", field, got, want)
		}
	}
	const sku = "The article, as printed on the label (e.g. A-1)"
	if got := s.Properties["lines"].Items.Properties["sku"].Description; got != sku {
		t.Errorf("lines[].sku: description %q", got)
	}
	if got := s.Properties["extra"].Properties["sku"].Description; got != sku {
		t.Errorf("extra.sku: description %q", got)
	}
	if m := s.Properties["amount"].Minimum; m == nil || *m != 1 {
		t.Errorf("amount lost its minimum: %s", tool.Schema)
	}
	if !strings.Contains(strings.Join(s.Required, ","), "note") {
		t.Errorf("note is not required: %s", tool.Schema)
	}
}

// Orderer places one order.
func Orderer(ctx sdk.Context, _ string) (agent.Result, error) {
	var t *tools
	a := agent.New(ctx, agent.Options{Model: "fake-1", Tools: []agent.Tool{agent.NewTool(t.PlaceOrder, "Place an order.")}})
	return a.Run(ctx, "Order it.")
}

// The model is sent the whole description.
func TestModelIsSentWholeDescriptions(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env, tl, srv := newEnv(t, fakellm.Script{fakellm.CallTool("PlaceOrder", `{"invoice_id":"INV-9","amount":5}`), fakellm.Say("Ordered.")})
	srv.KeepRequests()
	env.RegisterWorkflow(Orderer)
	env.RegisterActivity(tl.PlaceOrder)
	run, err := env.Client.StartWorkflow(ctx, client.StartOptions{ID: "order", TaskQueue: env.TaskQueue()}, Orderer, "")
	must(t, err)
	must(t, run.Get(ctx, nil))
	if body := string(srv.Requests()[0].Body); !strings.Contains(body, "The invoice id, e.g. INV-9") {
		t.Fatalf("the model was not sent the whole description:\n%s", body)
	}
	replay(t, ctx, env, "order", run.RunID(), Orderer)
}

// A history recorded when descriptions were cut at their first comma
// replays: the agent sends the cut schemas there (the history has no
// version marker). testdata/cut-descriptions.json was recorded (with its
// chunks) by the agent of commit fb42eab running Orderer.
func TestCutDescriptionHistoryReplays(t *testing.T) {
	r := worker.NewReplayer(worker.ReplayerOptions{})
	must(t, r.RegisterWorkflow(Orderer))
	must(t, r.ReplayFile("testdata/cut-descriptions.json", worker.ReplayOptions{}))
}
