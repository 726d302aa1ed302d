package badgerstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
)

func Example() {
	dir, err := os.MkdirTemp("", "cairn-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)

	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		panic(err) // errors.Is(err, history.ErrLocked): another process has dir
	}
	defer st.Close()

	ctx := context.Background()
	run := history.RunRef{WorkflowID: "invoice-INV-9", RunID: "r1"}
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	start := &history.Batch{
		Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: []history.Event{
			{ID: 1, Time: now, Attrs: &history.WorkflowStarted{WorkflowType: "PayInvoice", TaskQueue: "agents"}},
		}}},
		Puts: []history.Record{{Space: history.SpaceCurrentRun, Key: history.Key().Str(run.WorkflowID).Bytes(), Value: []byte(run.RunID)}},
	}
	if err := st.Commit(ctx, start); err != nil { // nil: durable
		panic(err)
	}
	// A second writer that read the same history loses the race.
	err = st.Commit(ctx, &history.Batch{Appends: []history.Append{{Run: run, ExpectedNext: 1, Events: []history.Event{
		{ID: 1, Time: now, Attrs: &history.WorkflowStarted{WorkflowType: "PayInvoice", TaskQueue: "agents"}},
	}}}})
	fmt.Println("conflict:", errors.Is(err, history.ErrConflict))

	for ev, err := range st.Events(ctx, run, 1) {
		if err != nil {
			panic(err)
		}
		fmt.Println(ev)
	}
	// Output:
	// conflict: true
	// 1 WorkflowStarted
}
