package history

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// A budget and a usage are written in one JSON shape, the one the CLI,
// the UI and the history export show, and read back from it.
func TestBudgetAndUsageJSONShape(t *testing.T) {
	b := Budget{MaxTokens: 200_000, MaxCostUSD: 2.5, MaxTurns: 12}
	js, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"maxTokens":200000,"maxCostUSD":2.5,"maxTurns":12}`; string(js) != want {
		t.Fatalf("json.Marshal(budget) = %s, want %s", js, want)
	}
	var back Budget
	if err := json.Unmarshal(js, &back); err != nil || back != b {
		t.Fatalf("read back: %+v %v", back, err)
	}
	u := Usage{Model: "m", PromptTokens: 1, CompletionTokens: 2, CachedTokens: 3, CostUSD: 0.5, Attempts: 4}
	js, err = json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"model":"m","promptTokens":1,"completionTokens":2,"cachedTokens":3,"costUSD":0.5,"attempts":4}`; string(js) != want {
		t.Fatalf("json.Marshal(usage) = %s, want %s", js, want)
	}
	var ub Usage
	if err := json.Unmarshal(js, &ub); err != nil || ub != u {
		t.Fatalf("read back: %+v %v", ub, err)
	}
}

// Every form a budget is shown in reads back as that budget: the one
// shape, the names a msgpack payload holding one shows (its stored
// names), the former JSON names (JSON payloads recorded before), the Go
// names.
func TestBudgetReadsTheFormsItIsShownIn(t *testing.T) {
	want := Budget{MaxTokens: 100, MaxCostUSD: 1.5, MaxTurns: 3}
	stored, err := msgpack.Marshal(map[string]any{"Budget": want}) // how a workflow's input holds one
	if err != nil {
		t.Fatal(err)
	}
	var shown map[string]any // how a display that does not know the Go type shows it
	if err := msgpack.Unmarshal(stored, &shown); err != nil {
		t.Fatal(err)
	}
	display, err := json.Marshal(shown["Budget"])
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		`{"maxTokens":100,"maxCostUSD":1.5,"maxTurns":3}`,
		string(display),
		`{"t":100,"c":1.5,"n":3}`,
		`{"max_tokens":100,"max_cost_usd":1.5,"max_turns":3}`,
		`{"MaxTokens":100,"MaxCostUSD":1.5,"MaxTurns":3}`,
	} {
		var b Budget
		if err := json.Unmarshal([]byte(in), &b); err != nil || b != want {
			t.Errorf("%s: %+v %v, want %+v", in, b, err, want)
		}
	}
	var u Usage
	if err := json.Unmarshal([]byte(`{"c":38,"m":"gpt","p":412,"u":0.5,"a":1,"k":2}`), &u); err != nil ||
		u != (Usage{Model: "gpt", PromptTokens: 412, CompletionTokens: 38, CachedTokens: 2, CostUSD: 0.5, Attempts: 1}) {
		t.Errorf("a usage in its stored names: %+v %v", u, err)
	}
}

// A budget in a shape Cairn does not read is refused, never dropped: a
// run started with it would have no budget.
func TestBudgetRefusesWhatItDoesNotRead(t *testing.T) {
	for in, want := range map[string]string{
		`{"maxTurn":3}`:               `a budget has no field "maxTurn": its fields are maxTokens, maxCostUSD, maxTurns`,
		`{"n":3,"maxTurns":4}`:        `a budget gives maxTurns twice (as "n" and "maxTurns")`,
		`{"maxTurns":"3"}`:            `a budget's maxTurns: json: cannot unmarshal string`,
		`[3]`:                         `a budget is a JSON object with the fields maxTokens, maxCostUSD, maxTurns`,
		`{"maxTurns":3,"tokens":100}`: `a budget has no field "tokens"`,
	} {
		var b Budget
		err := json.Unmarshal([]byte(in), &b)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error saying %q", in, err, want)
		}
	}
	// Inside a value that holds one, as a JSON payload or --input is read.
	var in struct {
		Text   string
		Budget Budget
	}
	if err := json.Unmarshal([]byte(`{"Text":"hi","Budget":{"max_turn":1}}`), &in); err == nil {
		t.Fatalf("a budget with an unknown field inside an input was read: %+v", in)
	}
	var u Usage
	if err := json.Unmarshal([]byte(`{"tokens":3}`), &u); err == nil {
		t.Fatalf("a usage with an unknown field was read: %+v", u)
	}
	var null Budget
	if err := json.Unmarshal([]byte(`null`), &null); err != nil || !null.IsZero() {
		t.Fatalf("null: %+v %v", null, err)
	}
}
