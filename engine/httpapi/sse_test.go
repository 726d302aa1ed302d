package httpapi

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/cairnflow/cairn/engine/api"
)

// streamStub answers WatchStream from a script: each call takes the next
// answer.
type streamStub struct {
	stubService
	mu      sync.Mutex
	answers []*api.WatchStreamResponse
	reqs    []api.WatchStreamRequest
}

func (s *streamStub) WatchStream(_ context.Context, req *api.WatchStreamRequest) (*api.WatchStreamResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, *req)
	if len(s.answers) == 0 {
		return &api.WatchStreamResponse{Closed: true}, nil
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return a, nil
}

func TestStreamServesServerSentEvents(t *testing.T) {
	stub := &streamStub{answers: []*api.WatchStreamResponse{
		{RunID: "r1", Events: []api.StreamEvent{
			{Seq: 7, ScheduledEventID: 5, Attempt: 1, StreamDelta: api.StreamDelta{Kind: api.StreamText, Text: "Pay"}},
			{Seq: 8, ScheduledEventID: 5, Attempt: 1, StreamDelta: api.StreamDelta{Kind: api.StreamSuperseded}},
		}},
		{RunID: "r1", Gap: true},
		{RunID: "r1", Closed: true},
	}}
	srv := newTestServer(t, NewHandler(stub, Options{Token: "s3cret"}))
	if resp, err := http.Get(srv.URL + StreamPath + "pay-INV-9"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("without the token: %v %v", resp, err)
	}
	req, _ := http.NewRequest(http.MethodGet, srv.URL+StreamPath+"pay-INV-9?after=6&access_token=s3cret", nil)
	req.Header.Set("Last-Event-ID", "6")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	body, _ := io.ReadAll(resp.Body) // the stream ends with the run
	got := string(body)
	for _, want := range []string{
		"id: 7\nevent: text\ndata: {\"Seq\":7,",
		`"Text":"Pay"`,
		"id: 8\nevent: superseded\n",
		"event: gap\n",
		"event: closed\n",
	} {
		if !strings.Contains(got, want) {
			t.Fatalf("the stream lacks %q:\n%s", want, got)
		}
	}
	if first, second := stub.reqs[0], stub.reqs[1]; first.AfterSeq != 6 || first.WorkflowID != "pay-INV-9" ||
		second.AfterSeq != 8 || second.RunID != "r1" || !second.Wait {
		t.Fatalf("requests %+v", stub.reqs)
	}
}
