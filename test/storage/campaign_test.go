//go:build linux

// Package storage_test tries the storage the way an adversarial operator
// would: a real data directory made by payment workflows, damaged on
// copies, and a filesystem that fills up.
package storage_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

var bg = context.Background()

const queue = "payments"

// Invoice is a payment workflow's input. Mode "pay" pays at once,
// "approve" waits for an approval signal (the run stays open), "unknown"
// gets an outcome-unknown payment (the run pauses).
type Invoice struct {
	ID     string
	Amount int
	Mode   string
	Note   string // a large note puts the started event in the value log
}

// PayInvoice is the payment workflow.
func PayInvoice(ctx sdk.Context, inv Invoice) (string, error) {
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute})
	if inv.Mode == "approve" {
		sdk.GetSignalChannel[string](ctx, "approve").Receive(ctx)
	}
	return sdk.ExecuteActivity(ctx, Charge, inv).Get(ctx)
}

// Charge is the payment: a side effect.
func Charge(_ context.Context, inv Invoice) (string, error) {
	if inv.Mode == "unknown" {
		return "", activities.ErrOutcomeUnknown
	}
	return fmt.Sprintf("receipt-%s-%d", inv.ID, inv.Amount), nil
}

// env is an engine on a store with a worker running the payment workflow.
type env struct {
	st     *badgerstore.Store
	eng    *engine.Engine
	c      client.Client
	cancel context.CancelFunc
	done   chan error
}

func startEnv(t *testing.T, dir string) *env {
	t.Helper()
	return startEnvOpts(t, badgerstore.Options{Dir: dir})
}

func startEnvOpts(t *testing.T, opts badgerstore.Options) *env {
	t.Helper()
	st, err := badgerstore.Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		t.Fatal(err)
	}
	c := client.NewLocal(eng, client.Options{Identity: "campaign"})
	w, err := worker.New(c, worker.Options{TaskQueue: queue, Identity: "campaign-worker"})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterWorkflow(PayInvoice); err != nil {
		t.Fatal(err)
	}
	if err := w.RegisterActivity(Charge, activities.Options{Effect: activities.SideEffect}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	e := &env{st: st, eng: eng, c: c, cancel: cancel, done: make(chan error, 1)}
	go func() { e.done <- w.Run(ctx) }()
	return e
}

// stopWorker stops the worker and the engine, leaving the store open.
func (e *env) stopWorker(t *testing.T) {
	t.Helper()
	e.cancel()
	<-e.done
	if err := e.eng.Close(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) close(t *testing.T) {
	t.Helper()
	e.stopWorker(t)
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
}

func (e *env) start(t *testing.T, inv Invoice) client.Run {
	t.Helper()
	run, err := e.c.StartWorkflow(bg, client.StartOptions{ID: "invoice-" + inv.ID, TaskQueue: queue}, PayInvoice, inv)
	if err != nil {
		t.Fatal(err)
	}
	return run
}

// waitStatus waits (on the engine's long poll, not a sleep) until the
// run's history satisfies ok.
func (e *env) waitFor(t *testing.T, wf string, ok func([]history.Event) bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(bg, time.Minute)
	defer cancel()
	var from int64 = 1
	var evs []history.Event
	for {
		resp, err := e.eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: wf, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			t.Fatalf("wait for %s: %v", wf, err)
		}
		evs = append(evs, resp.Events...)
		if ok(evs) {
			return
		}
		from = resp.NextEventID
	}
}

func hasEvent(typ history.EventType) func([]history.Event) bool {
	return func(evs []history.Event) bool {
		return slices.ContainsFunc(evs, func(ev history.Event) bool { return ev.Type() == typ })
	}
}

// makeDataDir runs payment workflows into dir in three rounds: the first
// two closed cleanly (their data in two table files, the second rewriting
// run states the first wrote: approvals that came later), the third left
// in the memtable's WAL, with runs completed, open (waiting for approval)
// and paused (payment outcome unknown), and values large enough for the
// value log. The store of the last round is still open when the directory
// is copied, as after a kill -9. It returns the copy and the reference
// view of it.
func makeDataDir(t *testing.T) (string, *snapshot) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	big := strings.Repeat("n", 1100<<10)
	var waiting []string // runs waiting for approval, oldest first
	round := func(e *env, name string, n int, bigAt int) {
		var runs []client.Run
		var unknown, approve []string
		for i := range n {
			inv := Invoice{ID: fmt.Sprintf("%s%03d", name, i), Amount: 100*len(name) + i, Mode: "pay"}
			switch i % 6 {
			case 1:
				inv.Mode = "approve"
				approve = append(approve, "invoice-"+inv.ID)
			case 4:
				inv.Mode = "unknown"
				unknown = append(unknown, "invoice-"+inv.ID)
			}
			if i == bigAt {
				inv.Note = big
			}
			r := e.start(t, inv)
			if inv.Mode == "pay" {
				runs = append(runs, r)
			}
		}
		for _, r := range runs {
			if err := r.Get(bg, nil); err != nil {
				t.Fatal(err)
			}
		}
		for _, wf := range approve {
			e.waitFor(t, wf, hasEvent(history.TypeWorkflowTaskCompleted))
		}
		for _, wf := range unknown {
			e.waitFor(t, wf, hasEvent(history.TypeActivityOutcomeUnknown))
		}
		// Approve the two oldest waiting runs: their state records are
		// rewritten in this round's file.
		for range min(2, len(waiting)) {
			wf := waiting[0]
			waiting = waiting[1:]
			if err := e.c.SignalWorkflow(bg, wf, "", "approve", "ops"); err != nil {
				t.Fatal(err)
			}
			e.waitFor(t, wf, hasEvent(history.TypeWorkflowCompleted))
		}
		waiting = append(waiting, approve...)
	}
	e := startEnv(t, dir)
	round(e, "A", 24, 7)
	e.close(t) // the memtable goes to a table file
	e = startEnv(t, dir)
	round(e, "B", 18, -1)
	e.close(t)
	e = startEnv(t, dir)
	round(e, "C", 24, 10)
	e.stopWorker(t)
	ref, err := takeSnapshot(e.st)
	if err != nil {
		t.Fatal(err)
	}
	master := filepath.Join(t.TempDir(), "master")
	if err := copyDir(dir, master); err != nil {
		t.Fatal(err)
	}
	if err := e.st.Close(); err != nil {
		t.Fatal(err)
	}
	return master, ref
}

// snapshot is everything a store holds: every record of every space and
// every event of every run (as encoded bytes).
type snapshot struct {
	records map[history.Space]map[string]string
	events  map[history.RunRef][]string
	runs    []history.RunRef
}

// spaces are every record space the store has.
var spaces = func() []history.Space {
	var out []history.Space
	for sp := history.Space(1); sp.Valid(); sp++ {
		out = append(out, sp)
	}
	return out
}()

// takeSnapshot reads st completely; runs are found through the current-run
// records and the run-state keys' event logs.
func takeSnapshot(st *badgerstore.Store) (*snapshot, error) {
	s := &snapshot{records: map[history.Space]map[string]string{}, events: map[history.RunRef][]string{}}
	for _, sp := range spaces {
		recs, err := st.Scan(bg, sp, history.ScanOptions{})
		if err != nil {
			return nil, fmt.Errorf("scan %s: %w", sp, err)
		}
		m := map[string]string{}
		for _, r := range recs {
			m[string(r.Key)] = string(r.Value)
		}
		s.records[sp] = m
	}
	for k, v := range s.records[history.SpaceCurrentRun] {
		kr := history.ReadKey([]byte(k))
		s.runs = append(s.runs, history.RunRef{WorkflowID: kr.Str(), RunID: v})
	}
	sort.Slice(s.runs, func(i, j int) bool { return s.runs[i].WorkflowID < s.runs[j].WorkflowID })
	for _, run := range s.runs {
		evs, err := st.ReadEvents(bg, run, 1, 0)
		if err != nil {
			return nil, fmt.Errorf("read %v: %w", run, err)
		}
		for _, ev := range evs {
			b, err := history.EncodeEvent(ev)
			if err != nil {
				return nil, err
			}
			s.events[run] = append(s.events[run], string(b))
		}
	}
	return s, nil
}

// diff compares what st serves with the reference. It returns a
// description of silently different data, or the damage the store
// reported (an error wrapping history.ErrCorrupt), or neither.
func (ref *snapshot) diff(st *badgerstore.Store) (silent string, reported error) {
	for _, sp := range spaces {
		recs, err := st.Scan(bg, sp, history.ScanOptions{})
		if err != nil {
			if errors.Is(err, history.ErrCorrupt) {
				return "", err
			}
			return fmt.Sprintf("scan %s failed without naming damage: %v", sp, err), nil
		}
		got := map[string]string{}
		for _, r := range recs {
			got[string(r.Key)] = string(r.Value)
		}
		for k, v := range ref.records[sp] {
			if g, ok := got[k]; !ok {
				return fmt.Sprintf("%s record %x is missing", sp, k), nil
			} else if g != v {
				return fmt.Sprintf("%s record %x has another value", sp, k), nil
			}
		}
		for k := range got {
			if _, ok := ref.records[sp][k]; !ok {
				return fmt.Sprintf("%s record %x appeared", sp, k), nil
			}
		}
	}
	for _, run := range ref.runs {
		evs, err := st.ReadEvents(bg, run, 1, 0)
		if err != nil {
			if errors.Is(err, history.ErrCorrupt) {
				return "", err
			}
			return fmt.Sprintf("read %v failed without naming damage: %v", run, err), nil
		}
		want := ref.events[run]
		if len(evs) != len(want) {
			return fmt.Sprintf("%v has %d events, want %d", run, len(evs), len(want)), nil
		}
		for i, ev := range evs {
			b, _ := history.EncodeEvent(ev)
			if string(b) != want[i] {
				return fmt.Sprintf("%v event %d differs", run, ev.ID), nil
			}
		}
	}
	return "", nil
}

// A damage is one way of hurting a file.
type damage struct {
	kind   string // "flip", "zero4k", "truncate"
	file   string // relative to the data directory
	offset int64
	bit    uint
}

func (d damage) String() string {
	return fmt.Sprintf("%s %s@%d", d.kind, d.file, d.offset)
}

// fileKind groups a data directory's files.
func fileKind(name string) string {
	switch {
	case strings.HasSuffix(name, ".mem"):
		return ".mem"
	case strings.HasSuffix(name, ".vlog"):
		return ".vlog"
	case strings.HasSuffix(name, ".sst"):
		return ".sst"
	case name == "MANIFEST", name == "KEYREGISTRY", name == "DISCARD", name == badgerstore.HWMFile:
		return name
	}
	return ""
}

// usedExtent is the length of f up to its last non-zero byte: Badger's
// logs are preallocated and mostly zero past their end, where damage would
// touch nothing.
func usedExtent(path string) (int64, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	i := len(b) - 1
	for i >= 0 && b[i] == 0 {
		i--
	}
	return int64(i + 1), nil
}

// pick chooses the damage of one trial: kinds in turn, so every kind of
// file is hit, a random file of that kind and a random place in its used
// part.
func pick(rng *rand.Rand, dir string, trial int) (damage, error) {
	byKind := map[string][]string{}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return damage{}, err
	}
	for _, e := range ents {
		if k := fileKind(e.Name()); k != "" {
			byKind[k] = append(byKind[k], e.Name())
		}
	}
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	kind := kinds[trial%len(kinds)]
	files := byKind[kind]
	sort.Strings(files)
	file := files[rng.IntN(len(files))]
	n, err := usedExtent(filepath.Join(dir, file))
	if err != nil {
		return damage{}, err
	}
	d := damage{file: file, kind: []string{"flip", "zero4k", "truncate"}[(trial/len(kinds))%3]}
	if n > 0 {
		d.offset = rng.Int64N(n)
	}
	d.bit = uint(rng.IntN(8))
	if d.kind == "zero4k" {
		d.offset &^= 4095
	}
	return d, nil
}

func (d damage) apply(dir string) error {
	path := filepath.Join(dir, d.file)
	switch d.kind {
	case "none":
		return nil
	case "truncate":
		return os.Truncate(path, d.offset)
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	switch d.kind {
	case "flip":
		b := make([]byte, 1)
		if _, err := f.ReadAt(b, d.offset); err != nil && err != io.EOF {
			return err
		}
		b[0] ^= 1 << d.bit
		_, err = f.WriteAt(b, d.offset)
		return err
	case "zero4k":
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		n := min(4096, fi.Size()-d.offset)
		if n <= 0 {
			return nil
		}
		_, err = f.WriteAt(make([]byte, n), d.offset)
		return err
	}
	return fmt.Errorf("unknown damage %q", d.kind)
}

// outcome of one trial.
type outcome int

const (
	harmless outcome = iota // everything served exactly as before
	refused                 // Open (store or engine) refused with a corruption error
	reported                // opened; reads of the damaged data report corruption
	silent                  // different data served without an error: the failure this test exists for
)

// runTrial damages a fresh copy of master and judges what the store and the
// engine make of it. A refusal must also read as one (checkRefusal): form
// says how it does not ("" when it does).
func runTrial(t *testing.T, master string, ref *snapshot, d damage) (o outcome, why, form string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "trial")
	if err := copyDir(master, dir); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := d.apply(dir); err != nil {
		t.Fatal(err)
	}
	o, why, refusal := judgeCopy(dir, ref)
	if o == refused {
		// A refusal sticks: the store opened again on the same copy, as a
		// restarted server would, refuses again. An open that refused but
		// repaired the damage on its way would serve the older data the
		// second time without a word.
		if o2, why2, _ := judgeCopy(dir, ref); o2 != refused {
			return silent, fmt.Sprintf("refused (%s), then opened on the next try: %s: %s", why, [...]string{"harmless", "refused", "reported", "SILENT"}[o2], why2), ""
		}
		// The server gets a copy of its own: a refused open may already
		// have written to this one (see checkRefusal).
		again := filepath.Join(t.TempDir(), "again")
		if err := copyDir(master, again); err != nil {
			t.Fatal(err)
		}
		defer os.RemoveAll(again)
		if err := d.apply(again); err != nil {
			t.Fatal(err)
		}
		form = checkRefusal(t, dir, again, refusal)
	}
	return o, why, form
}

// judgeCopy opens a damaged copy with the store and the engine, closes
// them, and says what they made of it; refusal is the error of a refusal
// at open.
func judgeCopy(dir string, ref *snapshot) (_ outcome, why string, refusal error) {
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		if !errors.Is(err, history.ErrCorrupt) {
			return silent, fmt.Sprintf("store refused to open without naming damage: %v", err), nil
		}
		return refused, err.Error(), err
	}
	defer st.Close()
	diff, repErr := ref.diff(st)
	if diff != "" {
		return silent, diff, nil
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		if errors.Is(err, history.ErrCorrupt) || errors.Is(err, api.ErrDataCorrupt) {
			return refused, err.Error(), err
		}
		if repErr == nil {
			return silent, fmt.Sprintf("engine refused an intact store: %v", err), nil
		}
		return reported, fmt.Sprintf("%v; engine: %v", repErr, err), nil
	}
	defer eng.Close()
	for _, run := range ref.runs {
		desc, err := eng.DescribeWorkflow(bg, &api.DescribeWorkflowRequest{WorkflowID: run.WorkflowID, RunID: run.RunID})
		switch {
		case err != nil && (errors.Is(err, api.ErrDataCorrupt) || errors.Is(err, history.ErrCorrupt)):
			if repErr == nil {
				repErr = err
			}
		case err != nil:
			return silent, fmt.Sprintf("describe %v: %v", run, err), nil
		case desc.Info.Corrupt != "" && repErr == nil:
			repErr = errors.New(desc.Info.Corrupt)
		}
	}
	if repErr != nil {
		return reported, repErr.Error(), nil
	}
	return harmless, "", nil
}

// TestCorruptionCampaign damages copies of a real data directory (bit
// flips, zeroed 4 KiB pages, truncations, in every kind of file) and
// checks that every damage that changes what would be served is detected:
// the store or the engine refuses to open with a corruption error, or the
// damaged data reads as corrupt; never different data without an error,
// never a panic (which would end this test binary). Every refusal must read
// as one, in the store's error and in what `cairn server` prints on the
// same copy (checkRefusal).
//
// CAIRN_CORRUPTION_TRIALS sets the number of trials (default 36);
// CAIRN_CORRUPTION_SEED the seed (default 1).
func TestCorruptionCampaign(t *testing.T) {
	trials := envInt(t, "CAIRN_CORRUPTION_TRIALS", 36)
	seed := envInt(t, "CAIRN_CORRUPTION_SEED", 1)
	if testing.Short() {
		trials = min(trials, 12)
	}
	master, ref := makeDataDir(t)
	// The control: an undamaged copy must be served exactly, or every
	// "detection" below could be a false alarm.
	for range 3 {
		if o, why, _ := runTrial(t, master, ref, damage{kind: "none"}); o != harmless {
			t.Fatalf("an undamaged copy of the data directory was not served as it is: %s", why)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(seed), 0xCA19))
	counts := map[outcome]int{}
	byKind := map[string][4]int{}
	var failures []string
	for i := range trials {
		d, err := pick(rng, master, i)
		if err != nil {
			t.Fatal(err)
		}
		o, why, form := runTrial(t, master, ref, d)
		counts[o]++
		k := byKind[fileKind(d.file)+" "+d.kind]
		k[o]++
		byKind[fileKind(d.file)+" "+d.kind] = k
		if o == silent {
			failures = append(failures, fmt.Sprintf("trial %d (%v): %s", i, d, why))
		}
		if form != "" {
			failures = append(failures, fmt.Sprintf("trial %d (%v): the refusal does not read as a damaged data directory: %s", i, d, form))
		}
		if testing.Verbose() {
			t.Logf("trial %3d %-32v %-8s %.160s", i, d, [...]string{"harmless", "refused", "reported", "SILENT"}[o], why)
		}
	}
	damaging := counts[refused] + counts[reported] + counts[silent]
	t.Logf("corruption campaign (seed %d): %d trials, %d damaging, %d detected (%d refused at open, %d reported on read), %d silent, %d harmless, 0 panics",
		seed, trials, damaging, counts[refused]+counts[reported], counts[refused], counts[reported], counts[silent], counts[harmless])
	keys := make([]string, 0, len(byKind))
	for k := range byKind {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := byKind[k]
		t.Logf("  %-22s harmless %d refused %d reported %d silent %d", k, c[harmless], c[refused], c[reported], c[silent])
	}
	for _, f := range failures {
		t.Error(f)
	}
}

func envInt(t *testing.T, name string, def int) int {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// copyDir copies the regular files of src into a new directory dst,
// keeping sparse files' sizes.
func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(ents))
	for i, e := range ents {
		if !e.Type().IsRegular() || e.Name() == "LOCK" {
			continue
		}
		wg.Go(func() { errs[i] = copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// copyFile copies src to dst, skipping runs of zero bytes (so that the
// copy of a preallocated log stays sparse) but keeping the size.
func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	const chunk = 64 << 10
	zero := make([]byte, chunk)
	for off := 0; off < len(b); off += chunk {
		part := b[off:min(off+chunk, len(b))]
		if bytes.Equal(part, zero[:len(part)]) {
			continue
		}
		if _, err := f.WriteAt(part, int64(off)); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Truncate(int64(len(b))); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
