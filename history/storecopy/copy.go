package storecopy

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/history"
)

// Errors of Copy, Verify and Run. A failure of a store is returned wrapped
// as it came (history.ErrCorrupt for a damaged source record, a context's
// error, …).
var (
	// ErrTargetNotEmpty: the target holds data that is not this copy's —
	// records or events without a start marker, or the start marker of a
	// copy from another source. Nothing was written.
	ErrTargetNotEmpty = errors.New("storecopy: the target is not empty")
	// ErrMismatch: the target holds a record or an event that differs
	// from the source's, or that the source does not hold. The error is
	// a *MismatchError naming them.
	ErrMismatch = errors.New("storecopy: the target differs from the source")
	// ErrUnsupported: a store cannot list the runs it holds events for
	// (history.RunLister), so a copy could not be known complete.
	ErrUnsupported = errors.New("storecopy: the store cannot list its runs")
	// ErrInvalidOptions: Options.Source is empty.
	ErrInvalidOptions = errors.New("storecopy: invalid options")
)

// DefaultBatchBytes is the default of Options.BatchBytes: under Badger's
// limit for one transaction (about 2.4 MB), far under Postgres's.
const DefaultBatchBytes = 1 << 20

// maxBatchItems bounds the records or appends of one batch.
const maxBatchItems = 4096

// Options configure Copy, Verify and Run.
type Options struct {
	// Source names the source, recorded in the target when the copy
	// starts; a copy into a target that names another source is refused.
	// Name it so that it is the same when the copy is run again (a
	// directory's absolute path, a URL without its password). Required.
	Source string
	// BatchBytes is the size of the batches written to the target
	// (default DefaultBatchBytes): record keys and values, encoded events.
	BatchBytes int
	// Progress, when set, is called after every batch the target
	// committed and when a phase ends, on the calling goroutine.
	Progress func(Progress)
}

func (o Options) withDefaults() (Options, error) {
	if o.Source == "" {
		return o, fmt.Errorf("%w: Source is required", ErrInvalidOptions)
	}
	if o.BatchBytes <= 0 {
		o.BatchBytes = DefaultBatchBytes
	}
	return o, nil
}

// Phase is what a copy is doing.
type Phase string

// The phases, in order.
const (
	PhaseRecords Phase = "records"
	PhaseEvents  Phase = "events"
	PhaseVerify  Phase = "verify"
)

// Progress is what a copy has done so far.
type Progress struct {
	Phase Phase
	// Space is the space being copied or compared (PhaseRecords, and
	// PhaseVerify while it compares records; 0 while it compares events).
	Space history.Space
	// Done: the space (or the events, or the verification) is finished.
	Done bool
	// Records counts the records of Space copied (or compared), Skipped
	// those the target held already.
	Records, Skipped int64
	// Runs counts the runs done, Events the events copied (or compared).
	Runs, Events int64
}

// String renders the progress for a log line.
func (p Progress) String() string {
	switch {
	case p.Phase == PhaseRecords:
		return fmt.Sprintf("records %-8s %d copied, %d already there%s", p.Space, p.Records, p.Skipped, doneMark(p.Done))
	case p.Phase == PhaseEvents:
		return fmt.Sprintf("events: %d runs, %d events copied%s", p.Runs, p.Events, doneMark(p.Done))
	case p.Space != 0:
		return fmt.Sprintf("verify %-8s %d records compared%s", p.Space, p.Records, doneMark(p.Done))
	}
	return fmt.Sprintf("verify events: %d runs, %d events compared%s", p.Runs, p.Events, doneMark(p.Done))
}

func doneMark(done bool) string {
	if done {
		return " (done)"
	}
	return ""
}

// Report is what Copy did.
type Report struct {
	// Source is Options.Source.
	Source string `json:"source"`
	// Resumed: the target held part of this copy already.
	Resumed bool `json:"resumed"`
	// AlreadyVerified: the copy had finished before; nothing was copied.
	AlreadyVerified bool `json:"alreadyVerified,omitempty"`
	// Spaces says what was copied of each space, in space order.
	Spaces []SpaceCopy `json:"spaces"`
	// Runs counts the source's runs; Events the events written,
	// EventsSkipped those the target held already, EventBytes the size
	// of the events written.
	Runs          int64 `json:"runs"`
	Events        int64 `json:"events"`
	EventsSkipped int64 `json:"eventsSkipped"`
	EventBytes    int64 `json:"eventBytes"`
	// Batches counts the batches the target committed; Splits the
	// batches it refused as too large (each then written in two).
	Batches int64         `json:"batches"`
	Splits  int64         `json:"splits"`
	Elapsed time.Duration `json:"elapsed"`

	spaceIndex map[history.Space]int
}

// SpaceCopy is what was copied of one space.
type SpaceCopy struct {
	Space string `json:"space"`
	// Records were written, Skipped were in the target already.
	Records int64 `json:"records"`
	Skipped int64 `json:"skipped"`
	// Bytes are the keys and values written.
	Bytes int64 `json:"bytes"`
}

// Records returns the records written, all spaces together.
func (r *Report) Records() (written, skipped int64) {
	for _, s := range r.Spaces {
		written += s.Records
		skipped += s.Skipped
	}
	return written, skipped
}

func (r *Report) space(sp history.Space) *SpaceCopy {
	if r.spaceIndex == nil {
		r.spaceIndex = map[history.Space]int{}
	}
	i, ok := r.spaceIndex[sp]
	if !ok {
		i = len(r.Spaces)
		r.spaceIndex[sp] = i
		r.Spaces = append(r.Spaces, SpaceCopy{Space: sp.String()})
	}
	return &r.Spaces[i]
}

// Copy copies src into dst: it starts a copy into an empty target or
// resumes this source's (see the package doc), then copies every record
// of every space and every run's events. It does not verify the copy and
// does not mark it finished; Run does both. On any error the target holds
// a part of the copy, and Copy run again resumes it.
func Copy(ctx context.Context, src, dst history.Store, opts Options) (*Report, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	started := time.Now()
	rep := &Report{Source: opts.Source}
	st, err := begin(ctx, src, dst, opts.Source)
	if err != nil {
		return nil, err
	}
	rep.Resumed = st.resumed
	if st.Verified() {
		rep.AlreadyVerified = true
		return rep, nil
	}
	c := &copier{src: src, dst: dst, opts: opts, rep: rep, resumed: st.resumed}
	c.w = newWriter(dst, opts.BatchBytes, rep, c.progress)
	err = c.run(ctx)
	rep.Elapsed = time.Since(started)
	return rep, err
}

// Result is what Run did: the copy, then its verification.
type Result struct {
	Copy   *Report       `json:"copy"`
	Verify *Verification `json:"verify,omitempty"`
}

// Run copies src into dst (Copy), verifies the copy (Verify) and, when the
// target equals the source, marks the copy finished in the target. A copy
// finished before is only verified again.
func Run(ctx context.Context, src, dst history.Store, opts Options) (*Result, error) {
	rep, err := Copy(ctx, src, dst, opts)
	res := &Result{Copy: rep}
	if err != nil {
		return res, err
	}
	res.Verify, err = Verify(ctx, src, dst, opts)
	if err != nil && rep.AlreadyVerified && errors.Is(err, ErrMismatch) {
		return res, fmt.Errorf("storecopy: the copy was verified before and the stores differ now (has a server run on one of them since?): %w", err)
	}
	if err != nil {
		return res, err
	}
	if rep.AlreadyVerified {
		return res, nil
	}
	return res, markVerified(ctx, dst, res.Verify)
}

// copier is one Copy.
type copier struct {
	src, dst history.Store
	opts     Options
	rep      *Report
	w        *writer
	// resumed: the target may hold part of the copy (else it was empty
	// when the copy started, and need not be read).
	resumed bool
	// now is what progress reports.
	now Progress
	// scratch is a buffer to encode events into.
	scratch []byte
}

func (c *copier) run(ctx context.Context) error {
	for sp := history.Space(1); sp.Valid(); sp++ {
		if err := c.copySpace(ctx, sp); err != nil {
			return err
		}
	}
	return c.copyEvents(ctx)
}

// progress reports c.now.
func (c *copier) progress() {
	if c.opts.Progress != nil {
		c.opts.Progress(c.now)
	}
}
