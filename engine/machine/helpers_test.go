package machine

import (
	"time"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// testStart is the scripts' clock at the start: a fixed instant, so
// histories are the same on every run.
var testStart = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func jsonPayload(s string) history.Payload { return history.Payload{Encoding: "json", Data: []byte(s)} }

func schedule(id, typ string, effect history.EffectClass, opts history.ActivityOptions) api.Command {
	return api.Command{Type: api.CommandScheduleActivity, ScheduleActivity: &api.ScheduleActivityCommand{
		ActivityID: id, ActivityType: typ, Input: jsonPayload(`{"invoice":"INV-9"}`), Effect: effect, Options: opts}}
}

func completeWF(result string) api.Command {
	return api.Command{Type: api.CommandCompleteWorkflow, CompleteWorkflow: &api.CompleteWorkflowCommand{Result: jsonPayload(result)}}
}

func startTimer(id string, d time.Duration) api.Command {
	return api.Command{Type: api.CommandStartTimer, StartTimer: &api.StartTimerCommand{TimerID: id, Duration: d}}
}
