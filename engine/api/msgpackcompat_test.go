package api_test

import (
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
)

// Two versions of one record: v2 appended fields to the record and to the
// struct nested in it.
type innerV1 struct {
	A string
	B int
}

type innerV2 struct {
	A string
	B int
	C []string `msgpack:",omitempty"`
}

type recordV1 struct {
	Name  string
	When  time.Time
	One   *innerV1
	Many  []innerV1
	ByKey map[string]*innerV1
	Skip  string `msgpack:"-"`
}

type recordV2 struct {
	Name  string
	When  time.Time
	One   *innerV2
	Many  []innerV2
	ByKey map[string]*innerV2
	Skip  string `msgpack:"-"`
	Extra []innerV2
	Flag  bool `msgpack:"f,omitempty"`
}

// A record an older version wrote as arrays decodes into the newer type,
// its new fields zero; a newer one decodes into the older type, its new
// fields ignored — wherever the struct sits (pointer, slice, map value).
// The library alone refuses both.
func TestUnmarshalMsgpackAcrossVersions(t *testing.T) {
	when := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	v1 := recordV1{Name: "r", When: when, One: &innerV1{"a", 1}, Many: []innerV1{{"b", 2}, {"c", 3}}, ByKey: map[string]*innerV1{"k": {"d", 4}}}
	b1, err := api.MarshalMsgpack(&v1)
	if err != nil {
		t.Fatal(err)
	}
	var plain recordV2
	if err := msgpack.Unmarshal(b1, &plain); err == nil {
		t.Fatal("the library read an array of another shape: this test no longer tests anything")
	}
	var got2 recordV2
	if err := api.UnmarshalMsgpack(b1, &got2); err != nil {
		t.Fatal(err)
	}
	want2 := recordV2{Name: "r", When: when, One: &innerV2{A: "a", B: 1}, Many: []innerV2{{A: "b", B: 2}, {A: "c", B: 3}},
		ByKey: map[string]*innerV2{"k": {A: "d", B: 4}}}
	if !got2.When.Equal(when) {
		t.Fatalf("old record read as new: time %v, want %v", got2.When, when)
	}
	got2.When = when // the library reads times in the local zone
	if !reflect.DeepEqual(got2, want2) {
		t.Fatalf("old record read as new: %+v, want %+v", got2, want2)
	}

	v2 := want2
	v2.One.C, v2.Extra, v2.Flag = []string{"x"}, []innerV2{{A: "e"}}, true
	b2, err := api.MarshalMsgpack(&v2)
	if err != nil {
		t.Fatal(err)
	}
	var got1 recordV1
	if err := api.UnmarshalMsgpack(b2, &got1); err != nil {
		t.Fatal(err)
	}
	got1.When = when
	if !reflect.DeepEqual(got1, v1) {
		t.Fatalf("new record read as old: %+v, want %+v", got1, v1)
	}

	// A map-encoded record (older still) whose nested structs are arrays.
	m := map[string]any{"Name": "r", "One": msgpack.RawMessage(mustArray(t, &innerV1{"a", 1}))}
	bm, err := msgpack.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	var gotm recordV2
	if err := api.UnmarshalMsgpack(bm, &gotm); err != nil || gotm.Name != "r" || !reflect.DeepEqual(gotm.One, &innerV2{A: "a", B: 1}) {
		t.Fatalf("map record: %+v %v", gotm, err)
	}

	// What is not a shape mismatch fails as it did.
	if err := api.UnmarshalMsgpack([]byte{0x93, 0x01}, &got2); err == nil {
		t.Fatal("a truncated record decoded")
	}
}

func mustArray(t *testing.T, v any) []byte {
	t.Helper()
	b, err := api.MarshalMsgpack(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
