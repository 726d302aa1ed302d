package history

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/vmihailenco/msgpack/v5"
)

// Transcripts: the stored form of an agent's conversation.
//
// A model call's input is a payload in EncodingTranscript whose bytes are a
// sequence of msgpack-encoded TranscriptEntry records — the conversation
// so far as an append-only log: messages, and the settings (model, tools,
// sampling) that apply from that point on. The agent loop appends the
// entries of each turn and sends them as a chunk extending the previous
// turn's (see chunk.go), so the log is stored once, whatever its length,
// and the engine, the CLI and the UI can read any run's conversation.
//
// These types are part of the stored format: add fields only at the end,
// never rename their msgpack names.

// EncodingTranscript names a payload holding transcript entries.
const EncodingTranscript = "cairn.transcript.v1+msgpack"

// ChatMessage is one message of a conversation, in the chat-completions
// shape: role "system", "user", "assistant" or "tool".
type ChatMessage struct {
	Role    string `msgpack:"r" json:"role"`
	Content string `msgpack:"c,omitempty" json:"content,omitempty"`
	// Name names a tool (role "tool") or a participant.
	Name string `msgpack:"n,omitempty" json:"name,omitempty"`
	// ToolCalls are the calls an assistant message asks for.
	ToolCalls []ToolCall `msgpack:"tc,omitempty" json:"tool_calls,omitempty"`
	// ToolCallID answers a tool call (role "tool").
	ToolCallID string `msgpack:"ti,omitempty" json:"tool_call_id,omitempty"`
}

// ToolCall is a model's request to call a tool.
type ToolCall struct {
	ID        string `msgpack:"i" json:"id"`
	Name      string `msgpack:"n" json:"name"`
	Arguments string `msgpack:"a,omitempty" json:"arguments,omitempty"` // JSON text, as the model wrote it
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	Name        string `msgpack:"n" json:"name"`
	Description string `msgpack:"d,omitempty" json:"description,omitempty"`
	// Parameters is the JSON schema of the tool's input (JSON text).
	Parameters string `msgpack:"p,omitempty" json:"parameters,omitempty"`
}

// ChatConfig is what a model call sends besides the messages. A config
// entry replaces the one before it.
type ChatConfig struct {
	Model       string     `msgpack:"m,omitempty" json:"model,omitempty"`
	Tools       []ToolSpec `msgpack:"t,omitempty" json:"tools,omitempty"`
	Temperature *float64   `msgpack:"te,omitempty" json:"temperature,omitempty"`
	MaxTokens   int64      `msgpack:"mt,omitempty" json:"max_tokens,omitempty"`
	// Stream asks for the answer as a live token stream.
	Stream bool `msgpack:"s,omitempty" json:"stream,omitempty"`
	// AllowEmptyAnswer accepts an answer with neither text nor a tool
	// call; without it the model call fails such an answer as a
	// retryable error (the model call's, not sent to the endpoint).
	AllowEmptyAnswer bool `msgpack:"ae,omitempty" json:"allow_empty_answer,omitempty"`
}

// TranscriptEntry is one record of a transcript: a message or a config.
// A model call's answer is an entry whose Message is the assistant's and
// whose Call says what the call returned besides. A tool's result is a
// message whose Content names the stored payload its text is read from,
// instead of a copy of it.
type TranscriptEntry struct {
	Message *ChatMessage `msgpack:"m,omitempty" json:"message,omitempty"`
	Config  *ChatConfig  `msgpack:"c,omitempty" json:"config,omitempty"`
	Call    *CallInfo    `msgpack:"k,omitempty" json:"call,omitempty"`
	// Content, on a message entry whose Message.Content is empty, says
	// that the message's content is ToolResultText of the payload stored
	// as chunk Content.Ref: a tool's result, recorded once — as the tool
	// activity's result (ActivityScheduled.ShareResult) — and referenced
	// here. The chunk is always referenced by an event of the same run
	// too (that ActivityCompleted), so whatever keeps a run's chunks keeps
	// it.
	Content *ContentRef `msgpack:"r,omitempty" json:"content_ref,omitempty"`
}

// ContentRef names a stored payload a message's text is read from.
type ContentRef struct {
	// Ref is the payload's stored reference (Payload.StoredRef).
	Ref []byte `msgpack:"r" json:"ref"`
	// Encoding is the payload's encoding.
	Encoding string `msgpack:"e,omitempty" json:"encoding,omitempty"`
}

// ToolResultText is the text a tool's result is shown to a model as: a
// string result as it is, anything else as JSON (maps with sorted keys),
// an empty result as null. It decodes msgpack (as workflow code decodes
// a value into an interface{}) and JSON payloads.
func ToolResultText(p Payload) (string, error) {
	var v any
	if len(p.Data) > 0 || p.Encoding != "" {
		switch p.Encoding {
		case "msgpack":
			if err := msgpack.NewDecoder(bytes.NewReader(p.Data)).Decode(&v); err != nil {
				return "", fmt.Errorf("%w: a tool result in msgpack: %w", ErrInvalid, err)
			}
		case "json":
			if err := json.Unmarshal(p.Data, &v); err != nil {
				return "", fmt.Errorf("%w: a tool result in json: %w", ErrInvalid, err)
			}
		default:
			return "", fmt.Errorf("%w: a tool result in encoding %q", ErrInvalid, p.Encoding)
		}
	}
	if s, ok := v.(string); ok {
		return s, nil
	}
	b, err := json.Marshal(jsonable(v))
	if err != nil {
		return fmt.Sprint(v), nil // a value JSON cannot hold (NaN): as Go prints it
	}
	return string(b), nil
}

// jsonable turns msgpack's decoded maps (map[string]any, or map[any]any)
// into what encoding/json takes.
func jsonable(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = jsonable(e)
		}
		return x
	case map[any]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[fmt.Sprint(k)] = jsonable(e)
		}
		return m
	case []any:
		for i, e := range x {
			x[i] = jsonable(e)
		}
		return x
	}
	return v
}

// EntryMessage returns an entry's message with its content, reading the
// payload a Content reference names from src.
func EntryMessage(ctx context.Context, src ChunkSource, e TranscriptEntry) (ChatMessage, error) {
	if e.Message == nil {
		return ChatMessage{}, fmt.Errorf("%w: a transcript config entry has no message", ErrInvalid)
	}
	m := *e.Message
	if e.Content == nil {
		return m, nil
	}
	if src == nil {
		return ChatMessage{}, fmt.Errorf("history: a message's content is stored by reference and no chunk source is at hand: %w", ErrChunkNotFound)
	}
	b, err := ResolveBytes(ctx, src, Payload{Ref: e.Content.Ref})
	if err != nil {
		return ChatMessage{}, fmt.Errorf("history: the content of a %s message: %w", m.Role, err)
	}
	if m.Content, err = ToolResultText(Payload{Encoding: e.Content.Encoding, Data: b}); err != nil {
		return ChatMessage{}, err
	}
	return m, nil
}

// CallInfo is what a model call returned with its message.
type CallInfo struct {
	Usage        Usage  `msgpack:"u,omitempty" json:"usage,omitempty"`
	FinishReason string `msgpack:"f,omitempty" json:"finish_reason,omitempty"`
	Model        string `msgpack:"md,omitempty" json:"model,omitempty"`
	ID           string `msgpack:"i,omitempty" json:"id,omitempty"`
}

// Answer returns a model call's answer as the transcript entry that
// records it (the message with its CallInfo).
func (r ModelResult) Answer() TranscriptEntry {
	m := r.Message
	return TranscriptEntry{Message: &m, Call: &CallInfo{Usage: r.Usage, FinishReason: r.FinishReason, Model: r.Model, ID: r.ID}}
}

// AnswerOf reads a model call's answer back from the entries of the chunk
// that records it (the last message, with its CallInfo).
func AnswerOf(entries []TranscriptEntry) (ModelResult, bool) {
	for i := len(entries) - 1; i >= 0; i-- {
		if e := entries[i]; e.Message != nil {
			r := ModelResult{Message: *e.Message}
			if e.Call != nil {
				r.Usage, r.FinishReason, r.Model, r.ID = e.Call.Usage, e.Call.FinishReason, e.Call.Model, e.Call.ID
			}
			return r, true
		}
	}
	return ModelResult{}, false
}

// AppendTranscript appends the encoding of entries to b.
func AppendTranscript(b []byte, entries ...TranscriptEntry) ([]byte, error) {
	buf := bytes.NewBuffer(b)
	enc := msgpack.NewEncoder(buf)
	for i := range entries {
		if err := enc.Encode(&entries[i]); err != nil {
			return nil, fmt.Errorf("history: encode transcript entry: %w", err)
		}
	}
	return buf.Bytes(), nil
}

// DecodeTranscript decodes a transcript's bytes (or one chunk's: a chunk
// holds whole entries) into its entries.
func DecodeTranscript(b []byte) ([]TranscriptEntry, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	var out []TranscriptEntry
	for {
		var e TranscriptEntry
		err := dec.Decode(&e)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%w: transcript entry %d: %w", ErrInvalid, len(out), err)
		}
		if (e.Message == nil) == (e.Config == nil) {
			return nil, fmt.Errorf("%w: transcript entry %d holds neither or both a message and a config", ErrInvalid, len(out))
		}
		if c := e.Content; c != nil && (e.Message == nil || e.Message.Content != "" || len(c.Ref) != HashSize) {
			return nil, fmt.Errorf("%w: transcript entry %d: a content reference needs a message without content and a %d-byte hash", ErrInvalid, len(out), HashSize)
		}
		out = append(out, e)
	}
}

// Usage is what activity attempts consumed, as their workers reported it:
// tokens, and their cost from the engine's price table when it was
// recorded. Its JSON is {"model", "promptTokens", "completionTokens",
// "cachedTokens", "costUSD", "attempts"} everywhere, read strictly
// (valuejson.go); its msgpack names are stored and never change.
type Usage struct {
	Model            string `msgpack:"m,omitempty" json:"model,omitempty"`
	PromptTokens     int64  `msgpack:"p,omitempty" json:"promptTokens,omitempty"`
	CompletionTokens int64  `msgpack:"c,omitempty" json:"completionTokens,omitempty"`
	// CachedTokens are the part of PromptTokens served from the
	// provider's prompt cache.
	CachedTokens int64 `msgpack:"k,omitempty" json:"cachedTokens,omitempty"`
	// CostUSD is the price of the tokens; 0 when the model has no price.
	CostUSD float64 `msgpack:"u,omitempty" json:"costUSD,omitempty"`
	// Attempts counts the attempts the usage is summed over, as history
	// numbers them: up to the last attempt that reported usage, earlier
	// attempts that reported none included (an activity whose attempt 4
	// was the first to report counts 4).
	Attempts int32 `msgpack:"a,omitempty" json:"attempts,omitempty"`
}

// Tokens returns prompt plus completion tokens.
func (u Usage) Tokens() int64 { return u.PromptTokens + u.CompletionTokens }

// IsZero reports whether nothing was used.
func (u Usage) IsZero() bool { return u == Usage{} }

// Add returns u plus v (v's model wins when u has none).
func (u Usage) Add(v Usage) Usage {
	if u.Model == "" {
		u.Model = v.Model
	}
	u.PromptTokens += v.PromptTokens
	u.CompletionTokens += v.CompletionTokens
	u.CachedTokens += v.CachedTokens
	u.CostUSD += v.CostUSD
	u.Attempts += v.Attempts
	return u
}

func (u *Usage) fields(v fieldVisitor) {
	v.str("model", &u.Model)
	v.int64("promptTokens", &u.PromptTokens)
	v.int64("completionTokens", &u.CompletionTokens)
	v.int64("cachedTokens", &u.CachedTokens)
	v.float64("costUSD", &u.CostUSD)
	v.int32("attempts", &u.Attempts)
}

// Budget bounds what a run may spend on metered activities (model calls).
// Zero fields mean no limit. When the run has used MaxTokens tokens, spent
// MaxCostUSD, or scheduled MaxTurns metered activities, the next metered
// activity is held and the run is paused until a person raises the budget
// or stops the run.
//
// Its JSON is {"maxTokens", "maxCostUSD", "maxTurns"} everywhere (the
// CLI, the web UI, the engine's JSON API, a JSON payload), and reading it
// is strict: a member that names no limit is an error, not a budget
// silently dropped (valuejson.go). Its msgpack names are stored and never
// change.
type Budget struct {
	MaxTokens  int64   `msgpack:"t,omitempty" json:"maxTokens,omitempty"`
	MaxCostUSD float64 `msgpack:"c,omitempty" json:"maxCostUSD,omitempty"`
	MaxTurns   int64   `msgpack:"n,omitempty" json:"maxTurns,omitempty"`
}

// IsZero reports whether the budget sets no limit.
func (b Budget) IsZero() bool { return b == Budget{} }

func (b *Budget) fields(v fieldVisitor) {
	v.int64("maxTokens", &b.MaxTokens)
	v.float64("maxCostUSD", &b.MaxCostUSD)
	v.int64("maxTurns", &b.MaxTurns)
}

// ModelResult is the result of a model call, as recorded: the assistant's
// message and what the call consumed.
type ModelResult struct {
	Message      ChatMessage `msgpack:"m" json:"message"`
	Usage        Usage       `msgpack:"u,omitempty" json:"usage,omitempty"`
	FinishReason string      `msgpack:"f,omitempty" json:"finish_reason,omitempty"`
	Model        string      `msgpack:"md,omitempty" json:"model,omitempty"`
	ID           string      `msgpack:"i,omitempty" json:"id,omitempty"`
}

// Agent conventions the engine reads to show a run's tool calls (see
// sdk/agent): a tool call's activity id, and the markers of approvals.
const (
	// ToolActivityPrefix starts the activity id of a tool call:
	// "tool:" + ToolCallKey.
	ToolActivityPrefix = "tool:"
	// MarkerApprovalRequested is recorded (id: ToolCallKey; data: an
	// ApprovalRequest) when a tool call starts waiting for a person's
	// approval.
	MarkerApprovalRequested = "cairn.agent.approval-requested"
	// MarkerApprovalDecided records the decision (data: an Approval).
	MarkerApprovalDecided = "cairn.agent.approval-decided"
	// MarkerApprovalIgnored records an approval signal that applied to no
	// call (id: the call id it named; data: an IgnoredApproval).
	MarkerApprovalIgnored = "cairn.agent.approval-ignored"
)

// ToolCallKey names calls[i], a tool call the model call number turn asked
// for, in its activity id and approval markers: "<turn>:<call id>". An id
// repeated among the calls (some model servers number calls per message,
// repeat or omit ids) gets "#<n>" for its n-th use from the second on, so
// each call keeps its own activity, markers and transcript entry.
func ToolCallKey(turn int64, calls []ToolCall, i int) string {
	n := 1
	for _, c := range calls[:i] {
		if c.ID == calls[i].ID {
			n++
		}
	}
	k := strconv.FormatInt(turn, 10) + ":" + calls[i].ID
	if n > 1 {
		k += "#" + strconv.Itoa(n)
	}
	return k
}

// Approval is a person's decision on a tool call.
type Approval struct {
	Approved bool   `msgpack:"ok" json:"approved"`
	By       string `msgpack:"by,omitempty" json:"by,omitempty"`
	Reason   string `msgpack:"why,omitempty" json:"reason,omitempty"`
}

// IgnoredApproval is an approval signal the agent received and did not
// apply: what it said (as far as it could be read) and why it was ignored.
type IgnoredApproval struct {
	CallID   string `msgpack:"id,omitempty" json:"call_id,omitempty"`
	Approved bool   `msgpack:"ok" json:"approved"`
	By       string `msgpack:"by,omitempty" json:"by,omitempty"`
	Reason   string `msgpack:"r,omitempty" json:"reason,omitempty"`
	// Why it applied to no call: no call with that id awaits approval, the
	// call was already decided, the payload is not an Approval.
	Why string `msgpack:"why" json:"why"`
}
