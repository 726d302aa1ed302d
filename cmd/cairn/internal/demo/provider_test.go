package demo

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
)

// Payments made at the same moment — by the goroutines of one worker, or
// by worker processes sharing the ledger (each its own Agent and file
// handles) — get distinct payment ids: the provider numbered two invoices
// pay_001 when they raced, which in a demo about double payments reads as
// one.
func TestConcurrentPaymentsGetDistinctIDs(t *testing.T) {
	ledger := filepath.Join(t.TempDir(), "ledger.jsonl")
	const n = 24
	ids := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := &Agent{Ledger: ledger} // as another process would
			<-start
			r, err := a.SendPayment(context.Background(), Payment{Invoice: fmt.Sprintf("INV-%d", i), Vendor: "ACME", Amount: 100 + i})
			ids[i], errs[i] = r.PaymentID, err
		}()
	}
	close(start)
	wg.Wait()
	seen := map[string]int{}
	for i, id := range ids {
		if errs[i] != nil {
			t.Fatal(errs[i])
		}
		if j, dup := seen[id]; dup {
			t.Fatalf("INV-%d and INV-%d both got payment id %s", j, i, id)
		}
		seen[id] = i
	}
	ps, err := Payments(ledger)
	if err != nil || len(ps) != n {
		t.Fatalf("the ledger holds %d payments (%v), want %d", len(ps), err, n)
	}
	for i, p := range ps {
		if want := fmt.Sprintf("pay_%03d", i+1); p.PaymentID != want {
			t.Fatalf("payment %d of the ledger is %s, want %s", i+1, p.PaymentID, want)
		}
	}
}
