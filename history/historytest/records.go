package historytest

import (
	"fmt"
	"testing"

	"github.com/cairnflow/cairn/history"
)

func testConditions(t *testing.T, h Harness) {
	s := open(t, h)
	sp := history.SpaceLedger
	k1, k2, missing := []byte("k1"), []byte("k2"), []byte("missing")
	mustCommit(t, s, &history.Batch{Puts: []history.Record{{Space: sp, Key: k1, Value: []byte("v1")}, {Space: sp, Key: k2}}})

	cases := []struct {
		name string
		cond history.Condition
		ok   bool
	}{
		{"absent and missing", history.Condition{Space: sp, Key: missing}, true},
		{"absent but present", history.Condition{Space: sp, Key: k1}, false},
		{"absent in another space", history.Condition{Space: history.SpaceTask, Key: k1}, true},
		{"exists", history.Condition{Space: sp, Key: k1, Exists: true}, true},
		{"exists with empty value", history.Condition{Space: sp, Key: k2, Exists: true}, true},
		{"exists but missing", history.Condition{Space: sp, Key: missing, Exists: true}, false},
		{"equal", history.Condition{Space: sp, Key: k1, Exists: true, Value: []byte("v1")}, true},
		{"not equal", history.Condition{Space: sp, Key: k1, Exists: true, Value: []byte("v2")}, false},
		{"longer value", history.Condition{Space: sp, Key: k1, Exists: true, Value: []byte("v1x")}, false},
		{"equal empty", history.Condition{Space: sp, Key: k2, Exists: true, Value: []byte{}}, true},
		{"empty but not", history.Condition{Space: sp, Key: k1, Exists: true, Value: []byte{}}, false},
	}
	for i, c := range cases {
		marker := put(history.SpaceMeta, fmt.Sprintf("marker-%d", i), "x")
		err := s.Commit(ctx, &history.Batch{Conditions: []history.Condition{c.cond}, Puts: []history.Record{marker}})
		if c.ok {
			wantNoErr(t, c.name, err)
			wantValue(t, s, marker.Space, marker.Key, marker.Value)
		} else {
			wantErr(t, c.name, err, history.ErrConflict)
			wantAbsent(t, s, marker.Space, marker.Key)
		}
	}
	// All conditions of a batch must hold.
	both := []history.Condition{cases[0].cond, cases[1].cond}
	wantErr(t, "one of two conditions fails", s.Commit(ctx, &history.Batch{Conditions: both}), history.ErrConflict)
}

func testRecords(t *testing.T, h Harness) {
	s := open(t, h)
	key := []byte{0x00, 'k', 0xFF}
	wantAbsent(t, s, history.SpaceRunState, key)

	mustCommit(t, s, &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: key, Value: []byte("v1")}}})
	wantValue(t, s, history.SpaceRunState, key, []byte("v1"))
	wantAbsent(t, s, history.SpaceTask, key) // spaces are independent

	got, _ := s.Get(ctx, history.SpaceRunState, key)
	got[0] = 'X' // the caller owns what Get returns
	wantValue(t, s, history.SpaceRunState, key, []byte("v1"))

	mustCommit(t, s, &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: key, Value: []byte("v2")}}})
	wantValue(t, s, history.SpaceRunState, key, []byte("v2"))

	mustCommit(t, s, &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: key}}})
	wantValue(t, s, history.SpaceRunState, key, nil) // nil Value: present and empty

	del := []history.RecordKey{{Space: history.SpaceRunState, Key: key}}
	mustCommit(t, s, &history.Batch{Deletes: del})
	wantAbsent(t, s, history.SpaceRunState, key)
	mustCommit(t, s, &history.Batch{Deletes: del}) // deleting a missing record is fine

	big := make([]byte, 512<<10)
	for i := range big {
		big[i] = byte(i * 7)
	}
	mustCommit(t, s, &history.Batch{Puts: []history.Record{{Space: history.SpaceRunState, Key: key, Value: big}}})
	wantValue(t, s, history.SpaceRunState, key, big)
}

// scanKeys runs a scan and returns the keys it found, as strings.
func scanKeys(t *testing.T, s history.Store, sp history.Space, opts history.ScanOptions) []string {
	t.Helper()
	recs, err := s.Scan(ctx, sp, opts)
	wantNoErr(t, fmt.Sprintf("Scan %s %+v", sp, opts), err)
	keys := make([]string, len(recs))
	for i, r := range recs {
		if r.Space != sp {
			t.Fatalf("Scan %s returned a record of space %s", sp, r.Space)
		}
		if want := "v:" + string(r.Key); string(r.Value) != want {
			t.Fatalf("Scan %s: key %q has value %q, want %q", sp, r.Key, r.Value, want)
		}
		keys[i] = string(r.Key)
	}
	return keys
}

func wantKeys(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if fmt.Sprintf("%q", got) != fmt.Sprintf("%q", want) {
		t.Fatalf("%s: got keys %q, want %q", what, got, want)
	}
}

// putKeys stores each key with value "v:"+key.
func putKeys(t *testing.T, s history.Store, sp history.Space, keys ...string) {
	t.Helper()
	b := &history.Batch{}
	for _, k := range keys {
		b.Puts = append(b.Puts, put(sp, k, "v:"+k))
	}
	mustCommit(t, s, b)
}

func testScan(t *testing.T, h Harness) {
	s := open(t, h)
	sp := history.SpaceTimer
	putKeys(t, s, sp, "a", "ab", "abc", "b", "ba", "c", "\xfe", "\xff", "\xff\x00", "\xff\xff")
	putKeys(t, s, history.SpaceTask, "a", "b", "\xff") // neighbours in the key order
	putKeys(t, s, history.SpaceIndex, "a", "b", "\xff")
	type opts = history.ScanOptions
	all := []string{"a", "ab", "abc", "b", "ba", "c", "\xfe", "\xff", "\xff\x00", "\xff\xff"}
	reversed := make([]string, len(all))
	for i, k := range all {
		reversed[len(all)-1-i] = k
	}

	wantKeys(t, "whole space", scanKeys(t, s, sp, opts{}), all...)
	wantKeys(t, "whole space reversed", scanKeys(t, s, sp, opts{Reverse: true}), reversed...)
	wantKeys(t, "prefix a", scanKeys(t, s, sp, opts{Prefix: []byte("a")}), "a", "ab", "abc")
	wantKeys(t, "prefix ab", scanKeys(t, s, sp, opts{Prefix: []byte("ab")}), "ab", "abc")
	wantKeys(t, "prefix a reversed", scanKeys(t, s, sp, opts{Prefix: []byte("a"), Reverse: true}), "abc", "ab", "a")
	wantKeys(t, "prefix z", scanKeys(t, s, sp, opts{Prefix: []byte("z")}))
	wantKeys(t, "prefix 0xff reversed", scanKeys(t, s, sp, opts{Prefix: []byte("\xff"), Reverse: true}), "\xff\xff", "\xff\x00", "\xff")
	wantKeys(t, "prefix 0xff 0xff reversed", scanKeys(t, s, sp, opts{Prefix: []byte("\xff\xff"), Reverse: true}), "\xff\xff")
	wantKeys(t, "limit", scanKeys(t, s, sp, opts{Limit: 2}), "a", "ab")
	wantKeys(t, "limit reversed", scanKeys(t, s, sp, opts{Limit: 2, Reverse: true}), "\xff\xff", "\xff\x00")
	wantKeys(t, "after", scanKeys(t, s, sp, opts{After: []byte("ab")}), all[2:]...)
	wantKeys(t, "after a missing key", scanKeys(t, s, sp, opts{After: []byte("bb")}), all[5:]...)
	wantKeys(t, "after reversed", scanKeys(t, s, sp, opts{After: []byte("b"), Reverse: true}), "abc", "ab", "a")
	wantKeys(t, "after with prefix", scanKeys(t, s, sp, opts{Prefix: []byte("a"), After: []byte("a")}), "ab", "abc")
	wantKeys(t, "after before prefix", scanKeys(t, s, sp, opts{Prefix: []byte("b"), After: []byte("a")}), "b", "ba")
	wantKeys(t, "after past prefix", scanKeys(t, s, sp, opts{Prefix: []byte("a"), After: []byte("b")}))
	wantKeys(t, "after past prefix reversed", scanKeys(t, s, sp, opts{Prefix: []byte("a"), After: []byte("zz"), Reverse: true}), "abc", "ab", "a")
	wantKeys(t, "after before prefix reversed", scanKeys(t, s, sp, opts{Prefix: []byte("b"), After: []byte("a"), Reverse: true}))
	wantKeys(t, "after reversed with limit", scanKeys(t, s, sp, opts{After: []byte("\xff"), Reverse: true, Limit: 2}), "\xfe", "c")

	// Paging: each page starts after the last key of the one before.
	for _, reverse := range []bool{false, true} {
		var paged []string
		var after []byte
		for {
			page := scanKeys(t, s, sp, opts{After: after, Limit: 3, Reverse: reverse})
			if len(page) == 0 {
				break
			}
			paged = append(paged, page...)
			after = []byte(page[len(page)-1])
		}
		want := all
		if reverse {
			want = reversed
		}
		wantKeys(t, fmt.Sprintf("paged (reverse %v)", reverse), paged, want...)
	}
}

// testScanIndexKeys uses keys shaped like the engine's list indexes:
// tuple(status, time, workflow id), listed newest first.
func testScanIndexKeys(t *testing.T, h Harness) {
	s := open(t, h)
	sp := history.SpaceIndex
	key := func(status string, at int64, wf string) string {
		return string(history.Key().Str(status).Int(at).Str(wf).Bytes())
	}
	var keys []string
	for i, at := range []int64{-5, 0, 3, 1 << 40, 7} {
		keys = append(keys, key("running", at, fmt.Sprint("wf", i)), key("run", at, "x"), key("runningx", at, "y"))
	}
	putKeys(t, s, sp, keys...)

	running := history.Key().Str("running").Bytes()
	newest := scanKeys(t, s, sp, history.ScanOptions{Prefix: running, Reverse: true, Limit: 3})
	wantKeys(t, "three newest running", newest, key("running", 1<<40, "wf3"), key("running", 7, "wf4"), key("running", 3, "wf2"))
	next := scanKeys(t, s, sp, history.ScanOptions{Prefix: running, Reverse: true, After: []byte(newest[2])})
	wantKeys(t, "the rest, newest first", next, key("running", 0, "wf1"), key("running", -5, "wf0"))
	oldest := scanKeys(t, s, sp, history.ScanOptions{Prefix: running, Limit: 1})
	wantKeys(t, "oldest running", oldest, key("running", -5, "wf0"))
}

// testInvalid: malformed requests return ErrInvalid and write nothing.
func testInvalid(t *testing.T, h Harness) {
	s := open(t, h)
	run := history.RunRef{WorkflowID: "wf-invalid", RunID: "r1"}
	sp := history.SpaceMeta
	app := func(r history.RunRef, next int64, evs ...history.Event) history.Append {
		return history.Append{Run: r, ExpectedNext: next, Events: evs}
	}
	noAttrs := history.Event{ID: 1, Time: baseTime}
	cases := []struct {
		name string
		b    *history.Batch
	}{
		{"nil batch", nil},
		{"empty workflow id", &history.Batch{Appends: []history.Append{app(history.RunRef{RunID: "r"}, 1, Event(1))}}},
		{"empty run id", &history.Batch{Appends: []history.Append{app(history.RunRef{WorkflowID: "w"}, 1, Event(1))}}},
		{"expected next 0", &history.Batch{Appends: []history.Append{app(run, 0, Event(1))}}},
		{"expected next -1", &history.Batch{Appends: []history.Append{app(run, -1, Event(1))}}},
		{"no events", &history.Batch{Appends: []history.Append{app(run, 1)}}},
		{"first id is not expected next", &history.Batch{Appends: []history.Append{app(run, 1, Event(2))}}},
		{"gap between events", &history.Batch{Appends: []history.Append{app(run, 1, Event(1), Event(3))}}},
		{"event without attributes", &history.Batch{Appends: []history.Append{app(run, 1, noAttrs)}}},
		{"two appends to one run", &history.Batch{Appends: []history.Append{app(run, 1, Event(1)), app(run, 2, Event(2))}}},
		{"put in space 0", &history.Batch{Puts: []history.Record{{Key: []byte("k")}}}},
		{"put in unknown space", &history.Batch{Puts: []history.Record{{Space: 200, Key: []byte("k")}}}},
		{"put with empty key", &history.Batch{Puts: []history.Record{{Space: sp}}}},
		{"delete with empty key", &history.Batch{Deletes: []history.RecordKey{{Space: sp}}}},
		{"delete in space 0", &history.Batch{Deletes: []history.RecordKey{{Key: []byte("k")}}}},
		{"condition with empty key", &history.Batch{Conditions: []history.Condition{{Space: sp}}}},
		{"condition in unknown space", &history.Batch{Conditions: []history.Condition{{Space: 99, Key: []byte("k")}}}},
		{"same key put twice", &history.Batch{Puts: []history.Record{put(sp, "k", "1"), put(sp, "k", "2")}}},
		{"same key put and deleted", &history.Batch{Puts: []history.Record{put(sp, "k", "1")}, Deletes: []history.RecordKey{{Space: sp, Key: []byte("k")}}}},
	}
	marker := put(history.SpaceTask, "marker", "x")
	for _, c := range cases {
		b := c.b
		if b != nil {
			b.Puts = append(b.Puts, marker)
		}
		wantErr(t, c.name, s.Commit(ctx, b), history.ErrInvalid)
	}
	wantAbsent(t, s, marker.Space, marker.Key)
	wantNoRun(t, s, run)
	wantAbsent(t, s, sp, []byte("k"))

	_, err := s.ReadEvents(ctx, history.RunRef{WorkflowID: "w"}, 1, 0)
	wantErr(t, "ReadEvents with an empty run id", err, history.ErrInvalid)
	_, err = collect(s, history.RunRef{RunID: "r"}, 1)
	wantErr(t, "Events with an empty workflow id", err, history.ErrInvalid)
	_, err = s.LastEventID(ctx, history.RunRef{})
	wantErr(t, "LastEventID with empty ids", err, history.ErrInvalid)
	_, err = s.Get(ctx, 0, []byte("k"))
	wantErr(t, "Get in space 0", err, history.ErrInvalid)
	_, err = s.Get(ctx, sp, nil)
	wantErr(t, "Get with an empty key", err, history.ErrInvalid)
	_, err = s.Scan(ctx, 200, history.ScanOptions{})
	wantErr(t, "Scan of an unknown space", err, history.ErrInvalid)
}
