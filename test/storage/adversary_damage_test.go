//go:build linux

package storage_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// The adversary's damage campaign runs on directories a real server made
// (TestAdversaryKills with CAIRN_ADVERSARY_KEEP): crash copies left by
// SIGKILL under load, and the final directory of a clean shutdown. Beyond
// the single flipped bit, zeroed page or cut file of TestCorruptionCampaign
// it tries two damages at once, damage to the newest WAL record, a deleted
// file, and a file replaced by an older copy of itself; and it judges
// strictly: every record and every event the reference holds must be
// served exactly or reported damaged, one by one, so that one damaged
// record cannot hide others that silently changed.

// refOf takes the reference view of dir: what the store serves from an
// undamaged copy of it. Runs are found from the run-state records (every
// run, not only current ones).
func refOf(t *testing.T, dir string) *snapshot {
	t.Helper()
	scratch := filepath.Join(t.TempDir(), "ref")
	if err := copyDir(dir, scratch); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: scratch})
	if err != nil {
		t.Fatalf("the undamaged directory %s does not open: %v", dir, err)
	}
	defer st.Close()
	s, err := takeSnapshot(st)
	if err != nil {
		t.Fatal(err)
	}
	s.runs = s.runs[:0]
	for k := range s.records[history.SpaceRunState] {
		kr := history.ReadKey([]byte(k))
		ref := history.RunRef{WorkflowID: kr.Str(), RunID: kr.Str()}
		if kr.Err() != nil {
			t.Fatalf("run-state key %x", k)
		}
		s.runs = append(s.runs, ref)
		if _, ok := s.events[ref]; !ok {
			evs, err := st.ReadEvents(bg, ref, 1, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				b, _ := history.EncodeEvent(ev)
				s.events[ref] = append(s.events[ref], string(b))
			}
		}
	}
	sort.Slice(s.runs, func(i, j int) bool {
		if s.runs[i].WorkflowID != s.runs[j].WorkflowID {
			return s.runs[i].WorkflowID < s.runs[j].WorkflowID
		}
		return s.runs[i].RunID < s.runs[j].RunID
	})
	return s
}

// tailRefOf is the reference view of dir without its last transaction,
// when the store accepts that: the commit it holds was made durable but
// the process died before it marked it acknowledged (CAIRN-HWM lags by
// one), so its loss is a torn tail the store may drop, not a lost
// acknowledged commit. It returns nil when the store refuses (the mark
// covers the last commit) or dir has no WAL.
func tailRefOf(t *testing.T, dir string) *snapshot {
	t.Helper()
	byKind, err := dataFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	mems := byKind[".mem"]
	if len(mems) == 0 {
		return nil
	}
	scratch := filepath.Join(t.TempDir(), "tail")
	if err := copyDir(dir, scratch); err != nil {
		t.Fatal(err)
	}
	newest := mems[len(mems)-1]
	n, err := usedExtent(filepath.Join(scratch, newest))
	if err != nil || n == 0 {
		return nil
	}
	// The last non-zero byte is in the checksum of the last transaction's
	// last record: damaging it drops that transaction, and only it.
	if err := (damage{kind: "flip", file: newest, offset: n - 1}).apply(scratch); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: scratch})
	switch {
	case errors.Is(err, history.ErrCorrupt):
		return nil
	case err != nil:
		t.Fatal(err)
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	return refOf(t, scratch)
}

// strictDiff compares what st serves with ref record by record and event
// by event. It returns how many reads reported damage and the first
// silently different things.
func (ref *snapshot) strictDiff(st *badgerstore.Store) (reported int, silent []string) {
	bad := func(format string, args ...any) {
		if len(silent) < 5 {
			silent = append(silent, fmt.Sprintf(format, args...))
		}
	}
	for _, sp := range spaces {
		recs, err := st.Scan(bg, sp, history.ScanOptions{})
		switch {
		case err == nil:
			got := make(map[string]string, len(recs))
			for _, r := range recs {
				got[string(r.Key)] = string(r.Value)
				if _, ok := ref.records[sp][string(r.Key)]; !ok {
					bad("%s record %x appeared", sp, r.Key)
				}
			}
			for k, v := range ref.records[sp] {
				if g, ok := got[k]; !ok {
					bad("%s record %x is missing", sp, k)
				} else if g != v {
					bad("%s record %x has another value", sp, k)
				}
			}
		case errors.Is(err, history.ErrCorrupt):
			reported++
			for k, v := range ref.records[sp] {
				g, err := st.Get(bg, sp, []byte(k))
				switch {
				case errors.Is(err, history.ErrCorrupt):
					reported++
				case err != nil:
					bad("%s record %x: %v (the scan reported damage elsewhere)", sp, k, err)
				case string(g) != v:
					bad("%s record %x has another value (the scan reported damage elsewhere)", sp, k)
				}
			}
		default:
			bad("scan %s failed without naming damage: %v", sp, err)
		}
	}
	for _, run := range ref.runs {
		want := ref.events[run]
		evs, err := st.ReadEvents(bg, run, 1, 0)
		switch {
		case err == nil:
			if len(evs) != len(want) {
				bad("%v has %d events, want %d", run, len(evs), len(want))
				continue
			}
			for i, ev := range evs {
				if b, _ := history.EncodeEvent(ev); string(b) != want[i] {
					bad("%v event %d differs", run, ev.ID)
				}
			}
		case errors.Is(err, history.ErrCorrupt):
			reported++
			for i := range want {
				one, err := st.ReadEvents(bg, run, int64(i+1), 1)
				switch {
				case errors.Is(err, history.ErrCorrupt):
					reported++
				case err != nil:
					bad("%v event %d: %v", run, i+1, err)
				case len(one) != 1:
					bad("%v event %d: %d events", run, i+1, len(one))
				default:
					if b, _ := history.EncodeEvent(one[0]); string(b) != want[i] {
						bad("%v event %d differs (its history reported damage elsewhere)", run, i+1)
					}
				}
			}
		default:
			bad("read %v failed without naming damage: %v", run, err)
		}
	}
	return reported, silent
}

// harm is one or more damages to a directory.
type harm struct {
	kind  string
	parts []damage // flips, zeroed pages, cuts
	del   string   // a file deleted
	older string   // a file replaced by this older copy of it
}

func (h harm) String() string {
	var b strings.Builder
	b.WriteString(h.kind)
	for _, d := range h.parts {
		b.WriteString(" " + d.String())
	}
	if h.del != "" {
		b.WriteString(" " + h.del)
	}
	if h.older != "" {
		b.WriteString(" " + filepath.Base(h.older) + " from " + filepath.Base(filepath.Dir(h.older)))
	}
	return b.String()
}

func (h harm) apply(dir string) error {
	for _, d := range h.parts {
		if err := d.apply(dir); err != nil {
			return err
		}
	}
	if h.del != "" {
		if err := os.Remove(filepath.Join(dir, h.del)); err != nil {
			return err
		}
	}
	if h.older != "" {
		if err := copyFile(h.older, filepath.Join(dir, filepath.Base(h.older))); err != nil {
			return err
		}
	}
	return nil
}

// dataFiles lists dir's files by kind.
func dataFiles(dir string) (map[string][]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	byKind := map[string][]string{}
	for _, e := range ents {
		if k := fileKind(e.Name()); k != "" {
			byKind[k] = append(byKind[k], e.Name())
		}
	}
	for _, fs := range byKind {
		sort.Strings(fs)
	}
	return byKind, nil
}

// pickHarm chooses trial i's harm: the kinds in turn.
func pickHarm(rng *rand.Rand, dir string, older []string, trial int) (harm, bool, error) {
	byKind, err := dataFiles(dir)
	if err != nil {
		return harm{}, false, err
	}
	var kinds []string
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	anyFile := func() string {
		k := kinds[rng.IntN(len(kinds))]
		return byKind[k][rng.IntN(len(byKind[k]))]
	}
	single := func(file string) (damage, error) {
		n, err := usedExtent(filepath.Join(dir, file))
		if err != nil {
			return damage{}, err
		}
		d := damage{file: file, kind: []string{"flip", "zero4k", "truncate"}[rng.IntN(3)], bit: uint(rng.IntN(8))}
		if n > 0 {
			d.offset = rng.Int64N(n)
		}
		if d.kind == "zero4k" {
			d.offset &^= 4095
		}
		return d, nil
	}
	switch kind := []string{"double", "tailwal", "delete", "rollback"}[trial%4]; kind {
	case "double":
		a, err := single(anyFile())
		if err != nil {
			return harm{}, false, err
		}
		b, err := single(anyFile())
		if err != nil {
			return harm{}, false, err
		}
		if a.kind == "truncate" { // cut last, so that the other lands
			a, b = b, a
		}
		return harm{kind: kind, parts: []damage{a, b}}, true, nil
	case "tailwal":
		mems := byKind[".mem"]
		if len(mems) == 0 {
			return harm{}, false, nil
		}
		file := mems[len(mems)-1]
		n, err := usedExtent(filepath.Join(dir, file))
		if err != nil || n < 64 {
			return harm{}, false, err
		}
		d := damage{file: file, kind: "flip", offset: n - 1 - rng.Int64N(40), bit: uint(rng.IntN(8))}
		if rng.IntN(2) == 0 {
			d = damage{file: file, kind: "truncate", offset: n - 1 - rng.Int64N(40)}
		}
		return harm{kind: kind, parts: []damage{d}}, true, nil
	case "delete":
		return harm{kind: kind, del: anyFile()}, true, nil
	default: // rollback: a file replaced by an older version of itself
		var cands []string
		for _, o := range older {
			ents, err := os.ReadDir(o)
			if err != nil {
				return harm{}, false, err
			}
			for _, e := range ents {
				name := e.Name()
				if fileKind(name) == "" {
					continue
				}
				cur, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					continue // not in this directory any more
				}
				old, err := os.ReadFile(filepath.Join(o, name))
				if err == nil && string(old) != string(cur) {
					cands = append(cands, filepath.Join(o, name))
				}
			}
		}
		if len(cands) == 0 {
			return harm{}, false, nil
		}
		sort.Strings(cands)
		return harm{kind: kind, older: cands[rng.IntN(len(cands))]}, true, nil
	}
}

// judge damages a fresh copy of dir with h and classifies what the store
// and the engine make of it.
func judge(t *testing.T, dir string, ref, tail *snapshot, h harm) (outcome, string) {
	t.Helper()
	trial := filepath.Join(t.TempDir(), "trial")
	if err := copyDir(dir, trial); err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(trial)
	if err := h.apply(trial); err != nil {
		t.Fatal(err)
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: trial})
	if err != nil {
		if !errors.Is(err, history.ErrCorrupt) {
			return silent, fmt.Sprintf("store refused to open without naming damage: %v", err)
		}
		return refused, err.Error()
	}
	defer st.Close()
	nrep, diffs := ref.strictDiff(st)
	tailNote := ""
	if len(diffs) > 0 && tail != nil {
		if n, d := tail.strictDiff(st); len(d) == 0 {
			// The runs to describe are the tail's: a run the dropped
			// commit started was never acknowledged, and is not found.
			ref, nrep, diffs, tailNote = tail, n, nil, "the unacknowledged last commit dropped; "
		}
	}
	if len(diffs) > 0 {
		return silent, strings.Join(diffs, "; ")
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		if errors.Is(err, history.ErrCorrupt) || errors.Is(err, api.ErrDataCorrupt) {
			return refused, "engine: " + err.Error()
		}
		return silent, fmt.Sprintf("engine refused to open without naming damage: %v", err)
	}
	defer eng.Close()
	quarantined := 0
	for _, run := range ref.runs {
		d, err := eng.DescribeWorkflow(bg, &api.DescribeWorkflowRequest{WorkflowID: run.WorkflowID, RunID: run.RunID})
		switch {
		case err != nil && (errors.Is(err, api.ErrDataCorrupt) || errors.Is(err, history.ErrCorrupt)):
			quarantined++
		case err != nil:
			return silent, fmt.Sprintf("describe %v: %v", run, err)
		case d.Info.Corrupt != "":
			quarantined++
		}
	}
	if nrep > 0 || quarantined > 0 {
		return reported, fmt.Sprintf("%s%d reads reported damage, %d runs quarantined", tailNote, nrep, quarantined)
	}
	return harmless, tailNote
}

// TestAdversaryDamage damages copies of directories a real server made.
//
//	CAIRN_ADVERSARY_DIRS=DIR[,DIR…]   the directories, oldest first (the
//	                                   older ones also give "rollback" its
//	                                   older copies of files); skipped without
//	CAIRN_ADVERSARY_TRIALS=N           trials per directory (default 40)
//	CAIRN_ADVERSARY_SEED=N             (default 1)
func TestAdversaryDamage(t *testing.T) {
	list := os.Getenv("CAIRN_ADVERSARY_DIRS")
	if list == "" {
		t.Skip("set CAIRN_ADVERSARY_DIRS to directories kept by TestAdversaryKills (CAIRN_ADVERSARY_KEEP)")
	}
	dirs := strings.Split(list, ",")
	trials := envInt(t, "CAIRN_ADVERSARY_TRIALS", 40)
	seed := envInt(t, "CAIRN_ADVERSARY_SEED", 1)
	rng := rand.New(rand.NewPCG(uint64(seed), 0xBAD))
	counts := map[outcome]int{}
	byKind := map[string][4]int{}
	var failures []string
	start := time.Now()
	for di, dir := range dirs {
		ref, tail := refOf(t, dir), tailRefOf(t, dir)
		if o, why := judge(t, dir, ref, nil, harm{kind: "none"}); o != harmless {
			t.Fatalf("%s: an undamaged copy was not served exactly (a false alarm): %s", dir, why)
		}
		for i := range trials {
			h, ok, err := pickHarm(rng, dir, dirs[:di], i)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				continue
			}
			o, why := judge(t, dir, ref, tail, h)
			counts[o]++
			c := byKind[h.kind]
			c[o]++
			byKind[h.kind] = c
			if o == silent {
				failures = append(failures, fmt.Sprintf("%s trial %d (%v): %s", filepath.Base(dir), i, h, why))
			}
			if testing.Verbose() {
				t.Logf("%s %3d %-60.60v %-8s %.200s", filepath.Base(dir), i, h, [...]string{"harmless", "refused", "reported", "SILENT"}[o], why)
			}
		}
	}
	damaging := counts[refused] + counts[reported] + counts[silent]
	t.Logf("adversary damage: %d trials on %d directories, %d damaging, %d detected (%d refused at open, %d reported on read), %d silent, %d harmless, in %s",
		damaging+counts[harmless], len(dirs), damaging, counts[refused]+counts[reported], counts[refused], counts[reported], counts[silent], counts[harmless],
		time.Since(start).Round(time.Second))
	kinds := make([]string, 0, len(byKind))
	for k := range byKind {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		c := byKind[k]
		t.Logf("  %-9s harmless %d refused %d reported %d silent %d", k, c[harmless], c[refused], c[reported], c[silent])
	}
	for _, f := range failures {
		t.Error(f)
	}
}
