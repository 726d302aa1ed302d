package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/demo/payables"
)

// Two runs of the payables agent on one over-budget invoice take the same
// steps; a run on another invoice (its payment awaiting approval)
// diverges at its start. The text names
// the calls; --json holds the divergence and each run's calls.
func TestCompareFromTheCLI(t *testing.T) {
	s := newTestServer(t, false)
	s.payablesWorker(t)
	for _, id := range []string{"pay-INV-7-a", "pay-INV-7-b", "pay-INV-3"} {
		inv := strings.TrimSuffix(strings.TrimSuffix(strings.TrimPrefix(id, "pay-"), "-a"), "-b")
		s.must(t, "workflow", "start", "--type", "PayInvoiceAgent", "--id", id, "--task-queue", payables.TaskQueue,
			"--input", `{"InvoiceID":"`+inv+`"}`)
		if id == "pay-INV-3" {
			s.waitApproval(t, id) // its payment awaits a person
		} else {
			s.result(t, id)
		}
	}
	var ref struct {
		Info struct {
			RunID string `json:"runId"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(s.must(t, "workflow", "describe", "pay-INV-7-b", "--json")), &ref); err != nil {
		t.Fatal(err)
	}

	out := s.must(t, "workflow", "compare", "pay-INV-7-a", "pay-INV-7-b/"+shortRun(ref.Info.RunID))
	for _, want := range []string{"No divergence: both runs took the same", "B  pay-INV-7-b run " + ref.Info.RunID + "  completed",
		"TURN  CALL", "ReadInvoice", `{"invoice_id":"INV-7"}`, "CheckBudget", "result", "over this month's budget"} {
		if !strings.Contains(out, want) {
			t.Errorf("compare lacks %q:\n%s", want, out)
		}
	}

	out = s.must(t, "workflow", "compare", "pay-INV-7-a", "pay-INV-3")
	if !strings.Contains(out, "DIVERGE at step 1, after 0 steps alike:") || !strings.Contains(out, "SendPayment  ") || !strings.Contains(out, `B  event 1: start PayInvoiceAgent: {"InvoiceID":"INV-3"`) {
		t.Errorf("compare of two invoices:\n%s", out)
	}
	var c struct {
		Divergence struct {
			Step int `json:"step"`
			A    struct {
				Kind string `json:"kind"`
			} `json:"a"`
		} `json:"divergence"`
		A struct {
			Status     string `json:"status"`
			ModelCalls []struct {
				Turn int `json:"turn"`
			} `json:"modelCalls"`
			ToolCalls []struct {
				Name    string `json:"name"`
				Outcome string `json:"outcome"`
			} `json:"toolCalls"`
			Usage struct {
				PromptTokens int64 `json:"promptTokens"`
			} `json:"usage"`
		} `json:"a"`
	}
	js := s.must(t, "workflow", "compare", "pay-INV-7-a", "pay-INV-3", "--json")
	if err := json.Unmarshal([]byte(js), &c); err != nil {
		t.Fatal(err)
	}
	if c.Divergence.Step != 1 || c.Divergence.A.Kind != "start" || c.A.Status != "completed" || len(c.A.ModelCalls) != 3 ||
		len(c.A.ToolCalls) != 2 || c.A.ToolCalls[1].Name != "CheckBudget" || c.A.ToolCalls[1].Outcome != "result" || c.A.Usage.PromptTokens == 0 {
		t.Errorf("compare --json:\n%s", js)
	}
	checkKeys(t, "compare --json", c)

	// A real reset: compare names the relation, and the steps alike up to
	// the point.
	var base struct {
		Info struct {
			RunID string `json:"runId"`
		} `json:"info"`
	}
	if err := json.Unmarshal([]byte(s.must(t, "workflow", "describe", "pay-INV-7-a", "--json")), &base); err != nil {
		t.Fatal(err)
	}
	s.must(t, "workflow", "reset", "pay-INV-7-a", "--to-last-task", "--reason", "compare test")
	s.result(t, "pay-INV-7-a")
	out = s.must(t, "workflow", "compare", "pay-INV-7-a/"+shortRun(base.Info.RunID), "pay-INV-7-a")
	if !strings.Contains(out, "reset from A at event") {
		t.Errorf("compare of a run and its reset:\n%s", out)
	}
}
