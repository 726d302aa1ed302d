//go:build unix

package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/sdk"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// The vendor and the shop are those of test/effects (vendor_test.go there),
// trimmed to what the cluster campaign uses: a payment provider in a
// process of its own that journals every request with fsync before it
// answers, does not deduplicate charges, answers some charges only after
// the caller gave up, and offers a lookup by idempotency key; and a shop
// agent that quotes (Read), charges (SideEffect, with a Reconcile lookup,
// or for a manual order without one) and notifies (Idempotent: the vendor
// deduplicates notifications on the key). Test packages cannot import one
// another, hence the copy.

// The child processes' environment.
const (
	envMode          = "CLUSTER_CHILD" // "vendor" or "shop"
	envAddr          = "CLUSTER_ADDR"  // the servers, comma-separated
	envName          = "CLUSTER_NAME"
	envVendorJournal = "CLUSTER_VENDOR_JOURNAL"
	envVendorSeed    = "CLUSTER_VENDOR_SEED"
	envVendorLate    = "CLUSTER_VENDOR_LATE" // the share of charges answered too late, e.g. "0.1"
	envVendorURL     = "CLUSTER_VENDOR_URL"
)

const agentsQueue = "agents"

// vendorLateAnswer is how late a "performed, then timed out" charge
// answers: well past the shop's request timeout.
const vendorLateAnswer = 3 * time.Second

// shopRequestTimeout bounds one request of the shop to the vendor.
const shopRequestTimeout = time.Second

// Payment is one payment instruction.
type Payment struct {
	Invoice string
	Amount  int
}

// Receipt is the vendor's answer to a charge.
type Receipt struct {
	PaymentID string
	Invoice   string
	Amount    int
	Key       string // the Idempotency-Key the request carried
}

// VendorEntry is one line of the vendor's journal.
type VendorEntry struct {
	Kind      string // "charge", "notify", "lookup"
	Key       string // the Idempotency-Key the request carried
	Invoice   string
	Amount    int
	PaymentID string
	Attempt   int32
	Worker    string
	Late      bool // the answer went out after the caller's timeout
	Deduped   bool // a notification whose key was seen before
	At        time.Time
}

// VendorRequest is what the shop sends.
type VendorRequest struct {
	Key     string
	Invoice string
	Amount  int
	Attempt int32
	Worker  string
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

// exitWithStdin exits the process when its stdin closes (the test process
// is gone).
func exitWithStdin() {
	go func() {
		sc := bufio.NewScanner(os.Stdin)
		for sc.Scan() {
		}
		os.Exit(0)
	}()
}

type vendor struct {
	mu      sync.Mutex
	f       *os.File
	entries []VendorEntry
	charged int
	rng     *rand.Rand
	late    float64
}

func runVendor() error {
	exitWithStdin()
	f, err := os.OpenFile(os.Getenv(envVendorJournal), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	seed, _ := strconv.ParseUint(os.Getenv(envVendorSeed), 10, 64)
	late, _ := strconv.ParseFloat(os.Getenv(envVendorLate), 64)
	v := &vendor{f: f, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)), late: late}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /charge", v.charge)
	mux.HandleFunc("POST /notify", v.notify)
	mux.HandleFunc("GET /lookup", v.lookup)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	say("listening http://%s", ln.Addr())
	return http.Serve(ln, mux)
}

// record journals e durably.
func (v *vendor) record(e VendorEntry) error {
	e.At = time.Now()
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := v.f.Write(append(line, '\n')); err != nil {
		return err
	}
	if err := v.f.Sync(); err != nil {
		return err
	}
	v.entries = append(v.entries, e)
	return nil
}

func (v *vendor) charge(w http.ResponseWriter, r *http.Request) {
	var req VendorRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v.mu.Lock()
	late := v.rng.Float64() < v.late
	v.charged++
	e := VendorEntry{Kind: "charge", Key: req.Key, Invoice: req.Invoice, Amount: req.Amount, PaymentID: fmt.Sprintf("pay_%06d", v.charged),
		Attempt: req.Attempt, Worker: req.Worker, Late: late}
	err := v.record(e)
	v.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	if late {
		time.Sleep(vendorLateAnswer) // performed, and answered after the caller gave up
	}
	_ = json.NewEncoder(w).Encode(Receipt{PaymentID: e.PaymentID, Invoice: e.Invoice, Amount: e.Amount, Key: e.Key})
}

func (v *vendor) notify(w http.ResponseWriter, r *http.Request) {
	var req VendorRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	deduped := false
	for _, e := range v.entries {
		if e.Kind == "notify" && e.Key == req.Key && !e.Deduped {
			deduped = true
		}
	}
	if err := v.record(VendorEntry{Kind: "notify", Key: req.Key, Invoice: req.Invoice, Attempt: req.Attempt, Worker: req.Worker,
		Deduped: deduped}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode("notified " + req.Invoice)
}

func (v *vendor) lookup(w http.ResponseWriter, r *http.Request) {
	key := r.URL.Query().Get("key")
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := v.record(VendorEntry{Kind: "lookup", Key: key}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	for _, e := range v.entries {
		if e.Kind == "charge" && e.Key == key {
			_ = json.NewEncoder(w).Encode(Receipt{PaymentID: e.PaymentID, Invoice: e.Invoice, Amount: e.Amount, Key: e.Key})
			return
		}
	}
	http.Error(w, "no charge with this key", http.StatusNotFound)
}

// readJournal reads a vendor's journal file (it outlives the vendor).
func readJournal(path string) ([]VendorEntry, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []VendorEntry
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var e VendorEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			return nil, fmt.Errorf("vendor journal %s: %w", path, err)
		}
		out = append(out, e)
	}
	return out, sc.Err()
}

// charges groups the journal's charges by idempotency key.
func charges(entries []VendorEntry) map[string][]VendorEntry {
	out := map[string][]VendorEntry{}
	for _, e := range entries {
		if e.Kind == "charge" {
			out[e.Key] = append(out[e.Key], e)
		}
	}
	return out
}

// --- the shop: an agent that pays through the vendor ---

// ShopOrder is what the shop agent is asked to do.
type ShopOrder struct {
	Invoice string
	Amount  int
	// Manual: charge with ChargeManual, which has no Reconcile lookup (an
	// unknown outcome pauses the run for a person).
	Manual bool
}

// ShopOutcome is the shop agent's result.
type ShopOutcome struct {
	Receipt Receipt
	Note    string
	Failed  string // the charge failed for good
}

// shopLease is the heartbeat timeout of the shop's activities.
const shopLease = 2 * time.Second

// Shop quotes, charges (with or without a Reconcile lookup) and sends a
// notification (Idempotent: the vendor deduplicates on the key).
func Shop(ctx sdk.Context, o ShopOrder) (ShopOutcome, error) {
	var s *shop
	ctx = sdk.WithActivityOptions(ctx, sdk.ActivityOptions{StartToCloseTimeout: time.Minute, HeartbeatTimeout: shopLease,
		RetryPolicy: &sdk.RetryPolicy{InitialInterval: 100 * time.Millisecond, MaximumInterval: time.Second, MaximumAttempts: 20}})
	p := Payment{Invoice: o.Invoice, Amount: o.Amount}
	if _, err := sdk.ExecuteActivity(ctx, s.Quote, p).Get(ctx); err != nil {
		return ShopOutcome{Failed: err.Error()}, nil
	}
	charge := s.Charge
	if o.Manual {
		charge = s.ChargeManual
	}
	r, err := sdk.ExecuteActivity(ctx, charge, p).Get(ctx)
	if err != nil {
		return ShopOutcome{Failed: err.Error()}, nil
	}
	note, err := sdk.ExecuteActivity(ctx, s.Notify, p).Get(ctx)
	if err != nil {
		return ShopOutcome{Receipt: r, Failed: err.Error()}, nil
	}
	return ShopOutcome{Receipt: r, Note: note}, nil
}

// shop holds the activities of a shop worker.
type shop struct {
	vendor string
	name   string
	hc     *http.Client
	mu     sync.Mutex
	rng    *rand.Rand
}

// think is how long the charge takes to prepare its request: up to 300 ms.
func (s *shop) think() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return time.Duration(s.rng.IntN(300)) * time.Millisecond
}

// Quote is a read.
func (s *shop) Quote(_ context.Context, p Payment) (int, error) { return p.Amount, nil }

// Charge pays through the vendor (SideEffect, Reconcile: LookupCharge).
func (s *shop) Charge(ctx context.Context, p Payment) (Receipt, error) { return s.charge(ctx, p) }

// ChargeManual pays the same way, without a Reconcile lookup.
func (s *shop) ChargeManual(ctx context.Context, p Payment) (Receipt, error) { return s.charge(ctx, p) }

func (s *shop) charge(ctx context.Context, p Payment) (Receipt, error) {
	info := activities.GetInfo(ctx)
	// The tool prepares its request first (an agent's tool composes it).
	t := time.NewTimer(s.think())
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
		return Receipt{}, fmt.Errorf("charge not sent: %v", context.Cause(ctx))
	}
	if err := ctx.Err(); err != nil { // the last check before acting: the lease, by the clock
		return Receipt{}, fmt.Errorf("charge not sent: %v", context.Cause(ctx))
	}
	var r Receipt
	err := s.post(ctx, "/charge", VendorRequest{Key: info.IdempotencyKey, Invoice: p.Invoice, Amount: p.Amount, Attempt: info.Attempt,
		Worker: s.name}, &r)
	return r, err
}

// LookupCharge is Charge's Reconcile lookup: did a charge with this key
// reach the vendor?
func (s *shop) LookupCharge(ctx context.Context, _ Payment) (Receipt, error) {
	key := activities.GetInfo(ctx).IdempotencyKey
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.vendor+"/lookup?key="+key, nil)
	if err != nil {
		return Receipt{}, err
	}
	resp, err := s.hc.Do(req)
	if err != nil {
		return Receipt{}, fmt.Errorf("lookup: %v", err) // a failed read: the engine asks again
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusNotFound:
		return Receipt{}, activities.ErrNotHappened
	case http.StatusOK:
		var r Receipt
		return r, json.NewDecoder(resp.Body).Decode(&r)
	}
	return Receipt{}, fmt.Errorf("lookup: vendor answered %s", resp.Status)
}

// Notify sends a notification keyed on the idempotency key (Idempotent).
func (s *shop) Notify(ctx context.Context, p Payment) (string, error) {
	info := activities.GetInfo(ctx)
	var note string
	err := s.post(ctx, "/notify", VendorRequest{Key: info.IdempotencyKey, Invoice: p.Invoice, Attempt: info.Attempt, Worker: s.name}, &note)
	return note, err
}

// post sends a request carrying the idempotency key. An error before the
// request was written means it did not reach the vendor (a plain error:
// retried); an error after means nobody can tell (ErrOutcomeUnknown).
func (s *shop) post(ctx context.Context, path string, body VendorRequest, out any) error {
	b, err := json.Marshal(body)
	if err != nil {
		return err
	}
	var wrote bool
	var mu sync.Mutex
	trace := &httptrace.ClientTrace{WroteRequest: func(httptrace.WroteRequestInfo) {
		mu.Lock()
		wrote = true
		mu.Unlock()
	}}
	rctx, cancel := context.WithTimeout(httptrace.WithClientTrace(ctx, trace), shopRequestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.vendor+path, bytes.NewReader(b))
	if err != nil {
		return err
	}
	req.Header.Set("Idempotency-Key", body.Key)
	resp, err := s.hc.Do(req)
	mu.Lock()
	sent := wrote
	mu.Unlock()
	if err != nil {
		if !sent {
			return fmt.Errorf("%s not sent: %v", path, err) // %v: not a context error any more — it did not happen
		}
		return fmt.Errorf("%s sent, no answer: %v: %w", path, err, activities.ErrOutcomeUnknown)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: vendor answered %s", path, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(out)
}

// runShopWorker is a worker process of the shop, given every server of
// the cluster (CLUSTER_ADDR, comma-separated).
func runShopWorker() error {
	exitWithStdin()
	name := os.Getenv(envName)
	c, err := client.Dial(os.Getenv(envAddr), client.Options{Identity: name}, client.DialOptions{})
	if err != nil {
		return err
	}
	log := zerolog.New(os.Stderr).Level(zerolog.WarnLevel).With().Timestamp().Str("worker", name).Logger()
	w, err := worker.New(c, worker.Options{TaskQueue: agentsQueue, Identity: name, Logger: &log, GracefulStop: time.Second})
	if err != nil {
		return err
	}
	s := &shop{vendor: os.Getenv(envVendorURL), name: name, hc: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		rng: rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))}
	invoice := func(p Payment) string { return p.Invoice }
	if err := errors.Join(
		w.RegisterWorkflow(Shop),
		w.RegisterActivity(s.Quote),
		w.RegisterActivity(s.Charge, activities.Options{Effect: activities.SideEffect, Reconcile: s.LookupCharge, BusinessKey: invoice}),
		w.RegisterActivity(s.ChargeManual, activities.Options{Effect: activities.SideEffect, BusinessKey: invoice}),
		w.RegisterActivity(s.Notify, activities.Options{Effect: activities.Idempotent, BusinessKey: invoice}),
	); err != nil {
		return err
	}
	say("worker %s up", name)
	return w.Run(context.Background())
}
