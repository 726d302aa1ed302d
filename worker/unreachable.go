package worker

import (
	"sync"
	"sync/atomic"
	"time"
)

// UnreachableSummaryEvery is how often, at most, a worker whose polls keep
// failing says so again: it logs a streak's first failure, then at most
// one summary per this interval ("still unreachable after N failed polls
// over D; last error …"), and once when a poll gets through again.
const UnreachableSummaryEvery = 30 * time.Second

// pollTrouble is the worker's view of a streak of failed polls, shared by
// its pollers (a dozen of them fail together when the server is away).
type pollTrouble struct {
	failing atomic.Bool // a streak is on: the only state a good poll reads

	mu       sync.Mutex
	since    time.Time // the streak's first failure
	reported time.Time // its last line logged
	failures int64
	lastErr  error
}

// pollFailed records a failed poll and logs what the streak calls for: its
// first failure, or a summary when the last line is UnreachableSummaryEvery
// old.
func (w *Worker) pollFailed(err error, what string) {
	w.stats.PollFailures.Add(1)
	t := &w.trouble
	now := w.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	t.failures++
	t.lastErr = err
	if !t.failing.Load() {
		t.failing.Store(true)
		t.since, t.reported = now, now
		w.log.Warn().Err(err).Str("poll", what).Msg("the server is unreachable; retrying (further failures are summed up every " +
			UnreachableSummaryEvery.String() + ")")
		return
	}
	if now.Sub(t.reported) < UnreachableSummaryEvery {
		return
	}
	t.reported = now
	w.log.Warn().Err(t.lastErr).Int64("failed_polls", t.failures).Dur("for", now.Sub(t.since)).
		Msgf("still unreachable after %d failed polls over %s; last error: %v", t.failures, now.Sub(t.since).Round(time.Second), t.lastErr)
}

// pollSucceeded ends a streak of failed polls, saying so.
func (w *Worker) pollSucceeded() {
	t := &w.trouble
	if !t.failing.Load() {
		return
	}
	now := w.clk.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.failing.Load() {
		return
	}
	w.log.Info().Int64("failed_polls", t.failures).Dur("for", now.Sub(t.since)).
		Msgf("the server is reachable again, after %d failed polls over %s", t.failures, now.Sub(t.since).Round(time.Second))
	t.failing.Store(false)
	t.failures, t.lastErr = 0, nil
}
