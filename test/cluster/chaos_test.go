//go:build unix

package cluster_test

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
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk/client"
)

// TestClusterChaos is the cluster's fault campaign: three `cairn server
// --store postgres://… --lease-ttl 3s` processes on a PostgreSQL instance
// of the test's own, two shop worker processes each given all three
// addresses (in different orders), and the vendor process
// (vendor_test.go). Shop runs keep starting while a seeded driver
//
//   - SIGKILLs a server and restarts it at the same address;
//   - freezes (SIGSTOP) a server that owns shards, waits until the others
//     have taken every one of its shards over (its lease ran out), then
//     wakes it up (SIGCONT) and counts the commits it tried that the
//     database refused (fenced: nothing of them landed);
//   - SIGKILLs a worker (restarted) or freezes it past its activity lease;
//   - crashes PostgreSQL (pg_ctl stop -m immediate) mid-load and starts it
//     again, then waits until every shard is served once and only once.
//
// Then it waits for every run to complete or pause, resolves the paused
// ones as a person would (looking at the vendor's journal), and checks: at
// most one vendor charge per idempotency key — any second one visible
// through the API as a duplicate —, no duplicate alarm where the vendor
// charged once, every started run exists and completed (or is paused with
// a reason), none stuck, and `cairn check --store` clean.
//
// The lease is 3 s instead of the default 10 s so that a freeze costs
// seconds, not tens of them; the drift margin 1 s, as in test/effects.
//
//	go test ./test/cluster -run TestClusterChaos -v               # the suite's run: ≥ 20 server kills, ≥ 5 owner freezes, 1 Postgres crash
//	CAIRN_CLUSTER_SOAK=long nice -n 10 go test ./test/cluster -run TestClusterChaos -timeout 3h -v   # ≥ 300 server kills
//	CAIRN_CLUSTER_SEED=N …                                        # replays a campaign's fault schedule
//
// Crashing PostgreSQL needs an instance of the test's own (root, and
// initdb: the postgresql package); without one the campaign is skipped,
// saying why — except in CI (CI=true), where it fails.
func TestClusterChaos(t *testing.T) {
	cfg := chaosConfig(t)
	t.Logf("cluster chaos: seed %d, at least %d server kills, %d owner freezes, %d worker faults, %d Postgres crashes (CAIRN_CLUSTER_SEED=%d replays the faults)",
		cfg.seed, cfg.serverKills, cfg.freezes, cfg.workerFaults, cfg.pgCrashes, cfg.seed)
	s := newChaos(t, cfg)
	s.run()
	f := s.check()
	t.Logf("figures: %s", f)
	if path := os.Getenv("CAIRN_CLUSTER_FIGURES"); path != "" {
		_ = os.WriteFile(path, []byte(f.String()+"\n"), 0o644)
	}
	var problems []string
	for _, c := range []struct {
		bad  bool
		what string
	}{
		{f.ServerKills < cfg.serverKills || f.Freezes < cfg.freezes || f.PGCrashes < cfg.pgCrashes, "fewer faults than asked"},
		{f.Duplicates > 0, "a second charge under one idempotency key"},
		{f.Silent > 0, "a double charge invisible through the API"},
		{f.FalseAlarms > 0, "a duplicate alarm where the vendor charged once"},
		{f.Lost > 0, "runs lost"},
		{f.Stuck > 0, "runs stuck"},
		{f.WrongResult > 0, "a run whose result is not the vendor's charge"},
		{f.Ownership > 0, "shards not served once and only once after a fault"},
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

type chaosCfg struct {
	seed                                          uint64
	serverKills, freezes, workerFaults, pgCrashes int
	runsInFlight                                  int
	ttl, margin                                   time.Duration
}

// chaosLeaseTTL is the servers' shard lease in the campaign (the default
// is 10 s: cluster.DefaultLeaseTTL).
const chaosLeaseTTL = 3 * time.Second

func chaosConfig(t *testing.T) chaosCfg {
	cfg := chaosCfg{seed: uint64(time.Now().UnixNano()), serverKills: 20, freezes: 5, workerFaults: 6, pgCrashes: 1, runsInFlight: 6,
		ttl: chaosLeaseTTL, margin: time.Second}
	if s := os.Getenv("CAIRN_CLUSTER_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("CAIRN_CLUSTER_SEED=%q: %v", s, err)
		}
		cfg.seed = n
	}
	if os.Getenv("CAIRN_CLUSTER_SOAK") == "long" {
		cfg.serverKills, cfg.freezes, cfg.workerFaults, cfg.pgCrashes, cfg.runsInFlight = 300, 50, 60, 10, 12
	}
	if why := ownPostgresUnavailable(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("cannot run a PostgreSQL instance of the test's own (%s): CI=true, so the cluster campaign must run", why)
		}
		t.Skipf("the cluster campaign crashes PostgreSQL, so it needs an instance of its own: %s", why)
	}
	return cfg
}

// chaosFigures are what a campaign measured.
type chaosFigures struct {
	Seed                                           uint64
	ServerKills, Freezes, WorkerKills, WorkerStops int
	PGCrashes                                      int
	FencedCommits, RefusedPastLease, FrozenLost    int64
	TakeoverMax                                    time.Duration
	Runs, Completed, Failed                        int
	Reconciled, Paused, Resolved                   int
	Charges, Keys, Duplicates, Visible, Silent     int
	Alarms, PossibleAlarms, FalseAlarms            int
	Confirmations, Conflicts                       int
	Lost, Stuck, WrongResult, PausedAtEnd          int
	Ownership, CheckProblems                       int
	Elapsed                                        time.Duration
}

func (f *chaosFigures) String() string {
	return fmt.Sprintf("seed=%d server-kills=%d owner-freezes=%d (shards lost by the frozen owners %d, calls they refused past their lease %d, their fenced commits %d, slowest takeover %s) "+
		"worker-kills=%d worker-freezes=%d postgres-crashes=%d runs=%d completed=%d failed=%d reconciled=%d paused=%d resolved=%d "+
		"charges=%d keys=%d duplicate-charges=%d visible=%d silent=%d alarms=%d possible=%d false-alarms=%d confirmations=%d conflicts=%d "+
		"lost=%d stuck=%d paused-at-end=%d wrong-results=%d ownership-problems=%d check-problems=%d elapsed=%s",
		f.Seed, f.ServerKills, f.Freezes, f.FrozenLost, f.RefusedPastLease, f.FencedCommits, f.TakeoverMax.Round(100*time.Millisecond),
		f.WorkerKills, f.WorkerStops, f.PGCrashes, f.Runs, f.Completed, f.Failed, f.Reconciled, f.Paused, f.Resolved,
		f.Charges, f.Keys, f.Duplicates, f.Visible, f.Silent, f.Alarms, f.PossibleAlarms, f.FalseAlarms, f.Confirmations, f.Conflicts,
		f.Lost, f.Stuck, f.PausedAtEnd, f.WrongResult, f.Ownership, f.CheckProblems, f.Elapsed.Round(time.Second))
}

// chaos is one campaign's world.
type chaos struct {
	t       *testing.T
	cfg     chaosCfg
	rng     *rand.Rand
	dir     string
	journal string
	vurl    string
	cl      *clusterEnv
	workers [2]*testkit.Proc
	lives   [2]int
	started time.Time

	mu      sync.Mutex
	runs    []string // workflow ids started
	figures chaosFigures
	details strings.Builder
}

func newChaos(t *testing.T, cfg chaosCfg) *chaos {
	s := &chaos{t: t, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, cfg.seed>>1|1)), dir: t.TempDir()}
	s.figures.Seed = cfg.seed
	s.journal = filepath.Join(s.dir, "vendor.jsonl")
	_, s.vurl = startVendor(t, s.journal, envVendorSeed+"="+strconv.FormatUint(cfg.seed, 10), envVendorLate+"=0.1")
	s.cl = newCluster(t, clusterOptions{servers: 3, leaseTTL: cfg.ttl, margin: cfg.margin, ownPostgres: true})
	for i := range s.workers {
		s.startWorker(i)
	}
	return s
}

// startWorker starts shop worker i, given every server, starting with
// server i.
func (s *chaos) startWorker(i int) {
	s.lives[i]++
	name := fmt.Sprintf("w%c-%d", 'a'+i, s.lives[i])
	s.workers[i] = spawn(s.t, name, envMode+"=shop", envAddr+"="+s.cl.addrList(i), envName+"="+name, envVendorURL+"="+s.vurl)
}

// run drives the campaign: runs start while the faults go on, then the
// driver waits, resolves the paused runs and waits again.
func (s *chaos) run() {
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
	for range 6 {
		s.settle(2 * time.Minute)
		if s.resolvePaused() == 0 {
			break
		}
	}
	s.settle(2 * time.Minute)
	s.figures.Elapsed = time.Since(s.started)
}

// retry calls fn until it succeeds or fails with an error other than
// unavailability (a server may be down, or its shard moving).
func retry[T any](ctx context.Context, fn func(ctx context.Context) (T, error)) (T, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		v, err := fn(cctx)
		cancel()
		if err == nil || ctx.Err() != nil || (api.ErrorCode(err) != api.CodeUnavailable && api.ErrorCode(err) != api.CodeInternal &&
			!errors.Is(err, api.ErrNotOwner) && !errors.Is(err, context.DeadlineExceeded)) {
			return v, err
		}
		if !pause(ctx, 100*time.Millisecond) {
			return v, err
		}
	}
}

// startRuns keeps cfg.runsInFlight shop runs running until ctx ends.
func (s *chaos) startRuns(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		for ctx.Err() == nil && s.running(ctx) >= s.cfg.runsInFlight {
			pause(ctx, 50*time.Millisecond)
		}
		id := fmt.Sprintf("shop-%d", i)
		o := ShopOrder{Invoice: fmt.Sprintf("INV-%d", i), Amount: 100 + i, Manual: i%4 == 3}
		// Once begun, a start is carried through (the campaign may be over):
		// a run the cluster started must be counted and checked.
		bounded, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		_, err := retry(bounded, func(ctx context.Context) (client.Run, error) {
			return s.cl.c.StartWorkflow(ctx, client.StartOptions{ID: id, TaskQueue: agentsQueue, RequestID: id, ReusePolicy: api.RejectDuplicate},
				Shop, o)
		})
		cancel()
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
func (s *chaos) running(ctx context.Context) int {
	resp, err := retry(ctx, func(ctx context.Context) (*api.CountWorkflowsResponse, error) {
		return s.cl.c.CountWorkflows(ctx, &api.CountWorkflowsRequest{})
	})
	if err != nil {
		return 0
	}
	for _, c := range resp.ByStatus {
		if c.Status == api.StatusRunning {
			return int(c.Count)
		}
	}
	return 0
}

// faults breaks things until enough of each kind happened. The Postgres
// crash comes once half the server kills are done: mid-load.
func (s *chaos) faults() {
	f := &s.figures
	for f.ServerKills < s.cfg.serverKills || f.Freezes < s.cfg.freezes || f.WorkerKills+f.WorkerStops < s.cfg.workerFaults ||
		f.PGCrashes < s.cfg.pgCrashes {
		pause(context.Background(), time.Duration(300+s.rng.IntN(1700))*time.Millisecond)
		p := s.rng.Float64()
		switch {
		case f.PGCrashes < s.cfg.pgCrashes && f.ServerKills >= (f.PGCrashes+1)*s.cfg.serverKills/(s.cfg.pgCrashes+1):
			s.crashPostgres()
		case p < 0.2 && f.Freezes < s.cfg.freezes:
			s.freezeOwner()
		case p < 0.35 && f.WorkerKills+f.WorkerStops < s.cfg.workerFaults:
			s.workerFault()
		case f.ServerKills < s.cfg.serverKills:
			s.killServer()
		case f.Freezes < s.cfg.freezes:
			s.freezeOwner()
		case f.WorkerKills+f.WorkerStops < s.cfg.workerFaults:
			s.workerFault()
		}
	}
}

// killServer SIGKILLs a server and starts it again at its address.
func (s *chaos) killServer() {
	i := s.rng.IntN(len(s.cl.addrs))
	s.cl.server(i).Kill()
	s.cl.startServer(i)
	s.figures.ServerKills++
	s.logf("server %d killed and restarted (kill %d)", i+1, s.figures.ServerKills)
}

// logf logs a line of the campaign, with the time since it began.
func (s *chaos) logf(format string, args ...any) {
	s.t.Logf("+%s "+format, append([]any{time.Since(s.started).Round(100 * time.Millisecond)}, args...)...)
}

// freezeOwner freezes a server that owns shards until the others took
// every one over, wakes it up and counts what it tried to commit.
func (s *chaos) freezeOwner() {
	ctx := context.Background()
	i := s.rng.IntN(len(s.cl.addrs))
	before, err := s.cl.describe(ctx, i)
	if err != nil || heldBy(before)[before.Self] == 0 {
		// It is restarting, or owns nothing yet: try another time.
		return
	}
	id := before.Self
	frozenAt := time.Now()
	s.cl.server(i).Freeze()
	// The lease runs out (by the database's clock) and the others take
	// every shard of the frozen server over.
	deadline, cancel := context.WithTimeout(ctx, s.cfg.ttl+time.Minute)
	for {
		d, err := s.cl.describeAny(deadline, i)
		if err == nil && heldBy(d)[id] == 0 && total(heldBy(d)) == d.Shards {
			break
		}
		if !pause(deadline, 100*time.Millisecond) {
			cancel()
			s.cl.server(i).Thaw()
			s.t.Fatalf("the shards of frozen server %d (%s) were not taken over within %v", i+1, id, s.cfg.ttl+time.Minute)
		}
	}
	cancel()
	s.figures.TakeoverMax = max(s.figures.TakeoverMax, time.Since(frozenAt))
	s.logf("server %d (%s) frozen: its %d shards taken over after %s", i+1, id, heldBy(before)[id], time.Since(frozenAt).Round(100*time.Millisecond))
	// A little longer, sometimes: the others commit under the new epochs.
	pause(ctx, time.Duration(s.rng.IntN(1000))*time.Millisecond)
	s.cl.server(i).Thaw()
	s.figures.Freezes++
	// It wakes up believing it serves its shards until its node's next
	// round: whatever it commits meanwhile is refused by the fence. Wait
	// until it has given every lost shard up, then read its counters.
	wait, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		after, err := s.cl.describe(wait, i)
		if err == nil && after.Self == id && after.Stats.Lost > before.Stats.Lost {
			s.figures.FencedCommits += after.Stats.FencedCommits - before.Stats.FencedCommits
			s.figures.RefusedPastLease += after.Stats.RefusedPastLease - before.Stats.RefusedPastLease
			s.figures.FrozenLost += after.Stats.Lost - before.Stats.Lost
			s.logf("server %d (%s) woke up: gave up %d shards, refused %d calls past its lease, %d commits fenced", i+1, id,
				after.Stats.Lost-before.Stats.Lost, after.Stats.RefusedPastLease-before.Stats.RefusedPastLease,
				after.Stats.FencedCommits-before.Stats.FencedCommits)
			return
		}
		if !pause(wait, 100*time.Millisecond) {
			s.t.Fatalf("server %d (%s), woken up, did not give up the shards it lost: %v", i+1, id, err)
		}
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// workerFault kills a worker (and starts it again) or freezes it past its
// activity lease and the drift margin.
func (s *chaos) workerFault() {
	i := s.rng.IntN(len(s.workers))
	if s.rng.IntN(2) == 0 {
		s.workers[i].Kill()
		s.startWorker(i)
		s.figures.WorkerKills++
		s.logf("worker %c killed and restarted", 'a'+i)
		return
	}
	s.workers[i].Freeze()
	pause(context.Background(), shopLease+s.cfg.margin+time.Duration(200+s.rng.IntN(1500))*time.Millisecond)
	s.workers[i].Thaw()
	s.figures.WorkerStops++
	s.logf("worker %c frozen past its activity lease, woken up", 'a'+i)
}

// crashPostgres crashes the database under load, starts it again after a
// moment, and waits until every shard is served once and only once.
func (s *chaos) crashPostgres() {
	if err := s.cl.pg.Crash(); err != nil {
		s.t.Fatal(err)
	}
	// Down for less than the servers' lease, or for longer: they keep
	// their shards through a short outage, give them up in a long one.
	down := time.Now()
	pause(context.Background(), time.Duration(s.rng.IntN(2*int(s.cfg.ttl/time.Millisecond)))*time.Millisecond)
	if err := s.cl.pg.Start(); err != nil {
		s.t.Fatal(err)
	}
	s.figures.PGCrashes++
	s.logf("Postgres crashed and restarted (down %s)", time.Since(down).Round(100*time.Millisecond))
	if err := s.cl.settledOwnership(context.Background(), time.Minute); err != nil {
		s.figures.Ownership++
		fmt.Fprintf(&s.details, "after Postgres crash %d: %v\n", s.figures.PGCrashes, err)
	}
}

// settle waits until no run is running (each completed or paused), or
// for at most d.
func (s *chaos) settle(d time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	for s.running(ctx) > 0 && pause(ctx, 200*time.Millisecond) {
	}
}

// resolvePaused resolves every paused run as a person would: the vendor's
// journal says whether the charge under the paused key happened. It
// returns how many it resolved.
func (s *chaos) resolvePaused() int {
	ctx := context.Background()
	resp, err := retry(ctx, func(ctx context.Context) (*api.ListWorkflowsResponse, error) {
		return s.cl.c.ListWorkflows(ctx, &api.ListWorkflowsRequest{Status: api.StatusPaused, PageSize: 1000})
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
		req := client.ResolveRequest{WorkflowID: w.WorkflowID, RunID: w.RunID, ScheduledEventID: p.ScheduledEventID, By: "chaos-clerk"}
		if cs := byKey[p.IdempotencyKey]; len(cs) > 0 {
			c := cs[0]
			req.Resolution, req.Result = history.ResolvedHappened, Receipt{PaymentID: c.PaymentID, Invoice: c.Invoice, Amount: c.Amount, Key: c.Key}
			req.Reason = "found " + c.PaymentID + " at the vendor"
		} else {
			req.Resolution, req.Reason = history.ResolvedNotHappened, "no charge under the key at the vendor"
		}
		if _, err := retry(ctx, func(ctx context.Context) (struct{}, error) { return struct{}{}, s.cl.c.ResolveActivity(ctx, req) }); err != nil {
			s.t.Errorf("resolve %s: %v", w.WorkflowID, err)
			continue
		}
		s.figures.Resolved++
		n++
	}
	return n
}

// check counts what the campaign did and compares it with the vendor.
func (s *chaos) check() *chaosFigures {
	f := &s.figures
	ctx := context.Background()
	if err := s.cl.settledOwnership(ctx, time.Minute); err != nil {
		f.Ownership++
		fmt.Fprintf(&s.details, "at the end: %v\n", err)
	}
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

func (s *chaos) allEffects(ctx context.Context) map[string]api.EffectInfo {
	out := map[string]api.EffectInfo{}
	req := &api.ListEffectsRequest{PageSize: 1000}
	for {
		resp, err := retry(ctx, func(ctx context.Context) (*api.ListEffectsResponse, error) { return s.cl.c.ListEffects(ctx, req) })
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
func (s *chaos) story(ctx context.Context, workflowID, runID string) string {
	evs, err := retry(ctx, func(ctx context.Context) ([]history.Event, error) { return s.cl.c.GetHistory(ctx, workflowID, runID) })
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
func (s *chaos) checkRun(ctx context.Context, id string, byKey map[string][]VendorEntry) {
	f := &s.figures
	res, err := retry(ctx, func(ctx context.Context) (*api.GetResultResponse, error) {
		return s.cl.c.Service().GetResult(ctx, &api.GetResultRequest{WorkflowID: id})
	})
	switch {
	case err != nil:
		f.Lost++
		fmt.Fprintf(&s.details, "%s: %v\n", id, err)
		return
	case !res.Closed:
		d, _ := s.cl.c.DescribeWorkflow(ctx, id, "")
		if res.Status == api.StatusPaused && d != nil && d.Info.Pause != nil && d.Info.Pause.Reason != "" {
			f.PausedAtEnd++ // paused with a reason: allowed, and counted
		} else {
			f.Stuck++
		}
		fmt.Fprintf(&s.details, "%s is still %s: %+v\n%s", id, res.Status, d, s.story(ctx, id, res.RunID))
		return
	case res.Status != api.StatusCompleted:
		f.Lost++
		fmt.Fprintf(&s.details, "%s closed as %s: %+v\n", id, res.Status, res.Failure)
		return
	}
	var out ShopOutcome
	if err := s.cl.c.Converter().FromPayload(res.Result, &out); err != nil {
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
	evs, err := retry(ctx, func(ctx context.Context) ([]history.Event, error) { return s.cl.c.GetHistory(ctx, id, res.RunID) })
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

// cairnCheck stops the servers and runs `cairn check --store` on the
// database: the number of problems it reports.
func (s *chaos) cairnCheck() int {
	for i := range s.cl.addrs {
		s.cl.server(i).Kill()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	out, err := testkit.CLI(ctx, s.t, "", "check", "--store", s.cl.url, "--schema", s.cl.schema, "--json")
	if err == nil {
		return 0
	}
	fmt.Fprintf(&s.details, "cairn check: %v\n%s\n", err, out.Combined)
	return max(strings.Count(out.Combined, `"kind"`), 1)
}
