package view

import (
	"context"
	"fmt"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/history"
)

// LoadRun reads what Compare needs of a run over svc: its whole history
// and its transcript. An empty runID is the workflow's current run.
func LoadRun(ctx context.Context, svc api.Service, workflowID, runID string) (*RunData, error) {
	tr, err := svc.GetTranscript(ctx, &api.GetTranscriptRequest{WorkflowID: workflowID, RunID: runID})
	if err != nil {
		return nil, fmt.Errorf("reading the transcript of %s: %w", workflowID, err)
	}
	evs, err := readHistory(ctx, svc, workflowID, tr.RunID)
	if err != nil {
		return nil, fmt.Errorf("reading the history of %s run %s: %w", workflowID, tr.RunID, err)
	}
	return &RunData{WorkflowID: workflowID, RunID: tr.RunID, Events: evs, Transcript: tr}, nil
}

// readHistory reads a run's events, page by page.
func readHistory(ctx context.Context, svc api.Service, workflowID, runID string) ([]history.Event, error) {
	var all []history.Event
	from := int64(1)
	for {
		resp, err := svc.GetHistory(ctx, &api.GetHistoryRequest{WorkflowID: workflowID, RunID: runID, FromEventID: from})
		if err != nil {
			return nil, err
		}
		all = append(all, resp.Events...)
		if len(resp.Events) == 0 || resp.NextEventID <= from+int64(len(resp.Events)) {
			return all, nil
		}
		from += int64(len(resp.Events))
	}
}
