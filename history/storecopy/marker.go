package storecopy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/cairnflow/cairn/history"
)

// The copy's own records, in SpaceMeta of the target.
var (
	markerPrefix = history.Key().Str("cairn.copy").Bytes()
	startedKey   = history.Key().Str("cairn.copy").Str("started").Bytes()
	verifiedKey  = history.Key().Str("cairn.copy").Str("verified").Bytes()
)

// isMarker reports whether a record is the copy's own (never copied nor
// compared).
func isMarker(sp history.Space, key []byte) bool {
	return sp == history.SpaceMeta && bytes.HasPrefix(key, markerPrefix)
}

// State is what a store says about a copy into it (ReadState).
type State struct {
	// Source is the source the copy names (Options.Source).
	Source string `json:"source"`
	// Started is when the copy began.
	Started time.Time `json:"started"`
	// VerifiedAt is when the copy was verified equal to its source and
	// marked finished; zero while it is not.
	VerifiedAt time.Time `json:"verifiedAt,omitzero"`
	// resumed: the state was read from the target (not written now).
	resumed bool
}

// Verified reports whether the copy finished: verified equal to its source.
func (s *State) Verified() bool { return s != nil && !s.VerifiedAt.IsZero() }

// startedRecord and verifiedRecord are the markers' values (JSON).
type startedRecord struct {
	Source  string    `json:"source"`
	Started time.Time `json:"started"`
}

type verifiedRecord struct {
	Verified time.Time     `json:"verified"`
	Result   *Verification `json:"result"`
}

// ReadState returns the copy st holds — its source, and whether it was
// verified — or nil when st holds no copy (it was never the target of
// one). A server should refuse to serve a store whose copy is not
// Verified: it holds part of its source only.
func ReadState(ctx context.Context, st history.Store) (*State, error) {
	v, err := st.Get(ctx, history.SpaceMeta, startedKey)
	switch {
	case errors.Is(err, history.ErrNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("storecopy: read the copy's start marker: %w", err)
	}
	var sr startedRecord
	if err := json.Unmarshal(v, &sr); err != nil {
		return nil, fmt.Errorf("storecopy: the copy's start marker does not decode: %w", err)
	}
	s := &State{Source: sr.Source, Started: sr.Started}
	v, err = st.Get(ctx, history.SpaceMeta, verifiedKey)
	switch {
	case errors.Is(err, history.ErrNotFound):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("storecopy: read the copy's verified marker: %w", err)
	}
	var vr verifiedRecord
	if err := json.Unmarshal(v, &vr); err != nil {
		return nil, fmt.Errorf("storecopy: the copy's verified marker does not decode: %w", err)
	}
	s.VerifiedAt = vr.Verified
	return s, nil
}

// begin starts a copy of source into dst, or finds the one to resume.
func begin(ctx context.Context, src, dst history.Store, source string) (*State, error) {
	if err := canList(src, "source"); err != nil {
		return nil, err
	}
	if err := canList(dst, "target"); err != nil {
		return nil, err
	}
	st, err := ReadState(ctx, dst)
	switch {
	case err != nil:
		return nil, err
	case st != nil && st.Source != source:
		return nil, fmt.Errorf("%w: it holds a copy of %q (started %s), not of %q", ErrTargetNotEmpty,
			st.Source, st.Started.Format(time.RFC3339), source)
	case st != nil:
		st.resumed = true
		return st, nil
	}
	if err := wantEmpty(ctx, dst); err != nil {
		return nil, err
	}
	st = &State{Source: source, Started: time.Now().UTC()}
	v, err := json.Marshal(startedRecord{Source: source, Started: st.Started})
	if err != nil {
		return nil, fmt.Errorf("storecopy: encode the start marker: %w", err)
	}
	err = dst.Commit(ctx, &history.Batch{
		Conditions: []history.Condition{{Space: history.SpaceMeta, Key: startedKey}},
		Puts:       []history.Record{{Space: history.SpaceMeta, Key: startedKey, Value: v}},
	})
	if errors.Is(err, history.ErrConflict) {
		return nil, fmt.Errorf("%w: another copy started into it meanwhile", ErrTargetNotEmpty)
	}
	if err != nil {
		return nil, fmt.Errorf("storecopy: write the start marker: %w", err)
	}
	return st, nil
}

// canList refuses a store that cannot list its runs.
func canList(st history.Store, which string) error {
	if _, ok := st.(history.RunLister); !ok {
		return fmt.Errorf("%w: the %s (%T)", ErrUnsupported, which, st)
	}
	return nil
}

// wantEmpty refuses a target that holds any record or event.
func wantEmpty(ctx context.Context, dst history.Store) error {
	for sp := history.Space(1); sp.Valid(); sp++ {
		recs, err := dst.Scan(ctx, sp, history.ScanOptions{Limit: 1})
		if err != nil {
			return fmt.Errorf("storecopy: look into the target's %s space: %w", sp, err)
		}
		if len(recs) > 0 {
			return fmt.Errorf("%w: it holds %s records (key %x) and no copy of this source", ErrTargetNotEmpty, sp, recs[0].Key)
		}
	}
	runs, err := listRuns(ctx, dst, nil, 1)
	if err != nil {
		return fmt.Errorf("storecopy: look for the target's runs: %w", err)
	}
	if len(runs) > 0 {
		return fmt.Errorf("%w: it holds the events of workflow %q run %q and no copy of this source", ErrTargetNotEmpty,
			runs[0].WorkflowID, runs[0].RunID)
	}
	return nil
}

// markVerified writes the verified marker, last.
func markVerified(ctx context.Context, dst history.Store, v *Verification) error {
	b, err := json.Marshal(verifiedRecord{Verified: time.Now().UTC(), Result: v})
	if err != nil {
		return fmt.Errorf("storecopy: encode the verified marker: %w", err)
	}
	err = dst.Commit(ctx, &history.Batch{Puts: []history.Record{{Space: history.SpaceMeta, Key: verifiedKey, Value: b}}})
	if err != nil {
		return fmt.Errorf("storecopy: write the verified marker: %w", err)
	}
	return nil
}

// listRuns is st's history.RunLister (canList checked it).
func listRuns(ctx context.Context, st history.Store, after *history.RunRef, limit int) ([]history.RunRef, error) {
	rl, ok := st.(history.RunLister)
	if !ok {
		return nil, fmt.Errorf("%w: %T", ErrUnsupported, st)
	}
	return rl.Runs(ctx, after, limit)
}
