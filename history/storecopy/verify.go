package storecopy

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"time"

	"github.com/cairnflow/cairn/history"
)

// Verification is what Verify compared: every record of every space and
// every run's events, read back from both stores.
type Verification struct {
	Spaces []SpaceDigest `json:"spaces"`
	// Runs and Events were compared; EventBytes is their encoded size.
	Runs       int64 `json:"runs"`
	Events     int64 `json:"events"`
	EventBytes int64 `json:"eventBytes"`
	// EventsDigest is the SHA-256 of every run's ids and events in order
	// (each event as history.EncodeEvent writes it).
	EventsDigest string        `json:"eventsDigest"`
	Elapsed      time.Duration `json:"elapsed"`
}

// SpaceDigest is what was compared of one space.
type SpaceDigest struct {
	Space   string `json:"space"`
	Records int64  `json:"records"`
	// Bytes are the records' keys and values.
	Bytes int64 `json:"bytes"`
	// Digest is the SHA-256 of the space's keys and values in key order
	// (each length-prefixed).
	Digest string `json:"digest"`
}

// Records returns the records compared, all spaces together.
func (v *Verification) Records() int64 {
	var n int64
	for _, s := range v.Spaces {
		n += s.Records
	}
	return n
}

// Verify reads every record of every space and every run's events from
// both stores and compares them: the same keys with the same value bytes,
// the same runs with the same events (compared as history.EncodeEvent
// writes them). The copy's own markers are left out. Any difference is a
// *MismatchError (ErrMismatch) naming the first ones; the Verification
// says what was compared either way. Only Options.Progress is used.
func Verify(ctx context.Context, src, dst history.Store, opts Options) (*Verification, error) {
	if err := canList(src, "source"); err != nil {
		return nil, err
	}
	if err := canList(dst, "target"); err != nil {
		return nil, err
	}
	started := time.Now()
	vr := &verifier{src: src, dst: dst, opts: opts, v: &Verification{}, diffs: &MismatchError{}}
	err := vr.run(ctx)
	vr.v.Elapsed = time.Since(started)
	if err != nil {
		return vr.v, err
	}
	if vr.diffs.count() > 0 {
		return vr.v, vr.diffs
	}
	return vr.v, nil
}

type verifier struct {
	src, dst history.Store
	opts     Options
	v        *Verification
	diffs    *MismatchError
	now      Progress
	buf      []byte
}

func (vr *verifier) progress() {
	if vr.opts.Progress != nil {
		vr.opts.Progress(vr.now)
	}
}

func (vr *verifier) run(ctx context.Context) error {
	for sp := history.Space(1); sp.Valid(); sp++ {
		if err := vr.space(ctx, sp); err != nil {
			return err
		}
	}
	return vr.events(ctx)
}

// space compares every record of sp.
func (vr *verifier) space(ctx context.Context, sp history.Space) error {
	vr.now = Progress{Phase: PhaseVerify, Space: sp}
	sd := SpaceDigest{Space: sp.String()}
	h := sha256.New()
	src, dst := newPager(vr.src, sp), newPager(vr.dst, sp)
	for {
		p, err := nextPair(ctx, src, dst)
		if err != nil {
			return fmt.Errorf("storecopy: verify: %w", err)
		}
		switch {
		case p.src == nil && p.dst == nil:
			sd.Digest = hex.EncodeToString(h.Sum(nil))
			vr.v.Spaces = append(vr.v.Spaces, sd)
			vr.now.Done = true
			vr.progress()
			return nil
		case p.dst == nil:
			vr.diffs.add(recordDiff(sp, p.src.Key, "in the source, not in the target"))
		case p.src == nil:
			vr.diffs.add(recordDiff(sp, p.dst.Key, "in the target, not in the source"))
			continue
		case !bytes.Equal(p.src.Value, p.dst.Value):
			vr.diffs.add(recordDiff(sp, p.src.Key, fmt.Sprintf("the target's value (%d bytes) differs from the source's (%d bytes)",
				len(p.dst.Value), len(p.src.Value))))
		}
		sd.Records++
		sd.Bytes += int64(len(p.src.Key) + len(p.src.Value))
		vr.now.Records++
		writeChunk(h, p.src.Key)
		writeChunk(h, p.src.Value)
	}
}

// writeChunk hashes b with its length in front.
func writeChunk(h hash.Hash, b []byte) {
	_, _ = h.Write(binary.AppendUvarint(nil, uint64(len(b))))
	_, _ = h.Write(b)
}

// events compares the runs of both stores and their events.
func (vr *verifier) events(ctx context.Context) error {
	vr.now = Progress{Phase: PhaseVerify}
	h := sha256.New()
	src, dst := newRunPager(vr.src), newRunPager(vr.dst)
	for {
		s, d, err := nextRunPair(ctx, src, dst)
		if err != nil {
			return fmt.Errorf("storecopy: verify: %w", err)
		}
		switch {
		case s == nil && d == nil:
			vr.v.EventsDigest = hex.EncodeToString(h.Sum(nil))
			vr.now.Done = true
			vr.progress()
			return nil
		case d == nil:
			vr.diffs.add(eventDiff(*s, 0, "in the source, not in the target"))
			continue
		case s == nil:
			vr.diffs.add(eventDiff(*d, 0, "in the target, not in the source"))
			continue
		}
		if err := vr.run1(ctx, *s, h); err != nil {
			return err
		}
		vr.v.Runs++
		vr.now.Runs++
		if vr.now.Runs%runPage == 0 {
			vr.progress()
		}
	}
}

// run1 compares the events of one run, a page at a time.
func (vr *verifier) run1(ctx context.Context, run history.RunRef, h hash.Hash) error {
	writeChunk(h, []byte(run.WorkflowID))
	writeChunk(h, []byte(run.RunID))
	for from := int64(1); ; {
		se, err := vr.src.ReadEvents(ctx, run, from, eventPage)
		if err != nil {
			return fmt.Errorf("storecopy: verify: read workflow %q run %q in the source: %w", run.WorkflowID, run.RunID, err)
		}
		de, err := vr.dst.ReadEvents(ctx, run, from, eventPage)
		if err != nil {
			return fmt.Errorf("storecopy: verify: read workflow %q run %q in the target: %w", run.WorkflowID, run.RunID, err)
		}
		same, err := vr.sameEvents(run, se, de, h)
		if err != nil || !same || len(se) < eventPage {
			return err
		}
		from += int64(len(se))
	}
}

// sameEvents compares two pages of a run's events, hashing the source's.
func (vr *verifier) sameEvents(run history.RunRef, se, de []history.Event, h hash.Hash) (bool, error) {
	for i, ev := range se {
		var err error
		vr.buf, err = history.AppendEvent(vr.buf[:0], ev)
		if err != nil {
			return false, fmt.Errorf("storecopy: verify: event %d of workflow %q run %q does not encode: %w", ev.ID, run.WorkflowID, run.RunID, err)
		}
		writeChunk(h, vr.buf)
		vr.v.Events++
		vr.v.EventBytes += int64(len(vr.buf))
		vr.now.Events++
		if i >= len(de) {
			vr.diffs.add(eventDiff(run, ev.ID, "in the source, not in the target"))
			return false, nil
		}
		src := len(vr.buf)
		vr.buf, err = history.AppendEvent(vr.buf, de[i])
		if err != nil || de[i].ID != ev.ID || !bytes.Equal(vr.buf[:src], vr.buf[src:]) {
			vr.diffs.add(eventDiff(run, ev.ID, "the target's event differs from the source's"))
			return false, nil
		}
	}
	if len(de) > len(se) {
		vr.diffs.add(eventDiff(run, de[len(se)].ID, "in the target, not in the source"))
		return false, nil
	}
	return true, nil
}

// runPager walks the runs of a store in order, a page at a time.
type runPager struct {
	st    history.Store
	after *history.RunRef
	buf   []history.RunRef
	done  bool
}

func newRunPager(st history.Store) *runPager { return &runPager{st: st} }

func (p *runPager) peek(ctx context.Context) (*history.RunRef, error) {
	if len(p.buf) == 0 && !p.done {
		runs, err := listRuns(ctx, p.st, p.after, runPage)
		if err != nil {
			return nil, err
		}
		p.done = len(runs) < runPage
		if len(runs) > 0 {
			last := runs[len(runs)-1]
			p.after = &last
		}
		p.buf = runs
	}
	if len(p.buf) == 0 {
		return nil, nil
	}
	return &p.buf[0], nil
}

func (p *runPager) next() { p.buf = p.buf[1:] }

// nextRunPair is nextPair for runs.
func nextRunPair(ctx context.Context, src, dst *runPager) (s, d *history.RunRef, err error) {
	if s, err = src.peek(ctx); err != nil {
		return nil, nil, fmt.Errorf("list the source's runs: %w", err)
	}
	if d, err = dst.peek(ctx); err != nil {
		return nil, nil, fmt.Errorf("list the target's runs: %w", err)
	}
	switch c := compareRuns(s, d); {
	case c < 0:
		src.next()
		return s, nil, nil
	case c > 0:
		dst.next()
		return nil, d, nil
	case s != nil:
		src.next()
		dst.next()
	}
	return s, d, nil
}

// compareRuns orders runs by workflow id then run id, bytewise; nil
// (the end) sorts last.
func compareRuns(a, b *history.RunRef) int {
	switch {
	case a == nil && b == nil:
		return 0
	case a == nil:
		return 1
	case b == nil:
		return -1
	}
	if c := bytes.Compare([]byte(a.WorkflowID), []byte(b.WorkflowID)); c != 0 {
		return c
	}
	return bytes.Compare([]byte(a.RunID), []byte(b.RunID))
}
