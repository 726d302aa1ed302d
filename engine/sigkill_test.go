//go:build unix

package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/internal/clock"
)

// --- a real SIGKILL ---

const (
	helperEnv     = "CAIRN_ENGINE_HELPER_DIR"
	helperRuns    = 200
	killAfterAcks = 60
)

// TestHelperEngineProcess is not a test: TestSIGKILL runs the test binary
// again with helperEnv set, and this function then opens the engine on that
// directory and drives workflows until it is killed, printing "ACK <id>
// <run>" once each run's first workflow task completion (which schedules
// an activity) has been acknowledged.
func TestHelperEngineProcess(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("helper process for TestSIGKILL")
	}
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open store:", err)
		os.Exit(2)
	}
	eng, err := Open(Options{Store: st})
	if err != nil {
		fmt.Fprintln(os.Stderr, "open engine:", err)
		os.Exit(2)
	}
	ctx := context.Background()
	out := bufio.NewWriter(os.Stdout)
	var outMu sync.Mutex
	var wg sync.WaitGroup
	const workers = 8
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < helperRuns; i += workers {
				id := fmt.Sprintf("kill-%03d", i)
				resp, err := eng.StartWorkflow(ctx, &api.StartWorkflowRequest{WorkflowID: id, WorkflowType: "W", TaskQueue: "q"})
				if err != nil {
					fmt.Fprintln(os.Stderr, "start:", err)
					os.Exit(2)
				}
				// Complete whichever first task comes; the ack names the
				// run whose completion was acknowledged.
				task, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q"})
				if err != nil || task.Task == nil {
					fmt.Fprintln(os.Stderr, "poll:", err)
					os.Exit(2)
				}
				_ = resp
				if _, err := eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.Task.TaskToken,
					Commands: []api.Command{schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour})}}); err != nil {
					fmt.Fprintln(os.Stderr, "complete:", err)
					os.Exit(2)
				}
				outMu.Lock()
				fmt.Fprintf(out, "ACK %s %s\n", task.Task.WorkflowID, task.Task.RunID)
				_ = out.Flush()
				outMu.Unlock()
			}
		}()
	}
	wg.Wait()
	outMu.Lock()
	fmt.Fprintln(out, "DONE")
	_ = out.Flush()
	outMu.Unlock()
	select {} // wait for the kill
}

func TestSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a process")
	}
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperEngineProcess$", "-test.count=1", "-test.timeout=5m")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	defer func() {
		if !killed {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	// Read acknowledgements until enough arrived, then kill the process
	// mid-stream (its other workers are between calls or inside commits).
	type ack struct{ id, run string }
	acks := make(chan ack, helperRuns)
	readErr := make(chan error, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			line := sc.Text()
			if f := strings.Fields(line); len(f) == 3 && f[0] == "ACK" {
				acks <- ack{f[1], f[2]}
			}
		}
		readErr <- sc.Err()
		close(acks)
	}()
	acked := map[string]string{}
	deadline := time.After(60 * time.Second)
	for len(acked) < killAfterAcks {
		select {
		case a, ok := <-acks:
			if !ok {
				t.Fatalf("helper exited after %d acks: %v\n%s", len(acked), <-readErr, stderr.String())
			}
			acked[a.id] = a.run
		case <-deadline:
			t.Fatalf("only %d acks in 60 s\n%s", len(acked), stderr.String())
		}
	}
	if err := syscall.Kill(cmd.Process.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed = true
	_ = cmd.Wait()
	for a := range acks { // acks written before the kill landed
		acked[a.id] = a.run
	}
	t.Logf("killed after %d acknowledged transitions", len(acked))

	// Reopen in this process: every acknowledged transition is there.
	st, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	eng, err := Open(Options{Store: st, Clock: clock.NewFake(time.Now())})
	if err != nil {
		t.Fatal(err)
	}
	defer eng.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for id, run := range acked {
		resp, err := eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: id, RunID: run})
		if err != nil {
			t.Fatalf("%s: %v", id, err)
		}
		if len(resp.Events) < 3 || resp.Events[2].Type() != history.TypeActivityScheduled || resp.Closed {
			t.Fatalf("%s lost its acknowledged transition:\n%s", id, types(resp.Events))
		}
	}
	// Every run that exists can be finished: acknowledged ones from their
	// scheduled activity, the others from wherever the kill left them.
	list, err := eng.ListWorkflows(ctx, &api.ListWorkflowsRequest{Status: api.StatusRunning, PageSize: 1000})
	if err != nil {
		t.Fatal(err)
	}
	open := map[string]bool{}
	for _, w := range list.Workflows {
		open[w.WorkflowID] = true
	}
	for id := range acked {
		if !open[id] {
			t.Fatalf("acknowledged run %s is not listed as running", id)
		}
	}
	finishAll(t, ctx, eng, len(open))
	for id, run := range acked {
		r, err := eng.GetResult(ctx, &api.GetResultRequest{WorkflowID: id, RunID: run})
		if err != nil || r.Status != api.StatusCompleted {
			t.Fatalf("%s: %+v %v", id, r, err)
		}
	}
}

// finishAll drives n open runs of queue "q" to completion: a workflow task
// schedules an activity unless one completed, then completes the run.
func finishAll(t *testing.T, ctx context.Context, eng *Engine, n int) {
	t.Helper()
	var completed atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	errc := make(chan error, 2)
	go func() {
		for wctx.Err() == nil {
			resp, err := eng.PollActivityTask(wctx, &api.PollActivityTaskRequest{TaskQueue: "q"})
			if err != nil || resp.Task == nil {
				if err != nil && wctx.Err() == nil {
					errc <- err
				}
				return
			}
			if _, err := eng.CompleteActivity(wctx, &api.CompleteActivityRequest{TaskToken: resp.Task.TaskToken}); err != nil {
				errc <- err
				return
			}
		}
	}()
	for completed.Load() < int64(n) {
		resp, err := eng.PollWorkflowTask(ctx, &api.PollWorkflowTaskRequest{TaskQueue: "q"})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Task == nil {
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			t.Fatalf("no workflow task; %d of %d runs finished", completed.Load(), n)
		}
		task := resp.Task
		hist, err := eng.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: task.WorkflowID, RunID: task.RunID})
		if err != nil {
			t.Fatal(err)
		}
		cmd := schedule("a", "A", history.Read, history.ActivityOptions{StartToCloseTimeout: time.Hour})
		if count(hist.Events, history.TypeActivityScheduled) > 0 {
			if count(hist.Events, history.TypeActivityCompleted) == 0 {
				t.Fatalf("%s: workflow task before its activity completed:\n%s", task.WorkflowID, types(hist.Events))
			}
			cmd = completeWF(`"ok"`)
		}
		_, err = eng.CompleteWorkflowTask(ctx, &api.CompleteWorkflowTaskRequest{TaskToken: task.TaskToken, Commands: []api.Command{cmd}})
		if err != nil && !errors.Is(err, api.ErrStaleTask) {
			t.Fatal(err)
		}
		if err == nil && cmd.Type == api.CommandCompleteWorkflow {
			completed.Add(1)
		}
	}
}
