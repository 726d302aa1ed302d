package storecopy_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/faultstore"
	"github.com/cairnflow/cairn/history/historytest"
	"github.com/cairnflow/cairn/history/storecopy"
)

// A Badger store copied into Postgres holds every record of every space
// with the same bytes and every run's events — runs whose ids share
// prefixes or hold NUL and 0xFF, a run longer than a page, runs without
// any run state — and the copy is marked verified. Run again, it only
// verifies. Copied back into Badger, the result is the same again.
func TestRunCopiesEverything(t *testing.T) {
	src := openBadger(t, t.TempDir())
	fill(t, src, small)
	dst := openPostgres(t)
	res, err := storecopy.Run(bg, src, dst, opts())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantCounts(t, res.Verify, small)
	written, skipped := res.Copy.Records()
	if res.Copy.Resumed || skipped != 0 || written != res.Verify.Records() || res.Copy.Events != res.Verify.Events || res.Copy.EventsSkipped != 0 {
		t.Fatalf("copy report %+v (records %d written, %d skipped), verified %+v", res.Copy, written, skipped, res.Verify)
	}
	for _, run := range oddRuns {
		wantEvents(t, src, dst, run)
	}
	st, err := storecopy.ReadState(bg, dst)
	if err != nil || st == nil || st.Source != source || !st.Verified() {
		t.Fatalf("ReadState: %+v, %v", st, err)
	}

	again, err := storecopy.Run(bg, src, dst, opts())
	if err != nil || !again.Copy.AlreadyVerified || again.Verify.EventsDigest != res.Verify.EventsDigest {
		t.Fatalf("Run again: %+v, %v", again.Copy, err)
	}

	back := openBadger(t, "")
	res2, err := storecopy.Run(bg, dst, back, storecopy.Options{Source: "postgres:test"})
	if err != nil {
		t.Fatalf("Run back into Badger: %v", err)
	}
	for i, sd := range res2.Verify.Spaces {
		if sd != res.Verify.Spaces[i] {
			t.Fatalf("space %s copied back: %+v, first copy %+v", sd.Space, sd, res.Verify.Spaces[i])
		}
	}
	if res2.Verify.EventsDigest != res.Verify.EventsDigest {
		t.Fatal("the events copied back differ")
	}
}

// wantEvents fails unless both stores hold run's events, encoded the same.
func wantEvents(t *testing.T, a, b history.Store, run history.RunRef) {
	t.Helper()
	ea, err := a.ReadEvents(bg, run, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	eb, err := b.ReadEvents(bg, run, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ea) != len(eb) {
		t.Fatalf("run %q: %d events, copy %d", run, len(ea), len(eb))
	}
	for i := range ea {
		x, _ := history.EncodeEvent(ea[i])
		y, _ := history.EncodeEvent(eb[i])
		if !bytes.Equal(x, y) {
			t.Fatalf("run %q event %d differs", run, ea[i].ID)
		}
	}
}

// A copy canceled after each of its first batches, and run again each
// time, ends equal to the source; the runs resumed skip what was there.
func TestCopyResumesAfterCancel(t *testing.T) {
	src := openBadger(t, t.TempDir())
	fill(t, src, small)
	dst := openBadger(t, "")
	o := opts()
	o.BatchBytes = 32 << 10 // many batches
	var skipped, eventsSkipped, stops int64
	eventsCut := false // one copy is also cut after its first batch of events
	for stop := 1; ; stop++ {
		ctx, cancel := context.WithCancel(bg)
		batches := 0
		o.Progress = func(p storecopy.Progress) {
			if batches++; batches == stop {
				cancel()
			}
			if p.Phase == storecopy.PhaseEvents && !p.Done && !eventsCut {
				eventsCut = true
				cancel()
			}
		}
		rep, err := storecopy.Copy(ctx, src, dst, o)
		cancel()
		eventsSkipped += rep.EventsSkipped
		if err == nil {
			if !rep.Resumed || eventsSkipped == 0 {
				t.Fatalf("the last copy %+v did not resume (events skipped by all copies: %d)", rep, eventsSkipped)
			}
			break
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("copy stopped after %d progress reports: %v", stop, err)
		}
		_, s := rep.Records()
		skipped, stops = skipped+s, stops+1
	}
	if stops < 10 || skipped == 0 {
		t.Fatalf("%d interruptions, %d records skipped on resuming", stops, skipped)
	}
	o.Progress = nil
	res, err := storecopy.Run(bg, src, dst, o)
	if err != nil {
		t.Fatalf("Run after the interruptions: %v", err)
	}
	wantCounts(t, res.Verify, small)
}

// A batch the target wrote but reported as failed (a lost reply) is
// found there when the copy is run again: skipped, not written twice.
func TestCopyResumesAfterALostReply(t *testing.T) {
	src := openBadger(t, t.TempDir())
	fill(t, src, small)
	inner := openBadger(t, "")
	dst := faultstore.New(inner)
	appends := func(c *faultstore.Call) bool { return len(c.Batch.Appends) > 0 }
	for _, tc := range []struct {
		what string
		r    faultstore.Rule
	}{
		{"the fourth commit (records)", faultstore.Rule{Skip: 3}},
		{"the first commit of events", faultstore.Rule{Match: appends}},
	} {
		r, what := tc.r, tc.what
		r.Op, r.Mode, r.Times = faultstore.OpCommit, faultstore.After, 1
		dst.Inject(r)
		if _, err := storecopy.Copy(bg, src, dst, opts()); !errors.Is(err, faultstore.ErrIO) {
			t.Fatalf("copy with %s failing after it was written: %v", what, err)
		}
		dst.Clear()
	}
	res, err := storecopy.Run(bg, src, dst, opts())
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantCounts(t, res.Verify, small)
	if res.Copy.EventsSkipped == 0 {
		t.Fatalf("the resumed copy skipped no events: %+v", res.Copy)
	}
}

// A target holding anything that is not a copy of this source is refused
// and left as it was: records, events, or another source's copy.
func TestRefusesATargetThatIsNotEmpty(t *testing.T) {
	src := openBadger(t, "")
	fill(t, src, shape{records: 3, runs: 2, maxEvents: 3})
	run := history.RunRef{WorkflowID: "theirs", RunID: "r"}
	for name, b := range map[string]*history.Batch{
		"a record": {Puts: []history.Record{{Space: history.SpaceLedger, Key: []byte("k"), Value: []byte("v")}}},
		"a run":    {Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: historytest.Events(1, 1)}}},
	} {
		t.Run(name, func(t *testing.T) {
			dst := openBadger(t, "")
			mustCommit(t, dst, b)
			_, err := storecopy.Run(bg, src, dst, opts())
			if !errors.Is(err, storecopy.ErrTargetNotEmpty) {
				t.Fatalf("Run into a target holding %s: %v", name, err)
			}
			if st, err := storecopy.ReadState(bg, dst); st != nil || err != nil {
				t.Fatalf("the refused target holds a copy marker: %+v, %v", st, err)
			}
		})
	}
	t.Run("another source's copy", func(t *testing.T) {
		dst := openBadger(t, "")
		if _, err := storecopy.Copy(bg, src, dst, storecopy.Options{Source: "badger:/elsewhere"}); err != nil {
			t.Fatal(err)
		}
		_, err := storecopy.Run(bg, src, dst, opts())
		if !errors.Is(err, storecopy.ErrTargetNotEmpty) || !strings.Contains(err.Error(), "badger:/elsewhere") {
			t.Fatalf("Run into another source's copy: %v", err)
		}
	})
}

// Resuming into a target whose data differs from the source — a record
// changed or added behind the copy's back, events added — stops with a
// MismatchError naming the place; Verify lists every difference.
func TestMismatchIsNamed(t *testing.T) {
	src := openBadger(t, "")
	fill(t, src, shape{records: 5, runs: 3, maxEvents: 4})
	key := history.Key().Str("ledger").Int(2).Bytes()
	changed := &history.Batch{Puts: []history.Record{{Space: history.SpaceLedger, Key: key, Value: []byte("not the source's")}}}
	added := &history.Batch{Puts: []history.Record{{Space: history.SpaceIndex, Key: []byte("zz"), Value: []byte("extra")}}}
	run := runsOf(shape{runs: 3})[0]
	more := &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: 2, Events: historytest.Events(2, 2)}}}
	for name, tc := range map[string]struct {
		b    *history.Batch
		want string
	}{
		"changed record": {changed, "ledger record " + hex.EncodeToString(key) + ": the target's value"},
		"added record":   {added, `index record 7a7a: in the target, not in the source`},
		"more events":    {more, `the target holds 3 events, the source 1`},
	} {
		t.Run(name, func(t *testing.T) {
			dst := openBadger(t, "")
			if _, err := storecopy.Copy(bg, src, dst, opts()); err != nil {
				t.Fatal(err)
			}
			mustCommit(t, dst, tc.b)
			_, err := storecopy.Copy(bg, src, dst, opts())
			var me *storecopy.MismatchError
			if !errors.As(err, &me) || !errors.Is(err, storecopy.ErrMismatch) || len(me.Differences) != 1 {
				t.Fatalf("resumed copy: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("resumed copy: %v; want it to name %q", err, tc.want)
			}
			if _, err := storecopy.Verify(bg, src, dst, storecopy.Options{}); !errors.As(err, &me) {
				t.Fatalf("Verify: %v", err)
			}
		})
	}
}

// Batches the target refuses as too large are split until they fit; a
// record too large for any batch of the target fails, naming it.
func TestTooLargeBatchesAreSplit(t *testing.T) {
	src := openBadger(t, t.TempDir())
	sh := shape{records: 60, chunkBytes: 200 << 10, runs: 5, maxEvents: 5, long: 3000}
	fill(t, src, sh)
	dst := openBadger(t, "") // about 2.4 MB a transaction
	o := opts()
	o.BatchBytes = 64 << 20
	res, err := storecopy.Run(bg, src, dst, o)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Copy.Splits == 0 {
		t.Fatalf("no batch was split: %+v", res.Copy)
	}
	wantCounts(t, res.Verify, sh)

	big := history.Key().Str("big").Bytes()
	mustCommit(t, src, &history.Batch{Puts: []history.Record{{Space: history.SpaceChunk, Key: big, Value: bytes.Repeat([]byte{1}, 3<<20)}}})
	_, err = storecopy.Copy(bg, src, openBadger(t, ""), o)
	if !errors.Is(err, history.ErrTooLarge) || !strings.Contains(err.Error(), "chunk record "+hex.EncodeToString(big)) {
		t.Fatalf("copy of a 3 MiB record into a store that holds at most 1 MiB: %v", err)
	}
}

// Verify compares events byte for byte: one event with other attributes
// under the same id is named.
func TestVerifyNamesADifferentEvent(t *testing.T) {
	a, b := openBadger(t, ""), openBadger(t, "")
	run := history.RunRef{WorkflowID: "wf", RunID: "r"}
	appendEvents(t, a, run, 1, 3)
	other := historytest.Event(7)
	other.ID = 2
	mustCommit(t, b, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: 1,
		Events: []history.Event{historytest.Event(1), other, historytest.Event(3)}}}})
	_, err := storecopy.Verify(bg, a, b, storecopy.Options{})
	var me *storecopy.MismatchError
	if !errors.As(err, &me) || len(me.Differences) != 1 || me.Differences[0].EventID != 2 {
		t.Fatalf("Verify: %v", err)
	}
}

// A copy verified before and changed since (a server ran on it) is not
// written to again: Run says the stores differ now.
func TestVerifiedCopyIsNotWrittenAgain(t *testing.T) {
	src := openBadger(t, "")
	fill(t, src, shape{records: 3, runs: 2, maxEvents: 3})
	dst := openBadger(t, "")
	if _, err := storecopy.Run(bg, src, dst, opts()); err != nil {
		t.Fatal(err)
	}
	served := &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: []byte("boot"), Value: []byte("2")}}}
	mustCommit(t, dst, served)
	mustCommit(t, src, &history.Batch{Puts: []history.Record{{Space: history.SpaceLedger, Key: []byte("new"), Value: []byte("v")}}})
	res, err := storecopy.Run(bg, src, dst, opts())
	if !errors.Is(err, storecopy.ErrMismatch) || !strings.Contains(err.Error(), "verified before") || !res.Copy.AlreadyVerified {
		t.Fatalf("Run on a verified copy changed since: %v", err)
	}
	if _, err := dst.Get(bg, history.SpaceLedger, []byte("new")); !errors.Is(err, history.ErrNotFound) {
		t.Fatalf("the verified copy was written to: %v", err)
	}
}
