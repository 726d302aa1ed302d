package demo

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/httpapi"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
)

// Options configure Run.
type Options struct {
	// Out receives the narration.
	Out io.Writer
	// Color turns on ANSI colours.
	Color bool
	// WorkerCommand builds the command that starts a worker process with
	// the given arguments (cairn's hidden `demo worker` command).
	WorkerCommand func(args ...string) *exec.Cmd
	// Dir holds the demo's data (default: a new temporary directory,
	// removed afterwards).
	Dir string
}

// WorkflowID is the id every scenario uses: the business id of the job.
const WorkflowID = "invoice-INV-9"

var inv = Invoice{ID: "INV-9", Vendor: "ACME", Amount: 4200}

// Result is what the demo's scenarios ended with: the payments the
// provider took in each.
type Result struct {
	Scenarios []Scenario
}

// Scenario is one scenario's outcome.
type Scenario struct {
	Title    string
	Payments []Receipt
}

// Run plays the three scenarios of the founding article with real
// processes: a server in this process, workers as child processes killed
// with SIGKILL.
func Run(ctx context.Context, opts Options) (*Result, error) {
	dir := opts.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "cairn-demo-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	p := &printer{w: opts.Out, color: opts.Color}
	scenarios := []struct {
		title string
		run   func(context.Context, *stage) error
	}{
		{"WITHOUT the guard (SendPayment registered as a plain Read activity)", withoutGuard},
		{"WITH the guard (SendPayment registered as SideEffect, keyed on the invoice)", withGuard},
		{"the case nobody can decide automatically", undecidable},
	}
	res := &Result{}
	for i, sc := range scenarios {
		p.title(sc.title)
		s, err := newStage(ctx, filepath.Join(dir, fmt.Sprint(i)), opts, p)
		if err != nil {
			return nil, err
		}
		err = sc.run(ctx, s)
		s.close()
		if err != nil {
			return nil, fmt.Errorf("demo: %s: %w", sc.title, err)
		}
		ps, err := Payments(s.ledger)
		if err != nil {
			return nil, err
		}
		res.Scenarios = append(res.Scenarios, Scenario{Title: sc.title, Payments: ps})
	}
	return res, nil
}

// stage is one scenario's world: an engine served over HTTP, a provider
// ledger, and worker processes.
type stage struct {
	opts    Options
	p       *printer
	store   *badgerstore.Store
	eng     *engine.Engine
	srv     *http.Server
	addr    string
	ledger  string
	c       client.Client
	workers []*exec.Cmd
	lines   map[*exec.Cmd]chan string
}

func newStage(ctx context.Context, dir string, opts Options, p *printer) (*stage, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: filepath.Join(dir, "cairn-data")})
	if err != nil {
		return nil, err
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		_ = st.Close()
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = eng.Close()
		_ = st.Close()
		return nil, err
	}
	s := &stage{opts: opts, p: p, store: st, eng: eng, lines: map[*exec.Cmd]chan string{}, addr: "http://" + ln.Addr().String(), ledger: filepath.Join(dir, "provider-ledger.jsonl")}
	s.srv = &http.Server{Handler: httpapi.NewHandler(eng, httpapi.Options{}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	s.c = client.NewLocal(eng, client.Options{Identity: "orchestrator"})
	return s, nil
}

func (s *stage) close() {
	for _, w := range s.workers {
		if w.Process != nil && w.ProcessState == nil {
			_ = w.Process.Kill()
			_ = w.Wait()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
	_ = s.eng.Close()
	_ = s.store.Close()
}

// worker starts a worker process.
func (s *stage) worker(flags ...string) (*exec.Cmd, error) {
	args := append([]string{"--address", s.addr, "--ledger", s.ledger}, flags...)
	cmd := s.opts.WorkerCommand(args...)
	cmd.Stderr = io.Discard
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker: %w", err)
	}
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default: // nobody is waiting for this line
			}
		}
	}()
	s.lines[cmd] = lines
	s.workers = append(s.workers, cmd)
	return cmd, nil
}

// kill9 kills a worker process with SIGKILL, as an eviction would.
func (s *stage) kill9(cmd *exec.Cmd) {
	_ = cmd.Process.Signal(syscall.SIGKILL)
	_ = cmd.Wait()
	s.p.line("  ☠  worker process %d killed with SIGKILL", cmd.Process.Pid)
}

// waitFor long-polls the run's history until pred holds for an event.
func (s *stage) waitFor(ctx context.Context, runID string, what string, pred func(history.Event) bool) (history.Event, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	from := int64(1)
	for {
		resp, err := s.eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: WorkflowID, RunID: runID, FromEventID: from, WaitNewEvents: true})
		if err != nil {
			return history.Event{}, fmt.Errorf("waiting for %s: %w", what, err)
		}
		for _, ev := range resp.Events {
			if pred(ev) {
				return ev, nil
			}
		}
		from = resp.NextEventID
		if resp.Closed {
			return history.Event{}, fmt.Errorf("run closed before %s", what)
		}
	}
}

func (s *stage) start(ctx context.Context) (string, error) {
	run, err := s.c.StartWorkflow(ctx, client.StartOptions{ID: WorkflowID, TaskQueue: TaskQueue}, PayInvoice, inv)
	if err != nil {
		return "", err
	}
	s.p.line("  ▶  agent started: pay $4,200 to ACME for INV-9 (workflow %s, run %s)", WorkflowID, short(run.RunID()))
	return run.RunID(), nil
}

// firstAttemptPaysThenDies runs the agent until the payment is recorded,
// then kills its worker process.
func (s *stage) firstAttemptPaysThenDies(ctx context.Context, flags ...string) (string, error) {
	w, err := s.worker(append(flags, "--stall-notify")...)
	if err != nil {
		return "", err
	}
	runID, err := s.start(ctx)
	if err != nil {
		return "", err
	}
	if _, err := s.waitFor(ctx, runID, "the payment", paymentEvent(history.TypeActivityCompleted, history.TypeActivityDeduplicated)); err != nil {
		return "", err
	}
	s.p.line("  💸 attempt 1 paid; the ledger holds %s", s.ledgerSummary())
	s.kill9(w)
	return runID, nil
}

// orchestratorRetries does what an orchestrator does when a pod dies: it
// marks the job failed and runs it again, in a fresh process.
func (s *stage) orchestratorRetries(ctx context.Context, runID string, flags ...string) (Receipt, string, error) {
	if err := s.c.TerminateWorkflow(ctx, WorkflowID, runID, "pod evicted; the orchestrator re-runs the job"); err != nil {
		return Receipt{}, "", err
	}
	s.p.line("  ↻  the orchestrator re-runs the job in a fresh process")
	if _, err := s.worker(flags...); err != nil {
		return Receipt{}, "", err
	}
	run, err := s.c.StartWorkflow(ctx, client.StartOptions{ID: WorkflowID, TaskQueue: TaskQueue}, PayInvoice, inv)
	if err != nil {
		return Receipt{}, "", err
	}
	var r Receipt
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := run.Get(wctx, &r); err != nil {
		return Receipt{}, "", err
	}
	return r, run.RunID(), nil
}

func withoutGuard(ctx context.Context, s *stage) error {
	runID, err := s.firstAttemptPaysThenDies(ctx)
	if err != nil {
		return err
	}
	if _, _, err := s.orchestratorRetries(ctx, runID); err != nil {
		return err
	}
	s.p.ledger(s.ledger)
	ps, _ := Payments(s.ledger)
	if len(ps) != 2 {
		return fmt.Errorf("expected the unguarded retry to pay twice, the ledger has %d payments", len(ps))
	}
	s.p.bad("  ^ ACME was paid twice, and nothing in the system knows")
	return nil
}

func withGuard(ctx context.Context, s *stage) error {
	runID, err := s.firstAttemptPaysThenDies(ctx, "--guard")
	if err != nil {
		return err
	}
	r, newRun, err := s.orchestratorRetries(ctx, runID, "--guard")
	if err != nil {
		return err
	}
	evs, err := s.c.GetHistory(ctx, WorkflowID, newRun)
	if err != nil {
		return err
	}
	for _, ev := range evs {
		if d, ok := ev.Attrs.(*history.ActivityDeduplicated); ok {
			s.p.good("  ✋ DENIED: SendPayment was already performed (idempotency key %s…, by run %s)", d.IdempotencyKey[:12], short(d.OriginalRunID))
			s.p.line("     previous result: %s", r)
		}
	}
	s.p.ledger(s.ledger)
	ps, _ := Payments(s.ledger)
	if len(ps) != 1 {
		return fmt.Errorf("expected one payment with the guard, the ledger has %d", len(ps))
	}
	s.p.good("  ✓ one payment: the retry was recognised as the same action")
	return nil
}

func undecidable(ctx context.Context, s *stage) error {
	w, err := s.worker("--guard", "--hang-after-pay")
	if err != nil {
		return err
	}
	runID, err := s.start(ctx)
	if err != nil {
		return err
	}
	if _, err := s.waitFor(ctx, runID, "the intent", paymentEvent(history.TypeActivityStarted)); err != nil {
		return err
	}
	if err := waitLine(ctx, s.lines[w], "paid"); err != nil {
		return err
	}
	s.p.line("  📝 intent recorded (fsynced) before SendPayment ran; the provider took the payment…")
	s.kill9(w)
	s.p.line("     …and the worker died before anyone recorded the outcome")
	ev, err := s.waitFor(ctx, runID, "the pause", func(ev history.Event) bool { return ev.Type() == history.TypeActivityOutcomeUnknown })
	if err != nil {
		return err
	}
	u := ev.Attrs.(*history.ActivityOutcomeUnknown)
	d, err := s.c.DescribeWorkflow(ctx, WorkflowID, runID)
	if err != nil {
		return err
	}
	s.p.warn("  ⏸  decision: PAUSE (status %s)", d.Info.Status)
	s.p.line("     reason: %s", u.Reason)
	s.p.line("     a person must confirm whether it took effect: cairn workflow resolve %s --happened|--not-happened|--fail --reason WHY", WorkflowID)
	r, found, err := FindPayment(s.ledger, u.IdempotencyKey)
	if err != nil || !found {
		return fmt.Errorf("the provider should hold the payment (found=%v): %v", found, err)
	}
	s.p.line("  🧑 a person checks the provider: %s — so it happened", r)
	if err := s.c.ResolveActivity(ctx, client.ResolveRequest{WorkflowID: WorkflowID, Resolution: history.ResolvedHappened, Result: r,
		By: "ap-clerk@acme", Reason: "payment " + r.PaymentID + " found at the provider"}); err != nil {
		return err
	}
	if _, err := s.worker("--guard"); err != nil {
		return err
	}
	var out Receipt
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := s.c.GetWorkflow(ctx, WorkflowID, runID).Get(wctx, &out); err != nil {
		return err
	}
	s.p.good("  ✓ resolved by ap-clerk@acme; the run completed with %s", out)
	s.p.ledger(s.ledger)
	return nil
}

// paymentEvent returns a predicate matching events of SendPayment whose
// type is one of types (it remembers SendPayment's scheduled event).
func paymentEvent(types ...history.EventType) func(history.Event) bool {
	var scheduled int64
	return func(ev history.Event) bool {
		if s, ok := ev.Attrs.(*history.ActivityScheduled); ok && s.ActivityType == "SendPayment" {
			scheduled = ev.ID
		}
		if scheduled == 0 || !slices.Contains(types, ev.Type()) {
			return false
		}
		switch a := ev.Attrs.(type) {
		case *history.ActivityCompleted:
			return a.ScheduledEventID == scheduled
		case *history.ActivityDeduplicated:
			return a.ScheduledEventID == scheduled
		case *history.ActivityStarted:
			return a.ScheduledEventID == scheduled
		}
		return false
	}
}

// waitLine waits for the worker process to print a line starting with
// prefix (the hang-after-pay worker prints "paid" once the provider took the
// payment).
func waitLine(ctx context.Context, lines <-chan string, prefix string) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				return fmt.Errorf("the worker exited before printing %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("waiting for the worker to print %q: %w", prefix, ctx.Err())
		}
	}
}

func (s *stage) ledgerSummary() string {
	ps, _ := Payments(s.ledger)
	parts := make([]string, len(ps))
	for i, r := range ps {
		parts[i] = fmt.Sprintf("$%s -> %s", dollars(r.Amount), r.Invoice)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
