package httpapi

import (
	"context"
	"sync"

	"github.com/cairnflow/cairn/engine/api"
)

// stubService implements api.Service without an engine: every method
// records its name and request and returns err, or a zero response.
type stubService struct {
	mu    sync.Mutex
	err   error
	calls []string
	last  any
}

func (s *stubService) setErr(err error) {
	s.mu.Lock()
	s.err = err
	s.mu.Unlock()
}

func (s *stubService) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *stubService) lastCall() (string, any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		return "", nil
	}
	return s.calls[len(s.calls)-1], s.last
}

func stubCall[Resp any](s *stubService, method string, req any) (*Resp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, method)
	s.last = req
	if s.err != nil {
		return nil, s.err
	}
	return new(Resp), nil
}

var _ api.Service = (*stubService)(nil)

func (s *stubService) StartWorkflow(_ context.Context, req *api.StartWorkflowRequest) (*api.StartWorkflowResponse, error) {
	return stubCall[api.StartWorkflowResponse](s, "StartWorkflow", req)
}

func (s *stubService) SignalWorkflow(_ context.Context, req *api.SignalWorkflowRequest) (*api.SignalWorkflowResponse, error) {
	return stubCall[api.SignalWorkflowResponse](s, "SignalWorkflow", req)
}

func (s *stubService) SignalWithStartWorkflow(_ context.Context, req *api.SignalWithStartRequest) (*api.StartWorkflowResponse, error) {
	return stubCall[api.StartWorkflowResponse](s, "SignalWithStartWorkflow", req)
}

func (s *stubService) RequestCancelWorkflow(_ context.Context, req *api.CancelWorkflowRequest) (*api.CancelWorkflowResponse, error) {
	return stubCall[api.CancelWorkflowResponse](s, "RequestCancelWorkflow", req)
}

func (s *stubService) ResetWorkflow(_ context.Context, req *api.ResetWorkflowRequest) (*api.ResetWorkflowResponse, error) {
	return stubCall[api.ResetWorkflowResponse](s, "ResetWorkflow", req)
}
func (s *stubService) ForkWorkflow(_ context.Context, req *api.ForkWorkflowRequest) (*api.ForkWorkflowResponse, error) {
	return stubCall[api.ForkWorkflowResponse](s, "ForkWorkflow", req)
}
func (s *stubService) TerminateWorkflow(_ context.Context, req *api.TerminateWorkflowRequest) (*api.TerminateWorkflowResponse, error) {
	return stubCall[api.TerminateWorkflowResponse](s, "TerminateWorkflow", req)
}

func (s *stubService) DeleteWorkflow(_ context.Context, req *api.DeleteWorkflowRequest) (*api.DeleteWorkflowResponse, error) {
	return stubCall[api.DeleteWorkflowResponse](s, "DeleteWorkflow", req)
}

func (s *stubService) DescribeWorkflow(_ context.Context, req *api.DescribeWorkflowRequest) (*api.DescribeWorkflowResponse, error) {
	return stubCall[api.DescribeWorkflowResponse](s, "DescribeWorkflow", req)
}

func (s *stubService) GetHistory(_ context.Context, req *api.GetHistoryRequest) (*api.GetHistoryResponse, error) {
	return stubCall[api.GetHistoryResponse](s, "GetHistory", req)
}

func (s *stubService) GetResult(_ context.Context, req *api.GetResultRequest) (*api.GetResultResponse, error) {
	return stubCall[api.GetResultResponse](s, "GetResult", req)
}

func (s *stubService) ListWorkflows(_ context.Context, req *api.ListWorkflowsRequest) (*api.ListWorkflowsResponse, error) {
	return stubCall[api.ListWorkflowsResponse](s, "ListWorkflows", req)
}

func (s *stubService) QueryWorkflow(_ context.Context, req *api.QueryWorkflowRequest) (*api.QueryWorkflowResponse, error) {
	return stubCall[api.QueryWorkflowResponse](s, "QueryWorkflow", req)
}

func (s *stubService) ListEffects(_ context.Context, req *api.ListEffectsRequest) (*api.ListEffectsResponse, error) {
	return stubCall[api.ListEffectsResponse](s, "ListEffects", req)
}

func (s *stubService) ResolveActivity(_ context.Context, req *api.ResolveActivityRequest) (*api.ResolveActivityResponse, error) {
	return stubCall[api.ResolveActivityResponse](s, "ResolveActivity", req)
}

func (s *stubService) CountWorkflows(_ context.Context, req *api.CountWorkflowsRequest) (*api.CountWorkflowsResponse, error) {
	return stubCall[api.CountWorkflowsResponse](s, "CountWorkflows", req)
}

func (s *stubService) DescribeTaskQueue(_ context.Context, req *api.DescribeTaskQueueRequest) (*api.DescribeTaskQueueResponse, error) {
	return stubCall[api.DescribeTaskQueueResponse](s, "DescribeTaskQueue", req)
}

func (s *stubService) SetActivityLimit(_ context.Context, req *api.SetActivityLimitRequest) (*api.SetActivityLimitResponse, error) {
	return stubCall[api.SetActivityLimitResponse](s, "SetActivityLimit", req)
}

func (s *stubService) ListTaskQueues(_ context.Context, req *api.ListTaskQueuesRequest) (*api.ListTaskQueuesResponse, error) {
	return stubCall[api.ListTaskQueuesResponse](s, "ListTaskQueues", req)
}

func (s *stubService) PollWorkflowTask(_ context.Context, req *api.PollWorkflowTaskRequest) (*api.PollWorkflowTaskResponse, error) {
	return stubCall[api.PollWorkflowTaskResponse](s, "PollWorkflowTask", req)
}

func (s *stubService) CompleteWorkflowTask(_ context.Context, req *api.CompleteWorkflowTaskRequest) (*api.CompleteWorkflowTaskResponse, error) {
	return stubCall[api.CompleteWorkflowTaskResponse](s, "CompleteWorkflowTask", req)
}

func (s *stubService) FailWorkflowTask(_ context.Context, req *api.FailWorkflowTaskRequest) (*api.FailWorkflowTaskResponse, error) {
	return stubCall[api.FailWorkflowTaskResponse](s, "FailWorkflowTask", req)
}

func (s *stubService) RespondQueryTask(_ context.Context, req *api.RespondQueryTaskRequest) (*api.RespondQueryTaskResponse, error) {
	return stubCall[api.RespondQueryTaskResponse](s, "RespondQueryTask", req)
}

func (s *stubService) PollActivityTask(_ context.Context, req *api.PollActivityTaskRequest) (*api.PollActivityTaskResponse, error) {
	return stubCall[api.PollActivityTaskResponse](s, "PollActivityTask", req)
}

func (s *stubService) RecordActivityHeartbeat(_ context.Context, req *api.HeartbeatRequest) (*api.HeartbeatResponse, error) {
	return stubCall[api.HeartbeatResponse](s, "RecordActivityHeartbeat", req)
}

func (s *stubService) CompleteActivity(_ context.Context, req *api.CompleteActivityRequest) (*api.CompleteActivityResponse, error) {
	return stubCall[api.CompleteActivityResponse](s, "CompleteActivity", req)
}

func (s *stubService) FailActivity(_ context.Context, req *api.FailActivityRequest) (*api.FailActivityResponse, error) {
	return stubCall[api.FailActivityResponse](s, "FailActivity", req)
}

func (s *stubService) GetChunks(_ context.Context, req *api.GetChunksRequest) (*api.GetChunksResponse, error) {
	return stubCall[api.GetChunksResponse](s, "GetChunks", req)
}

func (s *stubService) UpdateBudget(_ context.Context, req *api.UpdateBudgetRequest) (*api.UpdateBudgetResponse, error) {
	return stubCall[api.UpdateBudgetResponse](s, "UpdateBudget", req)
}

func (s *stubService) PublishStream(_ context.Context, req *api.PublishStreamRequest) (*api.PublishStreamResponse, error) {
	return stubCall[api.PublishStreamResponse](s, "PublishStream", req)
}

func (s *stubService) WatchStream(_ context.Context, req *api.WatchStreamRequest) (*api.WatchStreamResponse, error) {
	return stubCall[api.WatchStreamResponse](s, "WatchStream", req)
}

func (s *stubService) GetTranscript(_ context.Context, req *api.GetTranscriptRequest) (*api.GetTranscriptResponse, error) {
	return stubCall[api.GetTranscriptResponse](s, "GetTranscript", req)
}

func (s *stubService) DescribeCluster(_ context.Context, req *api.DescribeClusterRequest) (*api.DescribeClusterResponse, error) {
	return stubCall[api.DescribeClusterResponse](s, "DescribeCluster", req)
}

func (s *stubService) UpdateWorkflow(_ context.Context, req *api.UpdateWorkflowRequest) (*api.UpdateWorkflowResponse, error) {
	return stubCall[api.UpdateWorkflowResponse](s, "UpdateWorkflow", req)
}

func (s *stubService) NotifyChildClosed(_ context.Context, req *api.NotifyChildClosedRequest) (*api.NotifyChildClosedResponse, error) {
	return stubCall[api.NotifyChildClosedResponse](s, "NotifyChildClosed", req)
}

func (s *stubService) CreateSchedule(_ context.Context, req *api.CreateScheduleRequest) (*api.CreateScheduleResponse, error) {
	return stubCall[api.CreateScheduleResponse](s, "CreateSchedule", req)
}

func (s *stubService) DescribeSchedule(_ context.Context, req *api.DescribeScheduleRequest) (*api.DescribeScheduleResponse, error) {
	return stubCall[api.DescribeScheduleResponse](s, "DescribeSchedule", req)
}

func (s *stubService) ListSchedules(_ context.Context, req *api.ListSchedulesRequest) (*api.ListSchedulesResponse, error) {
	return stubCall[api.ListSchedulesResponse](s, "ListSchedules", req)
}

func (s *stubService) UpdateSchedule(_ context.Context, req *api.UpdateScheduleRequest) (*api.UpdateScheduleResponse, error) {
	return stubCall[api.UpdateScheduleResponse](s, "UpdateSchedule", req)
}

func (s *stubService) PatchSchedule(_ context.Context, req *api.PatchScheduleRequest) (*api.PatchScheduleResponse, error) {
	return stubCall[api.PatchScheduleResponse](s, "PatchSchedule", req)
}

func (s *stubService) DeleteSchedule(_ context.Context, req *api.DeleteScheduleRequest) (*api.DeleteScheduleResponse, error) {
	return stubCall[api.DeleteScheduleResponse](s, "DeleteSchedule", req)
}
