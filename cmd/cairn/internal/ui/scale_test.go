package ui

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history/badgerstore"
)

// BenchmarkPagesManyRuns measures what the UI's pages ask of the engine
// over a store of many runs (CAIRN_UI_BENCH_RUNS, default 20,000), every
// tenth workflow id with a second run:
//
//	go test -run '^$' -bench PagesManyRuns -benchtime 20x ./internal/ui
//
// Figures: docs/performance.md (the UI's section).
func BenchmarkPagesManyRuns(b *testing.B) {
	n := 20000
	if s := os.Getenv("CAIRN_UI_BENCH_RUNS"); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			b.Fatal(err)
		}
	}
	st, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer eng.Close()
	ctx := context.Background()
	for i := range n {
		id := fmt.Sprintf("order-%06d", i)
		runs := 1
		if i%10 == 0 {
			runs = 2
		}
		for r := range runs {
			if r > 0 {
				if _, err := eng.TerminateWorkflow(ctx, &api.TerminateWorkflowRequest{WorkflowID: id, Reason: "again"}); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "Order", TaskQueue: "orders"}); err != nil {
				b.Fatal(err)
			}
		}
	}
	h := New(eng, Options{})
	mid := fmt.Sprintf("order-%06d", n/2)
	b.Run("count", func(b *testing.B) {
		for b.Loop() {
			if _, err := eng.CountWorkflows(ctx, &api.CountWorkflowsRequest{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runs of one id", func(b *testing.B) {
		for b.Loop() {
			if runs := h.runsOf(ctx, mid); len(runs) != 2 {
				b.Fatalf("%d runs of %s, want 2", len(runs), mid)
			}
		}
	})
	b.Run("run page", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.runView(ctx, mid, "", true); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("run page refresh", func(b *testing.B) {
		for b.Loop() {
			if _, err := h.runView(ctx, mid, "", false); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runs page", func(b *testing.B) {
		for b.Loop() {
			if _, err := eng.ListWorkflows(ctx, &api.ListWorkflowsRequest{PageSize: 50}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("runs page, id prefix", func(b *testing.B) {
		for b.Loop() {
			if _, err := eng.ListWorkflows(ctx, &api.ListWorkflowsRequest{PageSize: 50, WorkflowIDPrefix: mid[:len(mid)-1]}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
