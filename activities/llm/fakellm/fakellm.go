// Package fakellm is a scripted, deterministic OpenAI-compatible
// chat-completions server for tests and demos: no network, no key, no
// model. It serves POST /v1/chat/completions (and /chat/completions), with
// and without streaming, answers from a script, and can inject the faults a
// real endpoint has: 429 with Retry-After, 500, malformed JSON, a stream cut
// in the middle.
//
//	srv := fakellm.New(fakellm.Script{
//		fakellm.CallTool("ReadInvoice", `{"id":"INV-9"}`),
//		fakellm.Say("Paid INV-9."),
//	})
//	hs := httptest.NewServer(srv)
//	m, _ := llm.New(llm.Config{BaseURL: hs.URL + "/v1", Model: "fake"})
//
// The reply to a request is chosen by its turn — the number of assistant
// messages it already holds — so a retried request gets the same answer and
// a resumed conversation lines up with the script. `cairn fakellm` runs it
// as a process.
package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Reply is what the server answers for one turn.
type Reply struct {
	// Content is the assistant's text.
	Content string
	// ToolCalls are the tools the assistant asks for.
	ToolCalls []ToolCall
	// Status, when not 0 or 200, answers with this HTTP status and an
	// OpenAI-style error body (e.g. 429, 500).
	Status int
	// RetryAfter is sent with a non-200 Status.
	RetryAfter time.Duration
	// Malformed answers 200 with a body that is not JSON.
	Malformed bool
	// CutAfter, for a streamed answer, closes the connection after this
	// many chunks, without the final ones.
	CutAfter int
	// PromptTokens, CompletionTokens and CachedTokens are reported as the
	// usage (defaults: the request's size / 4, the answer's size / 4 + 1,
	// 0).
	PromptTokens, CompletionTokens, CachedTokens int64
	// Faults are replies served, in order, before this one for the same
	// turn: a turn with Faults [{Status: 429}] fails once, then answers.
	Faults []Reply
}

// ToolCall is a tool call in a Reply.
type ToolCall struct {
	ID        string
	Name      string
	Arguments string
}

// Say returns a Reply with text.
func Say(text string) Reply { return Reply{Content: text} }

// CallTool returns a Reply asking for one tool call.
func CallTool(name, args string) Reply {
	return Reply{ToolCalls: []ToolCall{{Name: name, Arguments: args}}}
}

// CallTools returns a Reply asking for several tool calls at once.
func CallTools(calls ...ToolCall) Reply { return Reply{ToolCalls: calls} }

// Script answers by turn: turn i (0-based) gets element i; turns past the
// end get the last element.
type Script []Reply

// Request is a request as the script sees it.
type Request struct {
	// Turn is the number of assistant messages in the request.
	Turn int
	// Seq numbers the requests the server received, from 0.
	Seq int64
	// Model and Stream are the request's.
	Model  string
	Stream bool
	// Body is the raw request (its head only, with HeadOnly).
	Body []byte
	// Size is the body's size.
	Size int64
}

// Messages decodes the request's messages (a full parse: the server
// itself never needs one). A HeadOnly server's requests cannot be decoded.
func (r Request) Messages() ([]map[string]any, error) {
	var v struct {
		Messages []map[string]any `json:"messages"`
	}
	err := json.Unmarshal(r.Body, &v)
	return v.Messages, err
}

// Server is the fake endpoint: an http.Handler.
type Server struct {
	respond func(Request) Reply
	// ChunkDelay spaces streamed chunks (default 0), so watchers see them arrive.
	ChunkDelay time.Duration

	calls    atomic.Int64
	lastSize atomic.Int64
	mu       sync.Mutex
	faults   map[int]int // turn → faults served
	seen     []Request
	keep     bool
	last     *Request
	keepLast bool
	bySeq    bool
	headOnly bool
	timed    bool
	timings  []Timing
}

// Timing is what the server spent on one request (KeepTimings): from the
// request's headers to its body read, and to its answer written.
type Timing struct {
	Seq      int64
	Size     int64
	Received time.Duration
	Total    time.Duration
}

// New returns a server answering from the script.
func New(s Script) *Server {
	return NewFunc(func(r Request) Reply {
		if len(s) == 0 {
			return Say("")
		}
		return s[min(r.Turn, len(s)-1)]
	})
}

// NewFunc returns a server answering with respond.
func NewFunc(respond func(Request) Reply) *Server {
	return &Server{respond: respond, faults: map[int]int{}}
}

// KeepRequests makes the server remember every request (Requests).
func (s *Server) KeepRequests() *Server { s.keep = true; return s }

// BySequence makes the server skip counting a request's turn (a scan of
// the whole request; Request.Turn is then -1): for a script that answers by
// Request.Seq, such as a benchmark's, whose requests are large.
func (s *Server) BySequence() *Server { s.bySeq = true; return s }

// HeadOnly makes the server read each request's body without keeping it:
// Request.Body holds only its first bytes (the model and stream settings,
// which Cairn's request builder writes first), so that a server answering
// large requests does not allocate them. The turn is still counted, on the
// fly. KeepRequests and KeepLast keep whole bodies regardless.
func (s *Server) HeadOnly() *Server { s.headOnly = true; return s }

// KeepTimings makes the server record what it spends on each request
// (Timings).
func (s *Server) KeepTimings() *Server { s.timed = true; return s }

// Timings returns the requests' timings (with KeepTimings), in order.
func (s *Server) Timings() []Timing {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Timing(nil), s.timings...)
}

// KeepLast makes the server remember the last request (Last).
func (s *Server) KeepLast() *Server { s.keepLast = true; return s }

// LastSize returns the size of the last request's body.
func (s *Server) LastSize() int64 { return s.lastSize.Load() }

// Last returns the last request received (with KeepLast).
func (s *Server) Last() Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.last == nil {
		return Request{}
	}
	return *s.last
}

// Calls returns how many chat requests the server has answered (faults
// included).
func (s *Server) Calls() int64 { return s.calls.Load() }

// Requests returns the requests received (with KeepRequests).
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.seen...)
}

var (
	assistantRole = []byte(`"role":"assistant"`)
	keyModel      = []byte(`"model":`)
	keyStream     = []byte(`"stream":true`)
)

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasSuffix(r.URL.Path, "/chat/completions") {
		writeError(w, http.StatusNotFound, "not_found", "the fake serves /v1/chat/completions only")
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, http.StatusMethodNotAllowed, "invalid_request_error", "POST only")
		return
	}
	t0 := time.Now()
	body, size, turn, err := s.readBody(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}
	received := time.Since(t0)
	s.lastSize.Store(size)
	seq := s.calls.Add(1) - 1
	req := Request{Turn: turn, Seq: seq, Body: body, Size: size, Model: model(body), Stream: streamed(body)}
	if s.timed {
		defer func() {
			s.mu.Lock()
			s.timings = append(s.timings, Timing{Seq: seq, Size: size, Received: received, Total: time.Since(t0)})
			s.mu.Unlock()
		}()
	}
	if s.keep || s.keepLast {
		s.mu.Lock()
		if s.keep {
			s.seen = append(s.seen, req)
		}
		if s.keepLast {
			s.last = &req
		}
		s.mu.Unlock()
	}
	rep := s.respond(req)
	s.mu.Lock()
	if n := s.faults[req.Turn]; n < len(rep.Faults) {
		s.faults[req.Turn] = n + 1
		rep = rep.Faults[n]
	}
	s.mu.Unlock()
	switch {
	case rep.Status != 0 && rep.Status != http.StatusOK:
		if rep.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.FormatFloat(rep.RetryAfter.Seconds(), 'f', -1, 64))
		}
		writeError(w, rep.Status, "fake_error", fmt.Sprintf("the fake answers %d for turn %d", rep.Status, req.Turn))
	case rep.Malformed:
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id": "chatcmpl-broken", "choices": [{"message": `)
	case req.Stream:
		s.stream(w, req, rep)
	default:
		s.complete(w, req, rep)
	}
}

// headBytes is how much of a body HeadOnly keeps.
const headBytes = 4 << 10

// readBody reads a request's body and returns it (its head only, with
// HeadOnly), its size, and its turn (-1 with BySequence).
func (s *Server) readBody(r *http.Request) (body []byte, size int64, turn int, err error) {
	turn = -1
	if !s.headOnly || s.keep || s.keepLast {
		var buf bytes.Buffer
		if r.ContentLength > 0 && r.ContentLength < 64<<20 {
			buf.Grow(int(r.ContentLength) + 1)
		}
		if _, err := buf.ReadFrom(r.Body); err != nil {
			return nil, 0, 0, err
		}
		body = buf.Bytes()
		if !s.bySeq {
			turn = bytes.Count(body, assistantRole)
		}
		return body, int64(len(body)), turn, nil
	}
	// Streamed through a small buffer: the head is kept, the assistant
	// messages are counted across reads (a match may straddle two).
	keep := len(assistantRole) - 1
	scan := make([]byte, keep+32<<10) // the last keep bytes read, then the next read
	tail, count := 0, 0
	for {
		n, rerr := r.Body.Read(scan[tail:])
		if n > 0 {
			data := scan[tail : tail+n]
			if len(body) < headBytes {
				body = append(body, data[:min(n, headBytes-len(body))]...)
			}
			joined := scan[:tail+n]
			if !s.bySeq {
				count += bytes.Count(joined, assistantRole)
			}
			tail = copy(scan, joined[max(0, len(joined)-keep):])
			size += int64(n)
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, 0, 0, rerr
		}
	}
	if !s.bySeq {
		turn = count
	}
	return body, size, turn, nil
}

// model reads the model name near the start of the body (the request
// builders Cairn uses put the short fields first).
func model(body []byte) string {
	i := bytes.Index(body, keyModel)
	if i < 0 {
		return ""
	}
	var m string
	dec := json.NewDecoder(bytes.NewReader(body[i+len(keyModel):]))
	_ = dec.Decode(&m)
	return m
}

func streamed(body []byte) bool {
	head := body
	if i := bytes.Index(body, []byte(`"messages":`)); i >= 0 {
		head = body[:i]
	}
	return bytes.Contains(head, keyStream) || (!bytes.Contains(body, []byte(`"messages":`)) && bytes.Contains(body, keyStream))
}

func (s *Server) usage(req Request, rep Reply) map[string]any {
	prompt, completion := rep.PromptTokens, rep.CompletionTokens
	if prompt == 0 {
		prompt = req.Size/4 + 1
	}
	if completion == 0 {
		n := len(rep.Content)
		for _, tc := range rep.ToolCalls {
			n += len(tc.Name) + len(tc.Arguments)
		}
		completion = int64(n/4 + 1)
	}
	return map[string]any{"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion,
		"prompt_tokens_details": map[string]any{"cached_tokens": rep.CachedTokens}}
}

func callID(turn, i int, tc ToolCall) string {
	if tc.ID != "" {
		return tc.ID
	}
	return fmt.Sprintf("call_%d_%d", turn, i)
}

func (s *Server) complete(w http.ResponseWriter, req Request, rep Reply) {
	msg := map[string]any{"role": "assistant", "content": rep.Content}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
		var calls []map[string]any
		for i, tc := range rep.ToolCalls {
			calls = append(calls, map[string]any{"id": callID(req.Turn, i, tc), "type": "function",
				"function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}})
		}
		msg["tool_calls"] = calls
	}
	writeJSON(w, map[string]any{"id": fmt.Sprintf("chatcmpl-fake-%d", req.Turn), "object": "chat.completion", "created": 0,
		"model": modelOr(req.Model), "choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
		"usage": s.usage(req, rep)})
}

func modelOr(m string) string {
	if m == "" {
		return "fake"
	}
	return m
}

// stream writes the answer as server-sent chunks: the text in pieces of a
// few words, each tool call's name then its arguments in two pieces, the
// finish, the usage, [DONE].
func (s *Server) stream(w http.ResponseWriter, req Request, rep Reply) {
	w.Header().Set("Content-Type", "text/event-stream")
	flusher, _ := w.(http.Flusher)
	id := fmt.Sprintf("chatcmpl-fake-%d", req.Turn)
	sent := 0
	send := func(v map[string]any) bool {
		if rep.CutAfter > 0 && sent >= rep.CutAfter {
			return false
		}
		v["id"], v["object"], v["created"], v["model"] = id, "chat.completion.chunk", 0, modelOr(req.Model)
		b, _ := json.Marshal(v)
		fmt.Fprintf(w, "data: %s\n\n", b)
		if flusher != nil {
			flusher.Flush()
		}
		sent++
		if s.ChunkDelay > 0 {
			time.Sleep(s.ChunkDelay)
		}
		return true
	}
	delta := func(d map[string]any, finish any) map[string]any {
		return map[string]any{"choices": []any{map[string]any{"index": 0, "delta": d, "finish_reason": finish}}}
	}
	cut := func() {
		if hj, ok := w.(http.Hijacker); ok {
			if conn, _, err := hj.Hijack(); err == nil {
				_ = conn.Close() // the connection drops mid-stream
			}
		}
	}
	if !send(delta(map[string]any{"role": "assistant", "content": ""}, nil)) {
		cut()
		return
	}
	for _, piece := range pieces(rep.Content) {
		if !send(delta(map[string]any{"content": piece}, nil)) {
			cut()
			return
		}
	}
	for i, tc := range rep.ToolCalls {
		first := map[string]any{"index": i, "id": callID(req.Turn, i, tc), "type": "function", "function": map[string]any{"name": tc.Name, "arguments": ""}}
		if !send(delta(map[string]any{"tool_calls": []any{first}}, nil)) {
			cut()
			return
		}
		half := len(tc.Arguments) / 2
		for _, part := range []string{tc.Arguments[:half], tc.Arguments[half:]} {
			if !send(delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": part}}}}, nil)) {
				cut()
				return
			}
		}
	}
	finish := "stop"
	if len(rep.ToolCalls) > 0 {
		finish = "tool_calls"
	}
	if !send(delta(map[string]any{}, finish)) || !send(map[string]any{"choices": []any{}, "usage": s.usage(req, rep)}) {
		cut()
		return
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// pieces splits text into a few words per piece.
func pieces(text string) []string {
	if text == "" {
		return nil
	}
	words := strings.SplitAfter(text, " ")
	var out []string
	for i := 0; i < len(words); i += 3 {
		out = append(out, strings.Join(words[i:min(i+3, len(words))], ""))
	}
	return out
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	b, _ := json.Marshal(v)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": typ}})
	_, _ = w.Write(b)
}
