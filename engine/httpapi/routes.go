package httpapi

import (
	"context"

	"github.com/cairnflow/cairn/engine/api"
)

// Prefix is the path under which every api.Service method is served:
// POST Prefix + method name, e.g. POST /api/v1/StartWorkflow.
const Prefix = api.HTTPPrefix

// endpoint decodes a request into a fresh value and calls one method.
type endpoint struct {
	// long marks long polls (they may run up to the poll timeout).
	long bool
	call func(ctx context.Context, svc api.Service, decode func(any) error) (any, error)
}

func route[Req, Resp any](long bool, m func(api.Service, context.Context, *Req) (*Resp, error)) endpoint {
	return endpoint{long: long, call: func(ctx context.Context, svc api.Service, decode func(any) error) (any, error) {
		req := new(Req)
		if err := decode(req); err != nil {
			return nil, err
		}
		return m(svc, ctx, req)
	}}
}

// Routes maps each method name to its endpoint. The client uses the same
// names (see Methods).
var routes = map[string]endpoint{
	"StartWorkflow":           route(false, api.Service.StartWorkflow),
	"SignalWorkflow":          route(false, api.Service.SignalWorkflow),
	"SignalWithStartWorkflow": route(false, api.Service.SignalWithStartWorkflow),
	"RequestCancelWorkflow":   route(false, api.Service.RequestCancelWorkflow),
	"TerminateWorkflow":       route(false, api.Service.TerminateWorkflow),
	"ResetWorkflow":           route(false, api.Service.ResetWorkflow),
	"ForkWorkflow":            route(false, api.Service.ForkWorkflow),
	"DescribeWorkflow":        route(false, api.Service.DescribeWorkflow),
	"GetHistory":              route(true, api.Service.GetHistory),
	"GetResult":               route(true, api.Service.GetResult),
	"ListWorkflows":           route(false, api.Service.ListWorkflows),
	"QueryWorkflow":           route(true, api.Service.QueryWorkflow),
	"UpdateWorkflow":          route(true, api.Service.UpdateWorkflow),
	"ResolveActivity":         route(false, api.Service.ResolveActivity),
	"CountWorkflows":          route(false, api.Service.CountWorkflows),
	"DescribeTaskQueue":       route(false, api.Service.DescribeTaskQueue),
	"ListTaskQueues":          route(false, api.Service.ListTaskQueues),
	"SetActivityLimit":        route(false, api.Service.SetActivityLimit),
	"ListEffects":             route(false, api.Service.ListEffects),
	"PollWorkflowTask":        route(true, api.Service.PollWorkflowTask),
	"CompleteWorkflowTask":    route(false, api.Service.CompleteWorkflowTask),
	"FailWorkflowTask":        route(false, api.Service.FailWorkflowTask),
	"RespondQueryTask":        route(false, api.Service.RespondQueryTask),
	"PollActivityTask":        route(true, api.Service.PollActivityTask),
	"RecordActivityHeartbeat": route(false, api.Service.RecordActivityHeartbeat),
	"CompleteActivity":        route(false, api.Service.CompleteActivity),
	"FailActivity":            route(false, api.Service.FailActivity),
	"GetChunks":               route(false, api.Service.GetChunks),
	"UpdateBudget":            route(false, api.Service.UpdateBudget),
	"PublishStream":           route(false, api.Service.PublishStream),
	"WatchStream":             route(true, api.Service.WatchStream),
	"GetTranscript":           route(false, api.Service.GetTranscript),
	"DescribeCluster":         route(false, api.Service.DescribeCluster),
	"NotifyChildClosed":       route(false, api.Service.NotifyChildClosed),
	"CreateSchedule":          route(false, api.Service.CreateSchedule),
	"DescribeSchedule":        route(false, api.Service.DescribeSchedule),
	"ListSchedules":           route(false, api.Service.ListSchedules),
	"UpdateSchedule":          route(false, api.Service.UpdateSchedule),
	"PatchSchedule":           route(false, api.Service.PatchSchedule),
	"DeleteSchedule":          route(false, api.Service.DeleteSchedule),
	"DeleteWorkflow":          route(false, api.Service.DeleteWorkflow),
}

// Methods returns the names of the served methods.
func Methods() []string {
	names := make([]string, 0, len(routes))
	for n := range routes {
		names = append(names, n)
	}
	return names
}
