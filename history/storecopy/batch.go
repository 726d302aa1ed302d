package storecopy

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/cairnflow/cairn/history"
)

// minBatchBytes is the smallest batch size a target's refusals shrink
// later batches to.
const minBatchBytes = 64 << 10

// item is one thing a batch writes: a record, or events appended to one
// run.
type item struct {
	rec *history.Record
	app *history.Append
	// size is the bytes it writes (key and value, encoded events).
	size int
}

// describe names the item in errors.
func (it item) describe() string {
	if it.rec != nil {
		return fmt.Sprintf("%s record %x (%d bytes)", it.rec.Space, it.rec.Key, it.size)
	}
	a := it.app
	return fmt.Sprintf("events %d..%d of workflow %q run %q (%d bytes)", a.ExpectedNext,
		a.ExpectedNext+int64(len(a.Events))-1, a.Run.WorkflowID, a.Run.RunID, it.size)
}

// writer gathers items into batches of about max bytes and commits them to
// dst, splitting a batch the target refuses as too large.
type writer struct {
	dst   history.Store
	max   int
	items []item
	size  int
	rep   *Report
	// committed is called after every batch the target committed.
	committed func()
}

func newWriter(dst history.Store, maxBytes int, rep *Report, committed func()) *writer {
	return &writer{dst: dst, max: maxBytes, rep: rep, committed: committed}
}

// full reports whether adding size more bytes would pass the batch size.
func (w *writer) full(size int) bool {
	return len(w.items) > 0 && (w.size+size > w.max || len(w.items) >= maxBatchItems)
}

// add queues an item, first committing the queued ones if it would not
// fit with them. Events continuing the run of the last queued append join
// that append (a batch appends to a run once).
func (w *writer) add(ctx context.Context, it item) error {
	if w.full(it.size) {
		if err := w.flush(ctx); err != nil {
			return err
		}
	}
	if n := len(w.items); n > 0 && it.app != nil && w.items[n-1].app != nil && continues(w.items[n-1].app, it.app) {
		last := &w.items[n-1]
		joined := *last.app
		joined.Events = append(slices.Clip(joined.Events), it.app.Events...)
		last.app, last.size = &joined, last.size+it.size
		w.size += it.size
		return nil
	}
	w.items = append(w.items, it)
	w.size += it.size
	return nil
}

// continues reports whether b appends to a's run right after a's events.
func continues(a, b *history.Append) bool {
	return a.Run == b.Run && a.ExpectedNext+int64(len(a.Events)) == b.ExpectedNext
}

// flush commits the queued items.
func (w *writer) flush(ctx context.Context) error {
	if len(w.items) == 0 {
		return nil
	}
	items := w.items
	w.items, w.size = nil, 0
	if err := w.commit(ctx, items); err != nil {
		return err
	}
	if w.committed != nil {
		w.committed()
	}
	return nil
}

// commit writes items in one batch, or, if the target refuses it as too
// large, in two halves (and later batches half as large). One item too
// large for the target is an error naming it; an append of several
// events is split into two appends first.
func (w *writer) commit(ctx context.Context, items []item) error {
	err := w.dst.Commit(ctx, batchOf(items))
	if err == nil {
		w.rep.Batches++
		return nil
	}
	if !errors.Is(err, history.ErrTooLarge) {
		return fmt.Errorf("storecopy: write %s%s to the target: %w", items[0].describe(), andMore(len(items)), err)
	}
	w.rep.Splits++
	w.max = max(w.max/2, minBatchBytes)
	if len(items) > 1 {
		mid := len(items) / 2
		if err := w.commit(ctx, items[:mid]); err != nil {
			return err
		}
		return w.commit(ctx, items[mid:])
	}
	first, second, ok := splitAppend(items[0])
	if !ok {
		return fmt.Errorf("storecopy: the target cannot store %s in one batch: %w", items[0].describe(), err)
	}
	// One after the other: a batch appends to a run at most once.
	if err := w.commit(ctx, []item{first}); err != nil {
		return err
	}
	return w.commit(ctx, []item{second})
}

// andMore says how many other items a batch held.
func andMore(n int) string {
	if n <= 1 {
		return ""
	}
	return fmt.Sprintf(" and %d more", n-1)
}

// batchOf is the batch writing items.
func batchOf(items []item) *history.Batch {
	b := &history.Batch{}
	for _, it := range items {
		if it.rec != nil {
			b.Puts = append(b.Puts, *it.rec)
		} else {
			b.Appends = append(b.Appends, *it.app)
		}
	}
	return b
}

// splitAppend splits an append of several events into two appends of the
// same run, the second continuing where the first ends.
func splitAppend(it item) (first, second item, ok bool) {
	if it.app == nil || len(it.app.Events) < 2 {
		return item{}, item{}, false
	}
	a := it.app
	mid := len(a.Events) / 2
	one := &history.Append{Run: a.Run, ExpectedNext: a.ExpectedNext, Events: a.Events[:mid]}
	two := &history.Append{Run: a.Run, ExpectedNext: a.ExpectedNext + int64(mid), Events: a.Events[mid:]}
	half := it.size * mid / len(a.Events)
	return item{app: one, size: half}, item{app: two, size: it.size - half}, true
}
