package llm_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/activities/llm"
	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/converter"
	"github.com/cairnflow/cairn/history"
)

// transcript stores entries as a chain of one chunk per turn and returns
// the payload referencing the last.
func transcript(t *testing.T, m history.MemChunks, turns ...[]history.TranscriptEntry) history.Payload {
	t.Helper()
	tip := history.RootRef
	for _, entries := range turns {
		b, err := history.AppendTranscript(nil, entries...)
		if err != nil {
			t.Fatal(err)
		}
		tip = m.Add(history.Chunk{Parent: tip, Data: b})
	}
	return history.Payload{Encoding: history.EncodingTranscript, Ref: tip}
}

func msg(role, content string) history.TranscriptEntry {
	return history.TranscriptEntry{Message: &history.ChatMessage{Role: role, Content: content}}
}

func settings(stream bool, tools ...string) history.TranscriptEntry {
	c := &history.ChatConfig{Model: "fake-1", Stream: stream}
	for _, n := range tools {
		c.Tools = append(c.Tools, history.ToolSpec{Name: n, Description: "d", Parameters: `{"type":"object"}`})
	}
	return history.TranscriptEntry{Config: c}
}

type recorder struct {
	usage  history.Usage
	deltas []activities.StreamDelta
}

func (r *recorder) ctx(m history.MemChunks) context.Context {
	ctx := activities.WithChunks(context.Background(), m)
	ctx = activities.WithUsageRecorder(ctx, func(u history.Usage) { r.usage = r.usage.Add(u) })
	return activities.WithStreamer(ctx, func(d activities.StreamDelta) { r.deltas = append(r.deltas, d) })
}

func newModel(t *testing.T, srv *fakellm.Server) *llm.Model {
	t.Helper()
	hs := httptest.NewServer(srv)
	t.Cleanup(hs.Close)
	m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", RequestTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func appErr(t *testing.T, err error) *activities.ApplicationError {
	t.Helper()
	var app *activities.ApplicationError
	if !errors.As(err, &app) {
		t.Fatalf("error %v (%T) is not an ApplicationError", err, err)
	}
	return app
}

func TestChatAndIncrementalRequest(t *testing.T) {
	srv := fakellm.New(fakellm.Script{fakellm.CallTool("ReadInvoice", `{"id":"INV-9"}`), fakellm.Say("Paid.")}).KeepRequests()
	m := newModel(t, srv)
	chunks := history.MemChunks{}
	turn1 := []history.TranscriptEntry{settings(false, "ReadInvoice"), msg("system", "You pay invoices."), msg("user", "Pay INV-9")}
	r := &recorder{}
	res, err := chat(m, r.ctx(chunks), transcript(t, chunks, turn1))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Message.ToolCalls) != 1 || res.Message.ToolCalls[0].Name != "ReadInvoice" || res.Usage.Tokens() == 0 || r.usage != res.Usage {
		t.Fatalf("result %+v, usage recorded %+v", res, r.usage)
	}
	turn2 := []history.TranscriptEntry{{Message: &res.Message}, {Message: &history.ChatMessage{Role: "tool", ToolCallID: res.Message.ToolCalls[0].ID, Content: `{"amount":4200}`}}}
	res2, err := chat(m, r.ctx(chunks), transcript(t, chunks, turn1, turn2))
	if err != nil || res2.Message.Content != "Paid." {
		t.Fatalf("turn 2: %+v, %v", res2, err)
	}
	// The second request is the first one's messages plus the new ones,
	// built from the cached prefix, byte for byte what a fresh model builds.
	reqs := srv.Requests()
	fresh := newModel(t, srv)
	if _, err := chat(fresh, r.ctx(chunks), transcript(t, chunks, turn1, turn2)); err != nil {
		t.Fatal(err)
	}
	again := srv.Requests()
	if string(reqs[1].Body) != string(again[2].Body) {
		t.Fatalf("incremental request differs from a fresh build:\n%s\n%s", reqs[1].Body, again[2].Body)
	}
	if !strings.Contains(string(reqs[1].Body), `"tool_call_id"`) || !strings.HasPrefix(string(reqs[1].Body), `{"model":"fake-1","tools":[`) {
		t.Fatalf("request %s", reqs[1].Body)
	}
}

func TestErrorsAreClassified(t *testing.T) {
	chunks := history.MemChunks{}
	in := transcript(t, chunks, []history.TranscriptEntry{settings(false), msg("user", "hi")})
	for _, c := range []struct {
		name       string
		reply      fakellm.Reply
		typ        string
		retryable  bool
		retryAfter time.Duration
	}{
		{"429 with Retry-After", fakellm.Reply{Status: 429, RetryAfter: 7 * time.Second}, llm.FailureUnavailable, true, 7 * time.Second},
		{"500", fakellm.Reply{Status: 500}, llm.FailureUnavailable, true, 0},
		{"400", fakellm.Reply{Status: 400}, llm.FailureRejected, false, 0},
		{"malformed JSON", fakellm.Reply{Malformed: true}, llm.FailureMalformed, true, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newModel(t, fakellm.New(fakellm.Script{c.reply}))
			r := &recorder{}
			_, err := chat(m, r.ctx(chunks), in)
			app := appErr(t, err)
			if app.Type != c.typ || app.NonRetryable == c.retryable {
				t.Fatalf("%v: type %s non-retryable %v", err, app.Type, app.NonRetryable)
			}
			var ra *activities.RetryAfterError
			got := time.Duration(0)
			if errors.As(err, &ra) {
				got = ra.Delay
			}
			if got != c.retryAfter {
				t.Fatalf("retry after %v, want %v", got, c.retryAfter)
			}
		})
	}
}

func TestStreamAndCutStream(t *testing.T) {
	chunks := history.MemChunks{}
	in := transcript(t, chunks, []history.TranscriptEntry{settings(true, "SendPayment"), msg("user", "pay")})
	m := newModel(t, fakellm.New(fakellm.Script{{Content: "I will pay the invoice now.", ToolCalls: []fakellm.ToolCall{{Name: "SendPayment", Arguments: `{"invoice":"INV-9"}`}}}}))
	r := &recorder{}
	res, err := chat(m, r.ctx(chunks), in)
	if err != nil {
		t.Fatal(err)
	}
	var text, args string
	for _, d := range r.deltas {
		switch d.Kind {
		case "text":
			text += d.Text
		case "tool_call":
			args += d.Text
		}
	}
	if text != res.Message.Content || text != "I will pay the invoice now." || args != `{"invoice":"INV-9"}` ||
		res.Message.ToolCalls[0].Arguments != args || r.usage.Tokens() == 0 {
		t.Fatalf("streamed %q / %q; result %+v; usage %+v", text, args, res.Message, r.usage)
	}

	cut := newModel(t, fakellm.New(fakellm.Script{{Content: "a long answer that never ends properly", CutAfter: 2}}))
	r = &recorder{}
	_, err = chat(cut, r.ctx(chunks), in)
	if app := appErr(t, err); app.NonRetryable || len(r.deltas) == 0 {
		t.Fatalf("a cut stream: %v (non-retryable %v), %d deltas published", err, app.NonRetryable, len(r.deltas))
	}
}

// chat calls the activity and decodes its answer, checking that the result
// extends the input it answers.
func chat(m *llm.Model, ctx context.Context, in history.Payload) (llm.Result, error) {
	p, err := m.Chat(ctx, in)
	if err != nil {
		return llm.Result{}, err
	}
	if p.Encoding != history.EncodingTranscript || string(p.Ref) != string(in.StoredRef()) {
		return llm.Result{}, errors.New("the answer does not extend the input")
	}
	return llm.Answer(p)
}

func TestInputMustBeATranscript(t *testing.T) {
	m := newModel(t, fakellm.New(nil))
	_, err := m.Chat(context.Background(), history.Payload{Encoding: "json", Data: []byte(`{}`)})
	if app := appErr(t, err); !app.NonRetryable || app.Type != llm.FailureTranscript {
		t.Fatalf("%v", err)
	}
}

// TestToolResultByReference: a tool message whose content is a reference
// to the tool's stored result is sent exactly as the same message with
// the text inline; a reference to a chunk that is not stored fails the
// call without sending anything.
func TestToolResultByReference(t *testing.T) {
	srv := fakellm.New(fakellm.Script{fakellm.Say("ok")}).KeepRequests()
	chunks := history.MemChunks{}
	result, err := converter.Default().ToPayload(map[string]any{"id": "DOC-1", "text": strings.Repeat("lorem ", 50)})
	if err != nil {
		t.Fatal(err)
	}
	ref := chunks.Add(history.Chunk{Parent: history.RootRef, Data: result.Data})
	text, err := history.ToolResultText(result)
	if err != nil {
		t.Fatal(err)
	}
	head := []history.TranscriptEntry{settings(false, "ReadDocument"), msg("user", "Read DOC-1")}
	call := history.ChatMessage{Role: "assistant", ToolCalls: []history.ToolCall{{ID: "c1", Name: "ReadDocument", Arguments: `{"id":"DOC-1"}`}}}
	byRef := []history.TranscriptEntry{{Message: &call}, {Message: &history.ChatMessage{Role: "tool", ToolCallID: "c1", Name: "ReadDocument"},
		Content: &history.ContentRef{Ref: ref, Encoding: result.Encoding}}}
	inline := []history.TranscriptEntry{{Message: &call}, {Message: &history.ChatMessage{Role: "tool", ToolCallID: "c1", Name: "ReadDocument", Content: text}}}
	r := &recorder{}
	for _, turns := range [][]history.TranscriptEntry{byRef, inline} {
		if _, err := chat(newModel(t, srv), r.ctx(chunks), transcript(t, chunks, head, turns)); err != nil {
			t.Fatal(err)
		}
	}
	reqs := srv.Requests()
	if string(reqs[0].Body) != string(reqs[1].Body) || !strings.Contains(string(reqs[0].Body), `lorem lorem`) {
		t.Fatalf("the request from a reference differs from the inline one:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
	missing := []history.TranscriptEntry{{Message: &call}, {Message: &history.ChatMessage{Role: "tool", ToolCallID: "c1"},
		Content: &history.ContentRef{Ref: history.ChunkHash(nil, []byte("absent")), Encoding: "msgpack"}}}
	if _, err := chat(newModel(t, srv), r.ctx(chunks), transcript(t, chunks, head, missing)); !errors.Is(err, history.ErrChunkNotFound) {
		t.Fatalf("a missing result chunk: %v", err)
	}
	if n := len(srv.Requests()); n != 2 {
		t.Fatalf("%d requests sent, want 2", n)
	}
}

// bodyProbe is a transport that notes what the request bodies it is given
// can do before passing them on.
type bodyProbe struct {
	next     http.RoundTripper
	writerTo []bool
	lengths  []int64
}

func (p *bodyProbe) RoundTrip(r *http.Request) (*http.Response, error) {
	_, ok := r.Body.(io.WriterTo)
	p.writerTo = append(p.writerTo, ok)
	p.lengths = append(p.lengths, r.ContentLength)
	return p.next.RoundTrip(r)
}

// TestRequestBodyIsHandedOverWhole: the transport gets a body it can write
// part by part straight from the cached conversation (an io.WriterTo), not
// one it must copy through a 32 KB buffer — with and without streaming —
// and the endpoint receives the request exactly as built: the placeholder
// openai-go is given does not leak into it.
func TestRequestBodyIsHandedOverWhole(t *testing.T) {
	for _, stream := range []bool{false, true} {
		srv := fakellm.New(fakellm.Script{fakellm.Say("ok")}).KeepRequests()
		hs := httptest.NewServer(srv)
		probe := &bodyProbe{next: hs.Client().Transport}
		m, err := llm.New(llm.Config{BaseURL: hs.URL + "/v1", HTTPClient: &http.Client{Transport: probe}})
		if err != nil {
			t.Fatal(err)
		}
		chunks := history.MemChunks{}
		long := strings.Repeat("x", 300<<10)
		in := transcript(t, chunks, []history.TranscriptEntry{settings(stream), msg("user", long)})
		if _, err := chat(m, (&recorder{}).ctx(chunks), in); err != nil {
			t.Fatal(err)
		}
		hs.Close()
		body := string(srv.Requests()[0].Body)
		want := `{"model":"fake-1","messages":[{"role":"user","content":"` + long + `"}]}`
		if stream {
			want = `{"model":"fake-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"` + long + `"}]}`
		}
		if len(probe.writerTo) != 1 || !probe.writerTo[0] || probe.lengths[0] > 0 || body != want {
			t.Fatalf("stream %v: bodies handed over as WriterTo %v, lengths %v; received %d bytes, want %d (%.80q)",
				stream, probe.writerTo, probe.lengths, len(body), len(want), body)
		}
	}
}
