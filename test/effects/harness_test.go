//go:build unix

package effects_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/internal/testkit"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// waitTimeout bounds the waits for a run and the engine (the waits for a
// child process's lines are the kit's: testkit.WaitTimeout, the same).
const waitTimeout = 60 * time.Second

// The environment of a child process (the test binary re-executed).
const (
	envMode       = "EFFECTS_CHILD" // "worker" or "engine"
	envAddr       = "EFFECTS_ADDR"
	envData       = "EFFECTS_DATA"      // the engine's Badger directory…
	envPGURL      = "EFFECTS_PG_URL"    // …or its Postgres database
	envPGSchema   = "EFFECTS_PG_SCHEMA" // and schema (CAIRN_TEST_STORE=postgres)
	envLedger     = "EFFECTS_LEDGER"
	envName       = "EFFECTS_NAME"
	envQueue      = "EFFECTS_QUEUE"
	envClass      = "EFFECTS_CLASS"
	envReconcile  = "EFFECTS_RECONCILE"
	envBusiness   = "EFFECTS_BUSINESS_KEY"
	envGateBefore = "EFFECTS_GATE_BEFORE"
	envGateAfter  = "EFFECTS_GATE_AFTER"
	envMaxAct     = "EFFECTS_MAX_ACTIVITIES"
	envLookupDown = "EFFECTS_LOOKUP_DOWN"
	envListen     = "EFFECTS_LISTEN"  // the engine's fixed listen address (for a restart)
	envQuiet      = "EFFECTS_QUIET"   // the child prints only what a long campaign needs
	envVariant    = "EFFECTS_VARIANT" // "v2": the worker's PayInvoice is PayInvoiceV2 (a changed agent)
	envPending    = "EFFECTS_PENDING" // SendPayment pays, prints its task token and returns ErrResultPending
)

const agentsQueue = "agents"

// driftMargin is the engines' lease drift margin in these tests: how long
// after a lost attempt's lease the engine waits before a lookup or the
// next attempt (shorter than the default, to keep the tests short).
const driftMargin = 3 * time.Second

// engineOptions are the engine's options in the test process and in an
// engine child process: the real clock, short sticky and retry delays.
func engineOptions(st history.Store) engine.Options {
	return engine.Options{Store: st, PollTimeout: 10 * time.Second, LeaseDriftMargin: driftMargin, Defaults: engine.Defaults{
		StickyTimeout:        300 * time.Millisecond,
		RetryInitialInterval: 100 * time.Millisecond,
	}}
}

// TestMain removes the binaries the tests built and says in one line when
// the Postgres suites were skipped (CAIRN_TEST_STORE=postgres without a
// database).
func TestMain(m *testing.M) { testkit.Main(m, pgtest.Done) }

// TestWorkerProcess is not a test: the tests run the test binary again with
// EFFECTS_CHILD set, and this function then becomes a worker process (or an
// engine process) until it is killed or its stdin closes.
func TestWorkerProcess(t *testing.T) {
	mode := os.Getenv(envMode)
	if mode == "" {
		t.Skip("a child process of the effects tests")
	}
	var err error
	switch mode {
	case "worker":
		err = runWorker()
	case "engine":
		err = runEngine()
	case "vendor":
		err = runVendor()
	case "shop":
		err = runShopWorker()
	default:
		err = fmt.Errorf("unknown mode %q", mode)
	}
	fmt.Fprintln(os.Stderr, "child:", err)
	os.Exit(3)
}

// out serialises the child's protocol lines on stdout.
var out = struct {
	sync.Mutex
	w *bufio.Writer
}{w: bufio.NewWriter(os.Stdout)}

func say(format string, args ...any) {
	out.Lock()
	defer out.Unlock()
	fmt.Fprintf(out.w, format+"\n", args...)
	_ = out.w.Flush()
}

// chat is say for the lines of every request, left out with EFFECTS_QUIET
// (a long campaign would hold millions of them).
func chat(format string, args ...any) {
	if os.Getenv(envQuiet) == "" {
		say(format, args...)
	}
}

// readStdin turns "go" lines into gate openings and exits the process when
// stdin closes (the test process is gone).
func readStdin() <-chan struct{} {
	gate := make(chan struct{}, 16)
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
			if sc.Text() == "go" {
				gate <- struct{}{}
			}
		}
		os.Exit(0)
	}()
	return gate
}

func runWorker() error {
	gate := readStdin()
	c, err := client.Dial(os.Getenv(envAddr), client.Options{Identity: os.Getenv(envName)}, client.DialOptions{})
	if err != nil {
		return err
	}
	class := activities.Read
	switch os.Getenv(envClass) {
	case "idempotent":
		class = activities.Idempotent
	case "side-effect":
		class = activities.SideEffect
	}
	a := &agent{prov: provider{os.Getenv(envLedger)}, dedupe: class == activities.Idempotent, gate: gate, say: say,
		lookupDown: os.Getenv(envLookupDown) != "", pending: os.Getenv(envPending) != ""}
	a.gateBefore, _ = strconv.Atoi(os.Getenv(envGateBefore))
	a.gateAfter, _ = strconv.Atoi(os.Getenv(envGateAfter))
	maxAct, _ := strconv.Atoi(os.Getenv(envMaxAct))
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Logger()
	w, err := worker.New(reportingClient{c}, worker.Options{TaskQueue: os.Getenv(envQueue), Identity: os.Getenv(envName),
		MaxConcurrentActivities: maxAct, Logger: &log})
	if err != nil {
		return err
	}
	pay := activities.Options{Effect: class}
	if os.Getenv(envReconcile) != "" {
		pay.Reconcile = a.LookupPayment
	}
	if os.Getenv(envBusiness) != "" {
		pay.BusinessKey = func(p Payment) string { return p.Invoice }
	}
	flow := PayInvoice
	if os.Getenv(envVariant) == "v2" {
		flow = PayInvoiceV2
	}
	if err := errors.Join(w.RegisterWorkflow(flow, sdk.RegisterOptions{Name: "PayInvoice"}), w.RegisterActivity(a.SendPayment, pay),
		w.RegisterActivity(a.CheckBudget)); err != nil {
		return err
	}
	return w.Run(context.Background())
}

// reportingClient prints what the engine answered to each activity
// completion, so that the test sees a fenced attempt being refused.
type reportingClient struct{ client.Client }

func (c reportingClient) Service() api.Service { return reportingService{c.Client.Service()} }

type reportingService struct{ api.Service }

func (s reportingService) CompleteActivity(ctx context.Context, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	resp, err := s.Service.CompleteActivity(ctx, req)
	sayReport("completed", err)
	return resp, err
}

func (s reportingService) FailActivity(ctx context.Context, req *api.FailActivityRequest) (*api.FailActivityResponse, error) {
	resp, err := s.Service.FailActivity(ctx, req)
	what := "failed"
	if req.NotStarted {
		what = "gave-back"
	}
	sayReport(what, err)
	return resp, err
}

// sayReport prints "acked WHAT" or "refused stale-attempt|other WHAT …".
func sayReport(what string, err error) {
	switch {
	case err == nil:
		chat("acked %s", what)
	case errors.Is(err, api.ErrStaleAttempt):
		chat("refused stale-attempt %s %s", what, strings.ReplaceAll(err.Error(), "\n", " "))
	default:
		chat("refused other %s %s", what, strings.ReplaceAll(err.Error(), "\n", " "))
	}
}

func runEngine() error {
	readStdin()
	data := storetest.Badger(os.Getenv(envData))
	if url := os.Getenv(envPGURL); url != "" {
		data = storetest.Schema(url, os.Getenv(envPGSchema))
	}
	eng, _, err := openEngine(data, nil)
	if err != nil {
		return err
	}
	addr := os.Getenv(envListen)
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	say("listening http://%s", ln.Addr())
	return http.Serve(ln, httpapi.NewHandler(eng, httpapi.Options{}))
}

// engineOwner is the name the effects engines hold a Postgres store's
// shards under: an engine process restarted on the same data takes them
// back at once (an acquisition by the same owner starts a new epoch).
const engineOwner = "effects-engine"

// openEngine opens the store at data and an engine over it with
// engineOptions (and mod); on Postgres the engine serves every shard
// under a lease, as a lone server of a cluster does. The caller closes
// the engine, then the store.
func openEngine(data *storetest.Data, mod []func(*engine.Options)) (*engine.Engine, history.Store, error) {
	ctx := context.Background()
	st, owner, err := data.OpenOwned(ctx, engineOwner)
	if err != nil {
		return nil, nil, err
	}
	opts := engineOptions(st)
	if owner != nil {
		opts.Shards = owner
	}
	for _, m := range mod {
		m(&opts)
	}
	eng, err := engine.Open(opts)
	if err != nil {
		_ = st.Close()
		return nil, nil, fmt.Errorf("open the engine: %w", err)
	}
	if owner != nil {
		if err := eng.Acquire(ctx, owner.All()); err != nil {
			_ = eng.Close()
			_ = st.Close()
			return nil, nil, fmt.Errorf("acquire the shards: %w", err)
		}
	}
	return eng, st, nil
}

// dataEnv is the environment that tells an engine child process
// (runEngine) where its data is.
func dataEnv(data *storetest.Data) []string {
	if data.Postgres() {
		return []string{envPGURL + "=" + data.URL(), envPGSchema + "=" + data.Schema()}
	}
	return []string{envData + "=" + data.Dir()}
}

// spawnEngine starts an engine child process (runEngine) on data, with
// more of the environment (envListen).
func spawnEngine(t testing.TB, name string, data *storetest.Data, env ...string) *testkit.Proc {
	t.Helper()
	return spawn(t, name, append(append([]string{envMode + "=engine"}, dataEnv(data)...), env...)...)
}

// --- the test process's side ---

// spawn starts the test binary as a child (TestWorkerProcess) with the
// given environment; the test waits for the lines of its protocol on
// stdout. It is killed when the test ends.
func spawn(t testing.TB, name string, env ...string) *testkit.Proc {
	t.Helper()
	return testkit.Start(t, testkit.Cmd{Path: os.Args[0], Args: []string{"-test.run=^TestWorkerProcess$", "-test.count=1"}, Env: env,
		Name: name, StdoutOnly: true})
}

// env is one scenario's world: an engine in the test process served over
// HTTP, a provider ledger, and worker processes.
type env struct {
	t    *testing.T
	dir  string
	eng  *engine.Engine
	addr string
	c    client.Client
	prov provider
}

func newEnv(t *testing.T, mod ...func(*engine.Options)) *env {
	t.Helper()
	dir := t.TempDir()
	data := storetest.Badger(filepath.Join(dir, "data"))
	if storetest.Postgres() {
		data = storetest.New(t)
	}
	eng, st, err := openEngine(data, mod)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewHandler(eng, httpapi.Options{}))
	t.Cleanup(func() { // after the worker processes' cleanups (LIFO)
		_ = eng.Close()
		srv.Close()
		_ = st.Close()
	})
	return &env{t: t, dir: dir, eng: eng, addr: srv.URL, c: client.NewLocal(eng, client.Options{Identity: "test"}),
		prov: provider{filepath.Join(dir, "provider.jsonl")}}
}

// workerCfg says how a worker process behaves.
type workerCfg struct {
	Class       history.EffectClass // of SendPayment
	Reconcile   bool                // declare LookupPayment as its Reconcile
	BusinessKey bool                // key on the invoice
	GateBefore  int                 // the n-th SendPayment waits for open() before paying
	GateAfter   int                 // … after paying, before returning
	Queue       string              // default "agents"
	MaxAct      int                 // MaxConcurrentActivities (default: the worker's)
	LookupDown  bool                // LookupPayment answers ErrOutcomeUnknown
	Variant     string              // "v2": PayInvoiceV2 (a changed agent)
	Pending     bool                // SendPayment leaves its outcome to the token holder (ErrResultPending)
}

// worker starts a worker process against e's engine.
func (e *env) worker(name string, cfg workerCfg) *testkit.Proc {
	e.t.Helper()
	return startWorker(e.t, e.addr, e.prov, name, cfg)
}

func startWorker(t *testing.T, addr string, prov provider, name string, cfg workerCfg) *testkit.Proc {
	t.Helper()
	class := map[history.EffectClass]string{history.Read: "read", history.Idempotent: "idempotent", history.SideEffect: "side-effect"}[cfg.Class]
	queue := cfg.Queue
	if queue == "" {
		queue = agentsQueue
	}
	flag := func(b bool) string {
		if b {
			return "1"
		}
		return ""
	}
	return spawn(t, name, envMode+"=worker", envAddr+"="+addr, envLedger+"="+prov.path, envName+"="+name,
		envQueue+"="+queue, envClass+"="+class, envReconcile+"="+flag(cfg.Reconcile), envBusiness+"="+flag(cfg.BusinessKey),
		envGateBefore+"="+strconv.Itoa(cfg.GateBefore), envGateAfter+"="+strconv.Itoa(cfg.GateAfter),
		envMaxAct+"="+strconv.Itoa(cfg.MaxAct), envLookupDown+"="+flag(cfg.LookupDown), envVariant+"="+cfg.Variant,
		envPending+"="+flag(cfg.Pending))
}

// start starts the agent.
func (e *env) start(id string, o Order) client.Run {
	e.t.Helper()
	return startRun(e.t, e.c, id, o)
}

func startRun(t *testing.T, c client.Client, id string, o Order) client.Run {
	t.Helper()
	run, err := c.StartWorkflow(context.Background(), client.StartOptions{ID: id, TaskQueue: agentsQueue}, PayInvoice, o)
	if err != nil {
		t.Fatalf("start %s: %v", id, err)
	}
	return run
}

// result waits for the run's outcome.
func result(t *testing.T, run client.Run) Outcome {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), waitTimeout)
	defer cancel()
	var o Outcome
	if err := run.Get(ctx, &o); err != nil {
		t.Fatalf("run %s/%s: %v", run.WorkflowID(), run.RunID(), err)
	}
	return o
}

// waitEvent follows a run's history until an event satisfies pred.
func (e *env) waitEvent(run client.Run, what string, pred func(history.Event) bool) history.Event {
	e.t.Helper()
	return testkit.WaitEvent(e.t.Context(), e.t, e.eng, run.WorkflowID(), run.RunID(), what, pred)
}

// is matches events of a type.
func is(typ history.EventType) func(history.Event) bool {
	return func(ev history.Event) bool { return ev.Type() == typ }
}

// after matches events of a type with an id above id.
func after(id int64, typ history.EventType) func(history.Event) bool {
	return func(ev history.Event) bool { return ev.ID > id && ev.Type() == typ }
}

// events is a run's history with helpers for the assertions.
type events []history.Event

func historyOf(t *testing.T, c client.Client, run client.Run) events {
	t.Helper()
	evs, err := c.GetHistory(context.Background(), run.WorkflowID(), run.RunID())
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

func (e *env) history(run client.Run) events {
	e.t.Helper()
	return historyOf(e.t, e.c, run)
}

// count counts the events of a type.
func (evs events) count(typ history.EventType) int {
	n := 0
	for _, ev := range evs {
		if ev.Type() == typ {
			n++
		}
	}
	return n
}

// scheduled returns the ActivityScheduled events of an activity type, with
// their event ids.
func (evs events) scheduled(activityType string) ([]*history.ActivityScheduled, []int64) {
	var out []*history.ActivityScheduled
	var ids []int64
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.ActivityType == activityType {
			out = append(out, s)
			ids = append(ids, ev.ID)
		}
	}
	return out, ids
}

// started returns the ActivityStarted events of the activity scheduled at
// schedID that dispatched the activity itself (not its Reconcile lookup).
func (evs events) started(schedID int64) []*history.ActivityStarted {
	var out []*history.ActivityStarted
	for _, ev := range evs {
		if s, ok := ev.Attrs.(*history.ActivityStarted); ok && s.ScheduledEventID == schedID && !s.Reconcile {
			out = append(out, s)
		}
	}
	return out
}

// only returns the single event of type T, failing otherwise.
func only[T history.Attributes](t *testing.T, evs events) T {
	t.Helper()
	var found []T
	for _, ev := range evs {
		if a, ok := ev.Attrs.(T); ok {
			found = append(found, a)
		}
	}
	if len(found) != 1 {
		var zero T
		t.Fatalf("want exactly one %T in history, found %d:\n%s", zero, len(found), evs)
	}
	return found[0]
}

func (evs events) String() string {
	var b strings.Builder
	for _, ev := range evs {
		fmt.Fprintf(&b, "  %3d %s %+v\n", ev.ID, ev.Type(), ev.Attrs)
	}
	return b.String()
}

// ledger returns the provider's payments.
func (e *env) ledger() []Receipt {
	e.t.Helper()
	ps, err := e.prov.payments()
	if err != nil {
		e.t.Fatal(err)
	}
	return ps
}

func (e *env) wantPayments(n int) []Receipt {
	e.t.Helper()
	ps := e.ledger()
	if len(ps) != n {
		e.t.Fatalf("the provider's ledger holds %d payments, want %d: %+v", len(ps), n, ps)
	}
	return ps
}

func (e *env) resolve(req client.ResolveRequest) {
	e.t.Helper()
	if err := e.c.ResolveActivity(context.Background(), req); err != nil {
		e.t.Fatalf("resolve: %v", err)
	}
}

func decode[T any](t *testing.T, p history.Payload) T {
	t.Helper()
	var v T
	if err := sdk.DefaultConverter().FromPayload(p, &v); err != nil {
		t.Fatal(err)
	}
	return v
}
