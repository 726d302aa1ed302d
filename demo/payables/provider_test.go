package payables_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/demo/payables"
)

// Payments made at once by several worker processes sharing the
// provider's files (each its own Tools) get distinct payment ids.
func TestConcurrentPaymentsGetDistinctIDs(t *testing.T) {
	dir := t.TempDir()
	const n = 16
	var wg sync.WaitGroup
	start := make(chan struct{})
	ids := make([]string, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tools := &payables.Tools{Dir: dir}
			ctx := activities.WithInfo(context.Background(), &activities.Info{IdempotencyKey: fmt.Sprintf("key-%d", i)})
			<-start
			r, err := tools.SendPayment(ctx, payables.Payment{InvoiceID: fmt.Sprintf("INV-%d", i), Vendor: "ACME", Amount: i})
			if err != nil {
				t.Error(err)
			}
			ids[i] = r.PaymentID
		}()
	}
	close(start)
	wg.Wait()
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			t.Fatalf("two payments got id %s: %v", id, ids)
		}
		seen[id] = true
	}
	pays, err := (&payables.Tools{Dir: dir}).Payments()
	if err != nil || len(pays) != n || !strings.Contains(pays[n-1], fmt.Sprintf(`"payment_id":"pay_%03d"`, n)) {
		t.Fatalf("payments %v %v", pays, err)
	}
}
