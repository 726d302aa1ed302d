package history

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// The JSON of Budget and Usage: one shape, wherever Cairn writes one and
// wherever a person pastes one back.
//
// They are written under their Go field names in lower camel case —
// {"maxTokens": 200000, "maxCostUSD": 2, "maxTurns": 12} — by encoding/json
// (the engine's JSON API, JSON payloads), by the CLI's --json and the web
// UI (cmd/cairn/internal/view), and by the history export: a value shown
// anywhere can be pasted into --input, a JSON payload or the API.
//
// Reading is strict: a member that names no field is an error, so that a
// budget given in a shape Cairn does not read is refused rather than
// silently dropped (a run started with no budget). Besides its name, a
// field is read under the name its msgpack tag stores it under — the name
// a msgpack payload holding one (a workflow's input with a Budget in it)
// shows it under when it is displayed without its Go type ({"n": 12}),
// since those stored bytes do not change — and under its former JSON name
// ("max_turns"), which JSON payloads recorded before still hold. Names
// match without regard to case, as encoding/json matches them.

// jsonFields is how a struct's fields are read from JSON: by lower-cased
// name, the index of the field each name reads.
type jsonFields struct {
	what   string         // "budget"
	byName map[string]int // lower-cased accepted name → field index
	names  []string       // the fields' JSON names, in order (for errors)
}

// newJSONFields lists the names the fields of T are read under: each
// field's json and msgpack tag names, and the former names in was
// (former name → current JSON name).
func newJSONFields[T any](what string, was map[string]string) *jsonFields {
	t := reflect.TypeFor[T]()
	f := &jsonFields{what: what, byName: map[string]int{}}
	current := map[string]int{}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name := tagName(sf.Tag.Get("json"))
		f.names = append(f.names, name)
		current[name] = i
		for _, n := range []string{name, tagName(sf.Tag.Get("msgpack"))} {
			if n != "" {
				f.byName[strings.ToLower(n)] = i
			}
		}
	}
	for old, cur := range was {
		i, ok := current[cur]
		if !ok {
			panic("history: " + what + " has no JSON field " + cur) // a bug in the table below
		}
		f.byName[strings.ToLower(old)] = i
	}
	return f
}

func tagName(tag string) string {
	name, _, _ := strings.Cut(tag, ",")
	return name
}

// decode reads the JSON object data into the struct dst points to (a T
// of newJSONFields): each member into its field, as encoding/json reads
// that field. An unknown member, or one field given twice (under two of
// its names), is an error wrapping ErrInvalid; null leaves dst as it is.
func (f *jsonFields) decode(data []byte, dst any) error {
	if bytes.Equal(bytes.TrimSpace(data), []byte("null")) {
		return nil
	}
	v := reflect.ValueOf(dst).Elem()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("%w: a %s is a JSON object with the fields %s, not %.40s", ErrInvalid, f.what, f.list(), data)
	}
	given := map[int]string{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return fmt.Errorf("%w: a %s: %w", ErrInvalid, f.what, err)
		}
		key, _ := tok.(string) // a member's name is a string: the decoder checked it
		i, ok := f.byName[strings.ToLower(key)]
		if !ok {
			return fmt.Errorf("%w: a %s has no field %q: its fields are %s", ErrInvalid, f.what, key, f.list())
		}
		if prev, twice := given[i]; twice {
			return fmt.Errorf("%w: a %s gives %s twice (as %q and %q)", ErrInvalid, f.what, f.names[i], prev, key)
		}
		given[i] = key
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return fmt.Errorf("%w: a %s: %w", ErrInvalid, f.what, err)
		}
		if err := json.Unmarshal(raw, v.Field(i).Addr().Interface()); err != nil {
			return fmt.Errorf("%w: a %s's %s: %w", ErrInvalid, f.what, f.names[i], err)
		}
	}
	return nil
}

func (f *jsonFields) list() string { return strings.Join(f.names, ", ") }

var (
	budgetJSON = newJSONFields[Budget]("budget", map[string]string{
		"max_tokens": "maxTokens", "max_cost_usd": "maxCostUSD", "max_turns": "maxTurns"})
	usageJSON = newJSONFields[Usage]("usage", map[string]string{
		"prompt_tokens": "promptTokens", "completion_tokens": "completionTokens", "cached_tokens": "cachedTokens", "cost_usd": "costUSD"})
)

// UnmarshalJSON reads a budget strictly: {"maxTokens", "maxCostUSD",
// "maxTurns"} (or the names a stored budget is shown under: see the top of
// valuejson.go); any other member is an error, never a budget dropped.
func (b *Budget) UnmarshalJSON(data []byte) error { return budgetJSON.decode(data, b) }

// UnmarshalJSON reads a usage strictly, as Budget's does.
func (u *Usage) UnmarshalJSON(data []byte) error { return usageJSON.decode(data, u) }
