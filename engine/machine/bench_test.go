package machine

import (
	"testing"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// Benchmarks of the pure machine: no store, no I/O, so they measure the
// decisions alone. Run them with
//
//	go test -run '^$' -bench Machine ./engine/machine

// benchMachineRun drives one workflow through the pure machine: start,
// a workflow task scheduling one activity of class effect, its dispatch
// and completion, and the workflow task that completes the run.
func benchMachineRun(b *testing.B, effect history.EffectClass) {
	m := &Machine{Limits: DefaultLimits(), Defaults: DefaultDefaults(), NewRunID: func() string { return "run" }}
	now := time.Unix(1_700_000_000, 0).UTC()
	req := api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}
	sched := []api.Command{{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: "1", ActivityType: "Greet", Effect: effect, Input: history.Payload{Encoding: "json", Data: []byte(`"world"`)},
		Options: history.ActivityOptions{StartToCloseTimeout: time.Minute}}}}
	done := []api.Command{{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{
		Result: history.Payload{Encoding: "json", Data: []byte(`"hello world"`)}}}}
	result := history.Payload{Encoding: "json", Data: []byte(`"hello"`)}
	b.ReportAllocs()
	for range b.N {
		st, _ := m.Start(StartParams{Request: req, RunID: "run"}, now)
		st = st.Clone()
		m.WFTDispatched(st, 1, now)
		if _, err := m.CompleteWFT(st, WFTCompletion{Commands: sched, Identity: "w"}, now); err != nil {
			b.Fatal(err)
		}
		st = st.Clone()
		if _, err := m.ActivityDispatched(st, 3, 2, "w", now); err != nil {
			b.Fatal(err)
		}
		st = st.Clone()
		if _, err := m.ActivityCompleted(st, 3, 2, result, "", "w", history.Usage{}, now); err != nil {
			b.Fatal(err)
		}
		st = st.Clone()
		m.WFTDispatched(st, 3, now)
		if _, err := m.CompleteWFT(st, WFTCompletion{Commands: done, Identity: "w"}, now); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMachineOneActivity: one workflow with one activity through the
// pure machine, per iteration (with the Clone the service makes before
// every transition).
func BenchmarkMachineOneActivity(b *testing.B) {
	b.Run("read", func(b *testing.B) { benchMachineRun(b, history.Read) })
	b.Run("side-effect", func(b *testing.B) { benchMachineRun(b, history.SideEffect) })
}

// BenchmarkMachineDeadlines: the deadlines of a run with 200 pending
// activities and 50 timers (what Open rebuilds), and its Clone.
func BenchmarkMachineDeadlines(b *testing.B) {
	m := &Machine{Limits: DefaultLimits(), Defaults: DefaultDefaults(), NewRunID: func() string { return "run" }}
	now := time.Unix(1_700_000_000, 0).UTC()
	st, _ := m.Start(StartParams{Request: api.StartWorkflowRequest{WorkflowID: "wf", WorkflowType: "W", TaskQueue: "q"}, RunID: "run"}, now)
	var cmds []api.Command
	for i := range 200 {
		cmds = append(cmds, api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
			ActivityID: string(rune('a'+i%26)) + string(rune('a'+i/26)), ActivityType: "Greet", Effect: history.SideEffect,
			Input:   history.Payload{Encoding: "json", Data: []byte{'"', byte('a' + i%26), byte('a' + i/26), '"'}},
			Options: history.ActivityOptions{StartToCloseTimeout: time.Minute, ScheduleToCloseTimeout: time.Hour}}})
	}
	for i := range 50 {
		cmds = append(cmds, api.Command{Type: api.CommandStartTimer, StartTimer: &api.StartTimerCommand{
			TimerID: "t" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Duration: time.Duration(i+1) * time.Minute}})
	}
	m.WFTDispatched(st, 1, now)
	if _, err := m.CompleteWFT(st, WFTCompletion{Commands: cmds, Identity: "w"}, now); err != nil {
		b.Fatal(err)
	}
	b.Run("deadlines", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if len(m.Deadlines(st)) == 0 {
				b.Fatal("no deadlines")
			}
		}
	})
	b.Run("clone", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			_ = st.Clone()
		}
	})
}
