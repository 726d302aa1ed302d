package machine_test

import (
	"fmt"
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// A run with one activity, driven input by input as the service drives it:
// each input on a copy of the state, whose events the service would commit
// before using the copy.
func Example() {
	now := time.Date(2026, 1, 2, 9, 0, 0, 0, time.UTC)
	m := &machine.Machine{Limits: machine.DefaultLimits(), Defaults: machine.DefaultDefaults(),
		NewRunID: func() string { return "run-1" }}
	show := func(out machine.Output) {
		for _, ev := range out.Events {
			fmt.Println(ev.ID, ev.Type())
		}
	}

	st, out := m.Start(machine.StartParams{RunID: "run-1",
		Request: api.StartWorkflowRequest{WorkflowID: "greet", WorkflowType: "Greet", TaskQueue: "q"}}, now)
	show(out)

	st = st.Clone()
	m.WFTDispatched(st, 1, now)
	out, err := m.CompleteWFT(st, machine.WFTCompletion{Commands: []api.Command{{Type: api.CommandScheduleActivity,
		ScheduleActivity: &api.ScheduleActivityCommand{ActivityID: "1", ActivityType: "Hello",
			Options: history.ActivityOptions{StartToCloseTimeout: time.Minute}}}}}, now)
	if err != nil {
		panic(err)
	}
	show(out)
	fmt.Println("ready:", out.ActivitiesReady)

	st = st.Clone()
	if _, err := m.ActivityDispatched(st, 3, 2, "worker-1", now); err != nil {
		panic(err)
	}
	now = now.Add(time.Second)
	out, err = m.ActivityCompleted(st, 3, 2, history.Payload{Encoding: "json", Data: []byte(`"hello"`)}, "", "worker-1",
		history.Usage{}, now)
	if err != nil {
		panic(err)
	}
	show(out)
	fmt.Println("workflow task ready:", out.WFTReady)
	// Output:
	// 1 WorkflowStarted
	// 2 WorkflowTaskCompleted
	// 3 ActivityScheduled
	// ready: [3]
	// 4 ActivityStarted
	// 5 ActivityCompleted
	// workflow task ready: true
}
