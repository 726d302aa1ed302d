package history

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"
)

type wireDoc struct {
	Events []Event
}

func TestEventWireForms(t *testing.T) {
	evs := []Event{
		{ID: 1, Time: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC), Attrs: &WorkflowStarted{WorkflowType: "Agent", TaskQueue: "q",
			Input: Payload{Encoding: "json", Data: []byte(`{"a":1}`)}}},
		{ID: 2, Time: time.Date(2026, 11, 29, 12, 0, 1, 0, time.UTC), Attrs: &ActivityScheduled{ActivityID: "1", ActivityType: "Pay",
			Effect: SideEffect, IdempotencyKey: "k", Options: ActivityOptions{StartToCloseTimeout: time.Minute}}},
	}
	doc := wireDoc{Events: evs}
	mp, err := msgpack.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	var back wireDoc
	if err := msgpack.Unmarshal(mp, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, doc) {
		t.Fatalf("msgpack round trip:\n%+v\n%+v", back, doc)
	}
	js, err := json.Marshal(&doc)
	if err != nil {
		t.Fatal(err)
	}
	var jback wireDoc
	if err := json.Unmarshal(js, &jback); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(jback, doc) {
		t.Fatalf("json round trip:\n%+v\n%+v\n%s", jback, doc, js)
	}
	// A damaged envelope inside msgpack is reported, not decoded.
	mp[len(mp)-1] ^= 0xff
	if err := msgpack.Unmarshal(mp, &back); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("damaged envelope: %v", err)
	}
	if err := json.Unmarshal([]byte(`{"Events":[{"id":1,"type":"Nope"}]}`), &jback); !errors.Is(err, ErrInvalid) {
		t.Fatalf("bad JSON event: %v", err)
	}
}
