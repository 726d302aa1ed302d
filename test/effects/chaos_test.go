//go:build unix

package effects_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk/client"
)

// TestChaosSoak is the effect-safety campaign: `cairn server`, two shop
// worker processes and the vendor process (vendor_test.go: it journals
// every request, does not deduplicate charges, sometimes charges and
// answers too late, offers a lookup by key), under a seeded driver that
// SIGKILLs the server or a worker every 0.5–3 s and restarts it, and now
// and then freezes a worker (SIGSTOP) past its lease and the drift margin
// before it resumes it (SIGCONT). Meanwhile shop runs keep starting. Then
// it waits for every run to complete or pause, resolves the paused ones as
// a person would (looking at the vendor's journal), and checks what the
// issue asks: at most one charge per idempotency key, every run completed,
// none lost, none stuck, every double charge (if any) visible through the
// API as a duplicate, and no duplicate alarm where the vendor charged once.
//
// The short run is part of the suite (≥ 20 kills, ≥ 5 freezes). The long
// run (≥ 1,000 kills, ≥ 100 freezes) is a command:
//
//	CAIRN_EFFECTS_SOAK=long nice -n 10 go test ./test/effects -run TestChaosSoak -timeout 3h -v
//
// CAIRN_EFFECTS_SEED=N replays a campaign's faults (the processes'
// timing is not replayable; the fault schedule is).
// CAIRN_EFFECTS_SOAK_KEEP=DIR keeps the campaign's data directory, once
// checked, as DIR/data (`cairn migrate` moves such a directory into
// PostgreSQL: docs/scale-out.md).
//
// With CAIRN_TEST_STORE=postgres the server runs on a PostgreSQL schema
// of the test's own, which every restart reopens: a cluster of one whose
// server dies and is replaced, under a new name, by one that takes its
// shards over once their leases ran out (--lease-ttl, short here).
func TestChaosSoak(t *testing.T) {
	cfg := soakConfig(t)
	t.Logf("chaos soak: seed %d, at least %d kills and %d freezes (CAIRN_EFFECTS_SEED=%d replays the faults)", cfg.seed, cfg.kills, cfg.freezes, cfg.seed)
	s := newSoak(t, cfg)
	s.run()
	f := s.check()
	t.Logf("figures: %s", f)
	if path := os.Getenv("CAIRN_EFFECTS_SOAK_FIGURES"); path != "" {
		_ = os.WriteFile(path, []byte(f.String()+"\n"), 0o644)
	}
	if keep := os.Getenv("CAIRN_EFFECTS_SOAK_KEEP"); keep != "" && s.data.Postgres() {
		t.Logf("CAIRN_EFFECTS_SOAK_KEEP: the campaign ran on Postgres (schema %s, dropped with the test): no data directory to keep", s.data.Schema())
	} else if keep != "" {
		// check stopped the server: the directory is at rest.
		if err := os.CopyFS(filepath.Join(keep, "data"), os.DirFS(filepath.Join(s.dir, "data"))); err != nil {
			t.Errorf("keep the data directory: %v", err)
		} else {
			t.Logf("kept the data directory in %s", filepath.Join(keep, "data"))
		}
	}
	var problems []string
	for _, c := range []struct {
		bad  bool
		what string
	}{
		{f.kills() < cfg.kills || f.Freezes < cfg.freezes, "fewer faults than asked"},
		{f.Silent > 0, "a double charge invisible through the API"},
		{f.FalseAlarms > 0, "a duplicate alarm where the vendor charged once"},
		{f.Lost > 0, "runs lost"},
		{f.Stuck > 0, "runs stuck"},
		{f.WrongResult > 0, "a run whose result is not the vendor's charge"},
		{f.CheckProblems > 0, "cairn check found problems"},
	} {
		if c.bad {
			problems = append(problems, c.what)
		}
	}
	if len(problems) > 0 {
		t.Fatalf("seed %d: %s\n%s", cfg.seed, strings.Join(problems, "; "), s.details.String())
	}
}

type soakCfg struct {
	seed           uint64
	kills, freezes int
	// runsInFlight is how many shop runs the driver keeps running.
	runsInFlight int
	margin       time.Duration
}

func soakConfig(t *testing.T) soakCfg {
	cfg := soakCfg{seed: uint64(time.Now().UnixNano()), kills: 20, freezes: 5, runsInFlight: 6, margin: time.Second}
	if s := os.Getenv("CAIRN_EFFECTS_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_EFFECTS_SEED=%q: %v", s, err)
		}
		cfg.seed = n
	}
	if os.Getenv("CAIRN_EFFECTS_SOAK") == "long" {
		cfg.kills, cfg.freezes, cfg.runsInFlight = 1000, 100, 12
	}
	if s := os.Getenv("CAIRN_EFFECTS_SOAK_MARGIN"); s != "" { // to see what a smaller margin costs
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatalf("CAIRN_EFFECTS_SOAK_MARGIN=%q: %v", s, err)
		}
		cfg.margin = d
	}
	return cfg
}

// soakFigures are what a campaign measured.
type soakFigures struct {
	Seed                                       uint64
	ServerKills, WorkerKills, Freezes          int
	Runs, Completed, Failed                    int
	Reconciled, Paused, Resolved               int
	Charges, Keys, Duplicates, Visible, Silent int
	Alarms, PossibleAlarms, FalseAlarms        int
	UnconfirmedPossible, Confirmations         int
	Conflicts, Lost, Stuck, WrongResult        int
	PausedAtEnd                                int
	CheckProblems                              int
	Elapsed                                    time.Duration
}

func (f *soakFigures) kills() int { return f.ServerKills + f.WorkerKills }

func (f *soakFigures) String() string {
	return fmt.Sprintf("seed=%d kills=%d (server %d, worker %d) freezes=%d runs=%d completed=%d failed=%d reconciled=%d paused=%d resolved=%d "+
		"charges=%d keys=%d duplicate-charges=%d visible=%d silent=%d alarms=%d possible=%d (unconfirmed %d) false-alarms=%d "+
		"confirmations=%d conflicts=%d lost=%d stuck=%d paused-at-end=%d wrong-results=%d check-problems=%d elapsed=%s",
		f.Seed, f.kills(), f.ServerKills, f.WorkerKills, f.Freezes, f.Runs, f.Completed, f.Failed, f.Reconciled, f.Paused, f.Resolved,
		f.Charges, f.Keys, f.Duplicates, f.Visible, f.Silent, f.Alarms, f.PossibleAlarms, f.UnconfirmedPossible, f.FalseAlarms,
		f.Confirmations, f.Conflicts, f.Lost, f.Stuck, f.PausedAtEnd, f.WrongResult, f.CheckProblems, f.Elapsed.Round(time.Second))
}

// soak is one campaign's world.
type soak struct {
	t       *testing.T
	cfg     soakCfg
	rng     *rand.Rand
	dir     string
	data    *storetest.Data // the server's store: DIR/data, or a Postgres schema
	listen  string
	journal string
	vurl    string
	server  *testkit.Server
	workers [2]*testkit.Proc
	lives   [2]int
	c       client.Client
	started time.Time

	mu      sync.Mutex
	runs    []string // workflow ids started
	figures soakFigures
	details strings.Builder
}

func newSoak(t *testing.T, cfg soakCfg) *soak {
	s := &soak{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, cfg.seed>>1|1)), dir: t.TempDir()}
	s.figures.Seed = cfg.seed
	s.data = storetest.Badger(filepath.Join(s.dir, "data"))
	if storetest.Postgres() {
		s.data = storetest.New(t)
	}
	s.journal = filepath.Join(s.dir, "vendor.jsonl")
	_, s.vurl = startVendor(t, s.journal, envVendorSeed+"="+strconv.FormatUint(cfg.seed, 10), envVendorLate+"=0.1", envQuiet+"=1")
	s.listen = testkit.FreeAddr(t) // the server comes back at the same address
	s.startServer()
	for i := range s.workers {
		s.startWorker(i)
	}
	c, err := client.Dial(s.listen, client.Options{Identity: "soak-driver"}, client.DialOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	s.c = c
	return s
}

// soakLeaseTTL is the shard lease of the servers on Postgres: how long the
// runs of a killed server wait for the next one (the default, 10 s, would
// leave them waiting through most of the campaign).
const soakLeaseTTL = 3 * time.Second

// startServer starts `cairn server` on the campaign's data and address
// and waits until it is ready.
func (s *soak) startServer() {
	args := []string{"--log-level", "info", "--lease-drift-margin", s.cfg.margin.String()}
	if s.data.Postgres() {
		args = append(args, "--lease-ttl", soakLeaseTTL.String())
	}
	s.server = testkit.StartServer(s.t.Context(), s.t, testkit.ServerOptions{Store: s.data, Listen: s.listen, Name: "server", Args: args})
}

func (s *soak) startWorker(i int) {
	s.lives[i]++
	name := fmt.Sprintf("w%c-%d", 'a'+i, s.lives[i])
	s.workers[i] = spawn(s.t, name, envMode+"=shop", envAddr+"="+s.listen, envName+"="+name, envVendorURL+"="+s.vurl, envQuiet+"=1")
}

// run drives the campaign: runs start while the faults go on, then the
// driver waits, resolves the paused runs and waits again.
func (s *soak) run() {
	s.started = time.Now()
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.startRuns(ctx)
	}()
	s.faults()
	stop()
	wg.Wait()
	// A person resolves the paused runs, looking at the vendor; a retry
	// after "not happened" may pause again (the vendor answered late), so
	// they look again, a few times.
	for round := 0; round < 6; round++ {
		s.settle(2 * time.Minute)
		if s.resolvePaused() == 0 {
			break
		}
	}
	s.settle(2 * time.Minute)
	s.figures.Elapsed = time.Since(s.started)
}

// retry calls fn until it succeeds or fails with a typed error other than
// unavailability (the server may be down).
func retry[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		v, err := fn(cctx)
		cancel()
		if err == nil || ctx.Err() != nil || (api.ErrorCode(err) != api.CodeUnavailable && api.ErrorCode(err) != api.CodeInternal &&
			!errors.Is(err, context.DeadlineExceeded)) {
			return v, err
		}
		time.Sleep(100 * time.Millisecond) // the server restarts
	}
}

// startRuns keeps cfg.runsInFlight shop runs running until ctx ends.
func (s *soak) startRuns(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		for ctx.Err() == nil && s.running(ctx) >= s.cfg.runsInFlight {
			time.Sleep(50 * time.Millisecond)
		}
		id := fmt.Sprintf("shop-%d", i)
		o := ShopOrder{Invoice: fmt.Sprintf("INV-%d", i), Amount: 100 + i, Manual: i%4 == 3}
		// Once begun, a start is carried through (the campaign may be over):
		// a run the server started must be counted and checked.
		_, err := retry(context.Background(), func(ctx context.Context) (client.Run, error) {
			return s.c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: agentsQueue, RequestID: id, ReusePolicy: api.RejectDuplicate},
				Shop, o)
		})
		if err != nil && !errors.Is(err, api.ErrAlreadyStarted) {
			s.t.Errorf("start %s: %v", id, err)
			return
		}
		s.mu.Lock()
		s.runs = append(s.runs, id)
		s.mu.Unlock()
	}
}

// running counts the runs that are running (not paused).
func (s *soak) running(ctx context.Context) int {
	resp, err := retry(ctx, func(ctx context.Context) (*api.ListWorkflowsResponse, error) {
		return s.c.ListWorkflows(ctx, &api.ListWorkflowsRequest{Status: api.StatusRunning, PageSize: 1000})
	})
	if err != nil {
		return 0
	}
	return len(resp.Workflows)
}

// faults kills and freezes processes until enough of each happened.
func (s *soak) faults() {
	lease := shopLease
	for s.figures.kills() < s.cfg.kills || s.figures.Freezes < s.cfg.freezes {
		time.Sleep(time.Duration(500+s.rng.IntN(2500)) * time.Millisecond)
		switch p := s.rng.Float64(); {
		case p < 0.25 && s.figures.Freezes < s.cfg.freezes || s.figures.kills() >= s.cfg.kills:
			i := s.rng.IntN(2)
			// Past the lease and the margin, so that its attempts are
			// handed to the other worker before it wakes up.
			d := lease + s.cfg.margin + time.Duration(200+s.rng.IntN(2500))*time.Millisecond
			s.workers[i].Freeze()
			time.Sleep(d)
			s.workers[i].Thaw()
			s.figures.Freezes++
		case p < 0.55:
			s.server.Kill()
			s.startServer()
			s.figures.ServerKills++
		default:
			i := s.rng.IntN(2)
			s.workers[i].Kill()
			s.startWorker(i)
			s.figures.WorkerKills++
		}
	}
}

// settle waits until no run is running (each completed or paused), or
// for at most d.
func (s *soak) settle(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for {
		n := s.running(ctx)
		if n == 0 || ctx.Err() != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// resolvePaused resolves every paused run as a person would: the vendor's
// journal says whether the charge under the paused key happened. It
// returns how many it resolved.
func (s *soak) resolvePaused() int {
	ctx := context.Background()
	resp, err := retry(ctx, func(ctx context.Context) (*api.ListWorkflowsResponse, error) {
		return s.c.ListWorkflows(ctx, &api.ListWorkflowsRequest{Status: api.StatusPaused, PageSize: 1000})
	})
	if err != nil {
		s.t.Fatalf("list paused runs: %v", err)
	}
	entries, err := readJournal(s.journal)
	if err != nil {
		s.t.Fatal(err)
	}
	byKey := charges(entries)
	n := 0
	for _, w := range resp.Workflows {
		s.figures.Paused++
		p := w.Pause
		if p == nil {
			continue
		}
		req := client.ResolveRequest{WorkflowID: w.WorkflowID, RunID: w.RunID, ScheduledEventID: p.ScheduledEventID, By: "soak-clerk"}
		if cs := byKey[p.IdempotencyKey]; len(cs) > 0 {
			c := cs[0]
			req.Resolution, req.Result = history.ResolvedHappened, Receipt{PaymentID: c.PaymentID, Invoice: c.Invoice, Amount: c.Amount, Key: c.Key}
			req.Reason = "found " + c.PaymentID + " at the vendor"
		} else {
			req.Resolution, req.Reason = history.ResolvedNotHappened, "no charge under the key at the vendor"
		}
		if _, err := retry(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.c.ResolveActivity(ctx, req) }); err != nil {
			s.t.Errorf("resolve %s: %v", w.WorkflowID, err)
			continue
		}
		s.figures.Resolved++
		n++
	}
	return n
}

// check counts what the campaign did and compares it with the vendor.
func (s *soak) check() *soakFigures {
	f := &s.figures
	ctx := context.Background()
	entries, err := readJournal(s.journal)
	if err != nil {
		s.t.Fatal(err)
	}
	byKey := charges(entries)
	for key, cs := range byKey {
		f.Keys++
		f.Charges += len(cs)
		if len(cs) > 1 {
			f.Duplicates++
			fmt.Fprintf(&s.details, "double charge under %s: %+v\n", key, cs)
		}
	}
	effects := s.allEffects(ctx)
	for key := range byKey {
		if len(byKey[key]) > 1 {
			if e, ok := effects[key]; ok && e.Duplicates > 0 {
				f.Visible++
			} else {
				f.Silent++
			}
		}
	}
	for key, e := range effects {
		for _, r := range e.Reports {
			switch r.Verdict {
			case api.VerdictDuplicate:
				f.Alarms++
				if len(byKey[key]) < 2 {
					f.FalseAlarms++
					fmt.Fprintf(&s.details, "false alarm on %s (%s): %+v\n%s", key, e.ActivityType, r, s.story(ctx, r.WorkflowID, r.RunID))
				}
			case api.VerdictPossibleDuplicate:
				f.PossibleAlarms++
				if e.Effect != history.SideEffect {
					f.FalseAlarms++
					fmt.Fprintf(&s.details, "possible duplicate on a %s action %s: %+v\n", e.Effect, key, r)
				} else if len(byKey[key]) < 2 {
					f.UnconfirmedPossible++
				}
			case api.VerdictConfirmation:
				f.Confirmations++
			case api.VerdictConflict:
				f.Conflicts++
				fmt.Fprintf(&s.details, "conflict on %s: %+v\n", key, r)
			}
		}
	}
	s.mu.Lock()
	runs := append([]string(nil), s.runs...)
	s.mu.Unlock()
	f.Runs = len(runs)
	for _, id := range runs {
		s.checkRun(ctx, id, byKey)
	}
	f.CheckProblems = s.cairnCheck()
	return f
}

func (s *soak) allEffects(ctx context.Context) map[string]api.EffectInfo {
	out := map[string]api.EffectInfo{}
	req := &api.ListEffectsRequest{PageSize: 1000}
	for {
		resp, err := retry(ctx, func(ctx context.Context) (*api.ListEffectsResponse, error) { return s.c.ListEffects(ctx, req) })
		if err != nil {
			s.t.Fatalf("ListEffects: %v", err)
		}
		for _, e := range resp.Effects {
			out[e.IdempotencyKey] = e
		}
		if resp.NextPageToken == nil {
			return out
		}
		req.NextPageToken = resp.NextPageToken
	}
}

// story tells what happened to a run's activities, for a report.
func (s *soak) story(ctx context.Context, workflowID, runID string) string {
	evs, err := retry(ctx, func(ctx context.Context) ([]history.Event, error) { return s.c.GetHistory(ctx, workflowID, runID) })
	if err != nil {
		return err.Error() + "\n"
	}
	var b strings.Builder
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityStarted:
			fmt.Fprintf(&b, "  %d %s +%s sched=%d attempt=%d epoch=%d %s reconcile=%v\n", ev.ID, ev.Type(), ev.Time.Format("15:04:05.000"),
				a.ScheduledEventID, a.Attempt, a.LeaseEpoch, a.Identity, a.Reconcile)
		case *history.ActivityScheduled, *history.WorkflowTaskCompleted:
		default:
			fmt.Fprintf(&b, "  %d %s +%s %+v\n", ev.ID, ev.Type(), ev.Time.Format("15:04:05.000"), ev.Attrs)
		}
	}
	return b.String()
}

// checkRun checks one workflow id's outcome against the vendor.
func (s *soak) checkRun(ctx context.Context, id string, byKey map[string][]VendorEntry) {
	f := &s.figures
	res, err := retry(ctx, func(ctx context.Context) (*api.GetResultResponse, error) {
		return s.c.Service().GetResult(ctx, &api.GetResultRequest{WorkflowID: id})
	})
	switch {
	case err != nil:
		f.Lost++
		fmt.Fprintf(&s.details, "%s: %v\n", id, err)
		return
	case !res.Closed:
		d, _ := s.c.DescribeWorkflow(ctx, id, "")
		if res.Status == api.StatusPaused && d != nil && d.Info.Pause != nil && d.Info.Pause.Reason != "" {
			f.PausedAtEnd++ // paused with a reason: allowed, and counted
		} else {
			f.Stuck++
		}
		fmt.Fprintf(&s.details, "%s is still %s: %+v\n", id, res.Status, d)
		return
	case res.Status != api.StatusCompleted:
		f.Lost++
		fmt.Fprintf(&s.details, "%s closed as %s: %+v\n", id, res.Status, res.Failure)
		return
	}
	var out ShopOutcome
	if err := s.c.Converter().FromPayload(res.Result, &out); err != nil {
		f.WrongResult++
		return
	}
	if out.Failed != "" {
		f.Failed++
		fmt.Fprintf(&s.details, "%s failed: %s\n", id, out.Failed)
		return
	}
	f.Completed++
	if cs := byKey[out.Receipt.Key]; len(cs) == 0 || !containsPayment(cs, out.Receipt.PaymentID) {
		f.WrongResult++
		fmt.Fprintf(&s.details, "%s: receipt %+v is not a charge of the vendor under its key (%+v)\n", id, out.Receipt, cs)
	}
	evs, err := retry(ctx, func(ctx context.Context) ([]history.Event, error) { return s.c.GetHistory(ctx, id, res.RunID) })
	if err != nil {
		return
	}
	for _, ev := range evs {
		if r, ok := ev.Attrs.(*history.ActivityResolved); ok && r.By == "reconcile" {
			f.Reconciled++
		}
	}
}

func containsPayment(cs []VendorEntry, id string) bool {
	for _, c := range cs {
		if c.PaymentID == id {
			return true
		}
	}
	return false
}

// cairnCheck stops the server and runs `cairn check` on its data: the
// number of problems it reports.
func (s *soak) cairnCheck() int {
	s.server.Kill()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := testkit.CLI(ctx, s.t, "", append(append([]string{"check"}, s.data.ServerArgs()...), "--json")...)
	if err == nil {
		return 0
	}
	fmt.Fprintf(&s.details, "cairn check: %v\n%s\n", err, out.Combined)
	n := strings.Count(out.Combined, `"kind"`)
	return max(n, 1)
}
