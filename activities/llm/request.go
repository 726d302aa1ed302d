package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"

	lru "github.com/hashicorp/golang-lru/v2"
	"github.com/openai/openai-go/v3/option"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/history"
)

// Building the request. A transcript is a chain of chunks; the request's
// "messages" are the JSON of every message entry, in order. The model keeps,
// per chunk it has seen, the JSON built so far (a prefix) and the settings,
// so that the next turn — a chunk extending the last one — costs the JSON
// of its own new messages plus one copy of the prefix.

// prefix is the request state after one chunk of a transcript.
type prefix struct {
	buf      *growBuf // messages JSON, comma-separated, up to n bytes
	n        int
	messages int
	settings Settings
}

// growBuf is a buffer several prefixes share: a prefix may append in place
// only when it ends where the buffer ends (nobody extended it before).
type growBuf struct {
	mu sync.Mutex
	b  []byte
}

// extend returns the prefix p followed by the JSON of entries. A message
// whose content is a reference (a tool's result) is read from src.
func (p prefix) extend(ctx context.Context, src history.ChunkSource, entries []history.TranscriptEntry) (prefix, error) {
	var add []byte
	n := p.messages
	for _, e := range entries {
		if e.Config != nil {
			p.settings = *e.Config
			continue
		}
		msg := e.Message
		if e.Content != nil {
			m, err := history.EntryMessage(ctx, src, e)
			if err != nil {
				if errors.Is(err, history.ErrInvalid) {
					return prefix{}, activities.NewNonRetryableError(err.Error(), FailureTranscript)
				}
				return prefix{}, fmt.Errorf("llm: read the transcript: %w", err)
			}
			msg = &m
		}
		b, err := messageJSON(msg)
		if err != nil {
			return prefix{}, err
		}
		if n > 0 {
			add = append(add, ',')
		}
		add = append(add, b...)
		n++
	}
	out := prefix{messages: n, settings: p.settings}
	if p.buf != nil {
		p.buf.mu.Lock()
		if len(p.buf.b) == p.n { // nobody extended this prefix in place yet
			p.buf.b = append(p.buf.b, add...)
			out.buf, out.n = p.buf, len(p.buf.b)
		}
		p.buf.mu.Unlock()
	}
	if out.buf == nil {
		b := make([]byte, 0, p.n+len(add)+len(add)/2+64)
		if p.buf != nil {
			p.buf.mu.Lock()
			b = append(b, p.buf.b[:p.n]...)
			p.buf.mu.Unlock()
		}
		b = append(b, add...)
		out.buf, out.n = &growBuf{b: b}, len(b)
	}
	return out, nil
}

// view returns the prefix's messages JSON. It stays valid: a later extend
// in place writes only past p.n, and a reallocation leaves this array be.
func (p prefix) view() []byte {
	if p.buf == nil {
		return nil
	}
	p.buf.mu.Lock()
	defer p.buf.mu.Unlock()
	return p.buf.b[:p.n:p.n]
}

// prefixCache maps a chunk hash to the prefix after it, bounded by the
// bytes of the prefixes it keeps (a prefix shares its buffer with the one
// it extended, so the bound is conservative).
type prefixCache struct {
	mu    sync.Mutex
	lru   *lru.Cache[string, prefix]
	bytes int
	max   int
}

func newPrefixCache(maxBytes int) *prefixCache {
	c := &prefixCache{max: maxBytes}
	c.lru, _ = lru.NewWithEvict[string, prefix](1<<16, func(_ string, p prefix) { c.bytes -= p.n })
	return c
}

func (c *prefixCache) get(h []byte) (prefix, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Get(string(h))
}

func (c *prefixCache) put(h []byte, p prefix) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.lru.Contains(string(h)) {
		return
	}
	c.lru.Add(string(h), p)
	c.bytes += p.n
	for c.bytes > c.max && c.lru.Len() > 1 {
		c.lru.RemoveOldest()
	}
}

// request is a built request: head, the messages JSON (a view of the
// cached prefix: never copied), tail.
type request struct {
	head, messages, tail []byte
	settings             Settings
}

// body returns the request's body as a reader (no copy of the messages). It
// is an io.WriterTo that writes each part with one call.
func (r *request) body() io.Reader {
	return io.MultiReader(bytes.NewReader(r.head), bytes.NewReader(r.messages), bytes.NewReader(r.tail))
}

// options are the request options that send the body. openai-go is given a
// placeholder, which its own options may edit (a streaming call sets
// "stream", which the head already says), and a middleware sends the real
// body in its place: openai-go wraps a body in a reader that hides
// io.WriterTo, and net/http then copies it through a 32 KB buffer, in two
// system calls per 32 KB, or, given a length, in 32 KB calls. At turn 1,000
// of `cairn bench agent` (a 1.1 MB conversation), those calls cost the
// worker 0.5 ms of CPU per request and made up most of turn 1,000's extra
// time (docs/performance.md). The body is sent chunked, its length unsaid,
// as it was before.
func (r *request) options() []option.RequestOption {
	return []option.RequestOption{option.WithRequestBody("application/json", []byte("{}")), option.WithMiddleware(r.sendBody)}
}

// sendBody is the middleware of options.
func (r *request) sendBody(hr *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if hr.Body != nil {
		_ = hr.Body.Close()
	}
	hr.Body = io.NopCloser(r.body()) // a WriterTo: net/http unwraps a NopCloser
	hr.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(r.body()), nil }
	hr.ContentLength = 0 // unknown (the placeholder's length was set)
	return next(hr)
}

// build rebuilds the request the transcript payload stands for.
func (m *Model) build(ctx context.Context, in history.Payload) (*request, error) {
	p, err := m.prefixFor(ctx, in)
	if err != nil {
		return nil, err
	}
	s := p.settings
	if s.Model == "" {
		s.Model = m.cfg.Model
	}
	if s.Model == "" {
		return nil, activities.NewNonRetryableError("no model named: set llm.Config.Model or the agent's Model", FailureTranscript)
	}
	head, err := requestHead(s)
	if err != nil {
		return nil, err
	}
	return &request{head: head, messages: p.view(), tail: []byte("]}"), settings: s}, nil
}

// prefixFor walks the chunk chain back to a chunk it has built (or the
// root) and builds forward from there.
func (m *Model) prefixFor(ctx context.Context, in history.Payload) (prefix, error) {
	var chain []history.Chunk
	var hashes [][]byte
	base := prefix{}
	if len(in.Data) > 0 { // a payload not normalised by an engine: one more chunk
		chain = append(chain, history.Chunk{Parent: in.Ref, Data: in.Data})
		hashes = append(hashes, in.StoredRef())
	}
	src := activities.Chunks(ctx)
	for h := in.Ref; len(h) > 0 && !history.IsRoot(h); {
		if p, ok := m.cache.get(h); ok {
			base = p
			break
		}
		if src == nil {
			return prefix{}, fmt.Errorf("llm: the transcript is stored by reference and no chunk source is at hand: %w", history.ErrChunkNotFound)
		}
		c, err := src.Chunk(ctx, h)
		if err != nil {
			return prefix{}, fmt.Errorf("llm: read the transcript: %w", err)
		}
		chain = append(chain, c)
		hashes = append(hashes, h)
		h = c.Parent
	}
	p := base
	for i := len(chain) - 1; i >= 0; i-- {
		entries, err := history.DecodeTranscript(chain[i].Data)
		if err != nil {
			return prefix{}, activities.NewNonRetryableError(err.Error(), FailureTranscript)
		}
		if p, err = p.extend(ctx, src, entries); err != nil {
			return prefix{}, err
		}
		m.cache.put(hashes[i], p)
	}
	return p, nil
}

// remember caches the prefix after a chunk this worker wrote itself (a
// call's answer, extending its input's prefix), so that the next turn,
// which extends it, need not fetch it back.
func (m *Model) remember(ctx context.Context, in history.Payload, answer history.Payload) {
	p, ok := m.cache.get(in.StoredRef())
	if !ok {
		return
	}
	entries, err := history.DecodeTranscript(answer.Data)
	if err != nil {
		return
	}
	if p, err = p.extend(ctx, nil, entries); err == nil {
		m.cache.put(answer.StoredRef(), p)
	}
}

// requestHead writes the chat-completions request up to its messages. The
// short fields come first, so that a server can read them without scanning
// the messages.
func requestHead(s Settings) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(`{"model":`)
	writeJSON(&b, s.Model)
	if s.Stream {
		b.WriteString(`,"stream":true,"stream_options":{"include_usage":true}`)
	}
	if s.Temperature != nil {
		b.WriteString(`,"temperature":`)
		writeJSON(&b, *s.Temperature)
	}
	if s.MaxTokens > 0 {
		b.WriteString(`,"max_tokens":`)
		writeJSON(&b, s.MaxTokens)
	}
	if len(s.Tools) > 0 {
		b.WriteString(`,"tools":[`)
		for i, t := range s.Tools {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(`{"type":"function","function":{"name":`)
			writeJSON(&b, t.Name)
			if t.Description != "" {
				b.WriteString(`,"description":`)
				writeJSON(&b, t.Description)
			}
			params := t.Parameters
			if params == "" {
				params = `{"type":"object"}`
			}
			if !json.Valid([]byte(params)) {
				return nil, activities.NewNonRetryableError(fmt.Sprintf("tool %s: its parameters are not a JSON schema", t.Name), FailureTranscript)
			}
			b.WriteString(`,"parameters":`)
			b.WriteString(params)
			b.WriteString(`}}`)
		}
		b.WriteByte(']')
	}
	b.WriteString(`,"messages":[`)
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) {
	enc, _ := json.Marshal(v) // strings and numbers: cannot fail
	b.Write(enc)
}

// wireMessage is a message as the chat-completions API takes it.
type wireMessage struct {
	Role       string         `json:"role"`
	Content    *string        `json:"content"`
	Name       string         `json:"name,omitempty"`
	ToolCalls  []wireToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

type wireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function wireFunction `json:"function"`
}

type wireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// messageJSON encodes one message, deterministically.
func messageJSON(m *history.ChatMessage) ([]byte, error) {
	if m == nil || m.Role == "" {
		return nil, activities.NewNonRetryableError("a transcript message has no role", FailureTranscript)
	}
	w := wireMessage{Role: m.Role, Name: m.Name, ToolCallID: m.ToolCallID}
	if m.Content != "" || len(m.ToolCalls) == 0 {
		c := m.Content
		w.Content = &c
	}
	for _, tc := range m.ToolCalls {
		args := tc.Arguments
		if args == "" {
			args = "{}"
		}
		w.ToolCalls = append(w.ToolCalls, wireToolCall{ID: tc.ID, Type: "function", Function: wireFunction{Name: tc.Name, Arguments: args}})
	}
	b, err := json.Marshal(w)
	if err != nil {
		return nil, errors.Join(activities.NewNonRetryableError("a transcript message cannot be encoded", FailureTranscript), err)
	}
	return b, nil
}
