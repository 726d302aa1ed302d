package view_test

import (
	"testing"

	"github.com/cairnflow/cairn/cmd/cairn/internal/view"
)

// "IDs" is written "Ids", as "ID" is "Id" ("runIDs" broke the convention,
// and the UI, which reads runIds, showed no runs).
func TestKeyOfIDs(t *testing.T) {
	for field, want := range map[string]string{"RunIDs": "runIds", "IDs": "ids", "IDsByRun": "idsByRun", "Idle": "idle", "IDSet": "idSet"} {
		if got := view.Key(field); got != want {
			t.Errorf("Key(%q) = %q, want %q", field, got, want)
		}
	}
}

// A list tagged view:"keep" is written when empty, as [].
func TestKeepWritesEmptyLists(t *testing.T) {
	type out struct {
		Items []string `view:"keep"`
		More  []string
	}
	for _, c := range []struct {
		v    out
		want string
	}{
		{out{}, `{"items":[]}`},
		{out{Items: []string{}}, `{"items":[]}`},
		{out{Items: []string{"a"}, More: []string{"b"}}, `{"items":["a"],"more":["b"]}`},
	} {
		b, err := view.Marshal(c.v)
		if err != nil || string(b) != c.want {
			t.Errorf("%+v: %s %v, want %s", c.v, b, err, c.want)
		}
	}
}
