package engine

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// TestMsgpackFieldOrder pins the field order of every struct that
// api.MarshalMsgpack encodes as a positional array: the API's requests and
// responses, and the engine's stored records. A field may only be added at
// the end of its struct; removing, reordering or retyping one would make
// stored records and older workers decode into the wrong fields. After
// appending a field, run `go test ./engine -run MsgpackFieldOrder -update`.
func TestMsgpackFieldOrder(t *testing.T) {
	got := msgpackShapes(msgpackRoots())
	path := filepath.Join("testdata", "msgpack-fields.golden")
	if *update {
		if err := os.WriteFile(path, []byte(strings.Join(got, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, fields, _ := strings.Cut(line, ": ")
		want[name] = fields
	}
	for _, line := range got {
		name, fields, _ := strings.Cut(line, ": ")
		old, ok := want[name]
		if !ok {
			t.Errorf("%s is new: run with -update to pin its fields", name)
			continue
		}
		switch {
		case fields == old:
		case strings.HasPrefix(fields, old+", ") || old == "":
			t.Errorf("%s gained fields at the end (fine): run with -update", name)
		default:
			t.Errorf("%s changed its encoded fields other than by appending:\n was %s\n now %s", name, old, fields)
		}
	}
}

// msgpackRoots lists the types encoded with api.MarshalMsgpack.
func msgpackRoots() []reflect.Type {
	roots := []reflect.Type{reflect.TypeFor[machine.RunState](), reflect.TypeFor[machine.LedgerEntry](), reflect.TypeFor[api.WorkflowInfo](),
		reflect.TypeFor[wftToken](), reflect.TypeFor[actToken](), reflect.TypeFor[api.ErrorBody](), reflect.TypeFor[quarantineRecord](),
		reflect.TypeFor[scheduleRecord]()}
	svc := reflect.TypeFor[api.Service]()
	for i := 0; i < svc.NumMethod(); i++ {
		m := svc.Method(i).Type
		roots = append(roots, m.In(1), m.Out(0))
	}
	return roots
}

var (
	customEncoder = reflect.TypeFor[msgpack.CustomEncoder]()
	marshaler     = reflect.TypeFor[msgpack.Marshaler]()
)

// msgpackShapes returns "pkg.Type: field Type, ..." for every struct
// reachable from roots that the library encodes field by field.
func msgpackShapes(roots []reflect.Type) []string {
	seen := map[reflect.Type]bool{}
	var out []string
	var visit func(t reflect.Type)
	visit = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Array || t.Kind() == reflect.Map {
			if t.Kind() == reflect.Map {
				visit(t.Key())
			}
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || t == reflect.TypeFor[time.Time]() ||
			t.Implements(customEncoder) || reflect.PointerTo(t).Implements(customEncoder) ||
			t.Implements(marshaler) || reflect.PointerTo(t).Implements(marshaler) {
			return
		}
		seen[t] = true
		var fields []string
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() || f.Tag.Get("msgpack") == "-" {
				continue
			}
			fields = append(fields, fmt.Sprintf("%s %s", f.Name, f.Type))
			visit(f.Type)
		}
		out = append(out, fmt.Sprintf("%s: %s", t, strings.Join(fields, ", ")))
	}
	for _, r := range roots {
		visit(r)
	}
	slices.Sort(out)
	return out
}

// TestRunStateReadsMapEncoding: run states written by earlier versions (a
// msgpack map per struct) still decode, and equal their array encoding.
func TestRunStateReadsMapEncoding(t *testing.T) {
	st := &machine.RunState{WorkflowID: "wf", RunID: "r1", WorkflowType: "W", TaskQueue: "q", Status: api.StatusRunning,
		NextEventID: 7, Activities: map[int64]*machine.ActivityInfo{5: {ActivityID: "a", ActivityType: "Echo", ScheduledEventID: 5, Attempt: 2}}}
	asMap, err := msgpack.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	asArray, err := encodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"map": asMap, "array": asArray} {
		got, err := decodeState(b)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !reflect.DeepEqual(got, st) {
			t.Fatalf("%s encoding decodes to %+v, want %+v", name, got, st)
		}
	}
}

// TestRecordsOfTheLastShapeRead: a run state and a list index entry
// written before the last field of their struct was appended (an engine
// of the previous version) still decode, their new fields zero; the
// library alone refuses an array of another length.
func TestRecordsOfTheLastShapeRead(t *testing.T) {
	st := &machine.RunState{WorkflowID: "wf", RunID: "r1", WorkflowType: "W", TaskQueue: "q", Status: api.StatusRunning, NextEventID: 7}
	old, err := api.MarshalMsgpack(withoutLastField(t, st))
	if err != nil {
		t.Fatal(err)
	}
	if err := msgpack.Unmarshal(old, new(machine.RunState)); err == nil {
		t.Fatal("the library read a shorter array: this test tests nothing")
	}
	got, err := decodeState(old)
	if err != nil {
		t.Fatalf("a run state of the previous shape: %v", err)
	}
	if !reflect.DeepEqual(got, st) {
		t.Fatalf("a run state of the previous shape decodes to %+v, want %+v", got, st)
	}

	pause := &api.PauseInfo{ScheduledEventID: 3, ActivityType: "SendPayment", Kind: api.PauseOutcomeUnknown}
	info := &api.WorkflowInfo{WorkflowID: "wf", RunID: "r1", Status: api.StatusPaused}
	entry := withoutLastField(t, info)
	reflect.ValueOf(entry).Elem().FieldByName("Pause").Set(reflect.ValueOf(withoutLastField(t, pause)))
	b, err := api.MarshalMsgpack(entry)
	if err != nil {
		t.Fatal(err)
	}
	var gotInfo api.WorkflowInfo
	if err := decodeMsgpack(b, &gotInfo); err != nil || gotInfo.WorkflowID != "wf" || gotInfo.Pause == nil || gotInfo.Pause.ActivityType != "SendPayment" {
		t.Fatalf("an index entry of the previous shape: %+v %v", gotInfo, err)
	}

	// The effects ledger outlives every upgrade: an entry written before
	// the last field was appended must read (else the next run of a paid
	// workflow id could not tell it was paid, and pauses as damaged).
	le := &machine.LedgerEntry{State: machine.LedgerCompleted, RunID: "r1", ActivityType: "SendPayment", ScheduledEventID: 5}
	oldLedger, err := api.MarshalMsgpack(withoutLastField(t, le))
	if err != nil {
		t.Fatal(err)
	}
	gotLedger, err := decodeLedger("key", oldLedger)
	if err != nil || gotLedger.State != machine.LedgerCompleted || gotLedger.RunID != "r1" || gotLedger.ScheduledEventID != 5 {
		t.Fatalf("a ledger entry of the previous shape: %+v %v", gotLedger, err)
	}
}

// withoutLastField returns a pointer to a struct holding v's encoded
// fields but its last: v as the previous version of its type encoded it.
// A field whose type is a pointer to a struct is kept as any (to be set).
func withoutLastField[T any](t *testing.T, v *T) any {
	t.Helper()
	src := reflect.ValueOf(v).Elem()
	var fields []reflect.StructField
	var from []int
	for i := range src.NumField() {
		f := src.Type().Field(i)
		if !f.IsExported() || f.Tag.Get("msgpack") == "-" {
			continue
		}
		if f.Type.Kind() == reflect.Pointer && f.Type.Elem().Kind() == reflect.Struct {
			f.Type = reflect.TypeFor[any]()
		}
		fields = append(fields, reflect.StructField{Name: f.Name, Type: f.Type, Tag: f.Tag})
		from = append(from, i)
	}
	fields, from = fields[:len(fields)-1], from[:len(from)-1]
	out := reflect.New(reflect.StructOf(fields))
	for j, i := range from {
		if fv := src.Field(i); !(fv.Kind() == reflect.Pointer && fv.IsNil()) {
			out.Elem().Field(j).Set(fv)
		}
	}
	return out.Interface()
}
