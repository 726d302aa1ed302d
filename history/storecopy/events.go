package storecopy

import (
	"context"
	"fmt"

	"github.com/cairnflow/cairn/history"
)

// runPage is how many runs are listed at a time; eventPage how many
// events are read at a time.
const (
	runPage   = 1024
	eventPage = 1024
)

// forEachRun calls fn for every run st holds events for, in order.
func forEachRun(ctx context.Context, st history.Store, fn func(history.RunRef) error) error {
	var after *history.RunRef
	for {
		runs, err := listRuns(ctx, st, after, runPage)
		if err != nil {
			return err
		}
		for _, run := range runs {
			if err := fn(run); err != nil {
				return err
			}
		}
		if len(runs) < runPage {
			return nil
		}
		after = &runs[len(runs)-1]
	}
}

// copyEvents copies every run's events the target does not hold yet.
func (c *copier) copyEvents(ctx context.Context) error {
	c.now = Progress{Phase: PhaseEvents}
	err := forEachRun(ctx, c.src, func(run history.RunRef) error {
		if err := c.copyRun(ctx, run); err != nil {
			return err
		}
		c.rep.Runs++
		c.now.Runs++
		return nil
	})
	if err != nil {
		return fmt.Errorf("storecopy: %w", err)
	}
	if err := c.w.flush(ctx); err != nil {
		return err
	}
	c.now.Done = true
	c.progress()
	return nil
}

// copyRun appends the events of run after the target's last one.
func (c *copier) copyRun(ctx context.Context, run history.RunRef) error {
	next, err := c.targetNext(ctx, run)
	if err != nil {
		return err
	}
	c.rep.EventsSkipped += next - 1
	for {
		evs, err := c.src.ReadEvents(ctx, run, next, eventPage)
		if err != nil {
			return fmt.Errorf("read the events of workflow %q run %q from %d in the source: %w", run.WorkflowID, run.RunID, next, err)
		}
		if err := c.appendEvents(ctx, run, next, evs); err != nil {
			return err
		}
		next += int64(len(evs))
		if len(evs) < eventPage {
			return nil
		}
	}
}

// targetNext returns the id of the next event of run the target needs:
// 1 when it holds none. A target holding more events than the source is
// ErrMismatch.
func (c *copier) targetNext(ctx context.Context, run history.RunRef) (int64, error) {
	if !c.resumed {
		return 1, nil
	}
	have, err := c.dst.LastEventID(ctx, run)
	if err != nil {
		return 0, fmt.Errorf("read the last event id of workflow %q run %q in the target: %w", run.WorkflowID, run.RunID, err)
	}
	if have == 0 {
		return 1, nil
	}
	last, err := c.src.LastEventID(ctx, run)
	if err != nil {
		return 0, fmt.Errorf("read the last event id of workflow %q run %q in the source: %w", run.WorkflowID, run.RunID, err)
	}
	if have > last {
		return 0, mismatch(eventDiff(run, last+1, fmt.Sprintf("the target holds %d events, the source %d", have, last)))
	}
	return have + 1, nil
}

// appendEvents queues evs (ids next, next+1, …) as appends to run, as
// many per batch as fit. A batch appends to a run once: when the rest of
// the run does not fit in what is left of the batch, the batch is
// committed first.
func (c *copier) appendEvents(ctx context.Context, run history.RunRef, next int64, evs []history.Event) error {
	for len(evs) > 0 {
		n, size, err := c.fitting(evs)
		if err != nil {
			return err
		}
		if n < len(evs) && len(c.w.items) > 0 {
			if err := c.w.flush(ctx); err != nil {
				return err
			}
			continue
		}
		it := item{app: &history.Append{Run: run, ExpectedNext: next, Events: evs[:n]}, size: size}
		if err := c.w.add(ctx, it); err != nil {
			return err
		}
		c.rep.Events += int64(n)
		c.rep.EventBytes += int64(size)
		c.now.Events += int64(n)
		next += int64(n)
		evs = evs[n:]
		if len(evs) > 0 {
			if err := c.w.flush(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// fitting returns how many of evs (at least one) fit in what is left of
// the writer's batch, and their size.
func (c *copier) fitting(evs []history.Event) (n, size int, err error) {
	room := c.w.max - c.w.size
	if len(c.w.items) >= maxBatchItems {
		room = 0
	}
	for n < len(evs) {
		c.scratch, err = history.AppendEvent(c.scratch[:0], evs[n])
		if err != nil {
			return 0, 0, fmt.Errorf("storecopy: event %d (%s) does not encode: %w", evs[n].ID, evs[n].Type(), err)
		}
		if n > 0 && size+len(c.scratch) > room {
			break
		}
		n++
		size += len(c.scratch)
	}
	return n, size, nil
}
