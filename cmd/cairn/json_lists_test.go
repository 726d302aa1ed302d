package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// A list command's --json always holds its list — [] when there is
// nothing to list (effects list printed {}) — and its keys follow the
// convention: the ledger's runs are "runIds", as the web UI reads them
// (it was "runIDs").
func TestListsAreListsEvenWhenEmpty(t *testing.T) {
	t.Setenv("CAIRN_TOKEN", "")
	empty := newTestServer(t, false)
	for _, c := range []struct {
		args []string
		key  string
	}{
		{[]string{"effects", "list"}, "effects"},
		{[]string{"workflow", "list"}, "workflows"},
		{[]string{"workflow", "count"}, "byStatus"},
		{[]string{"task-queue", "list"}, "queues"},
		{[]string{"schedule", "list"}, "schedules"},
	} {
		out := empty.must(t, append(c.args, "--json")...)
		var v map[string]json.RawMessage
		if err := json.Unmarshal([]byte(out), &v); err != nil || strings.TrimSpace(string(v[c.key])) != "[]" {
			t.Errorf("cairn %s --json on an empty server: %s (%v); want %q: []", strings.Join(c.args, " "), out, err, c.key)
		}
	}
	paused := pausedServer(t) // its ledger holds the paused payment
	out := paused.must(t, "effects", "list", "--json")
	var v struct {
		Effects []map[string]json.RawMessage `json:"effects"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || len(v.Effects) != 1 || v.Effects[0]["runIds"] == nil || v.Effects[0]["runIDs"] != nil {
		t.Fatalf("effects list --json: %s (%v)", out, err)
	}
	checkKeys(t, "effects list --json", v)
}
