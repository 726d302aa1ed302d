// Package llm is the model-call activity: one call to an OpenAI-compatible
// chat-completions endpoint (OpenAI, Azure OpenAI, vLLM, Ollama, llama.cpp's
// server, OpenRouter), on github.com/openai/openai-go, as a Cairn activity.
//
// Its input is an agent's transcript as recorded — a reference to a chain of
// content-addressed chunks (history.EncodingTranscript), each turn's chunk
// holding only the entries that turn added — and it rebuilds the exact
// request from it, keeping what it built from earlier chunks, so a turn
// costs its new bytes however long the conversation is. Its result is the
// assistant's message with the call's usage (prompt, completion and cached
// tokens), which it also reports to the engine (activities.RecordUsage),
// failed attempts included, for the run's token and cost ledger and budget.
//
//	m, err := llm.New(llm.Config{BaseURL: os.Getenv("OPENAI_BASE_URL"), Model: "gpt-4o-mini"}) // key from $OPENAI_API_KEY
//	err = m.Register(w) // on the worker: the activity "llm.Chat", metered
//
// Workflow code does not call it directly: the agent loop (sdk/agent) does.
//
// Errors are classified for the engine's retries: 429 and 5xx are
// retryable, and a Retry-After the server sends sets the next attempt's
// delay; other 4xx are non-retryable (ModelRequestRejected); an endpoint
// that cannot be reached and a timeout are retryable (ModelUnavailable),
// and so are a malformed answer and a cut stream (ModelResponseMalformed). A streamed call
// publishes its tokens live (activities.Stream): watchers see them, and only
// the final message is recorded.
package llm

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/cairnflow/cairn/activities"
	"github.com/cairnflow/cairn/history"
)

// The conversation types are the stored transcript format.
type (
	// Message is one chat message.
	Message = history.ChatMessage
	// ToolCall is a model's request to call a tool.
	ToolCall = history.ToolCall
	// ToolSpec describes a tool to the model.
	ToolSpec = history.ToolSpec
	// Settings are what a call sends besides the messages.
	Settings = history.ChatConfig
	// Result is a call's result: the assistant's message and usage.
	Result = history.ModelResult
	// Usage is a call's token count and cost.
	Usage = history.Usage
)

// ActivityName is the activity type the model call is registered under.
const ActivityName = "llm.Chat"

// Failure types the model call reports.
const (
	// FailureRejected: the endpoint refused the request (4xx other than
	// 429): retrying cannot help.
	FailureRejected = "ModelRequestRejected"
	// FailureUnavailable: 429 or 5xx (retried after Retry-After when
	// sent), a timeout, or an endpoint that could not be reached (refused,
	// reset, hung up, unknown host): retried.
	FailureUnavailable = "ModelUnavailable"
	// FailureMalformed: the answer could not be read; retried.
	FailureMalformed = "ModelResponseMalformed"
	// FailureTranscript: the input is not a transcript; not retried.
	FailureTranscript = "InvalidTranscript"
	// FailureEmptyAnswer: the model answered with neither text nor a tool
	// call (and the transcript's settings do not allow that); retried.
	FailureEmptyAnswer = "ModelEmptyAnswer"
)

// Config configures a Model.
type Config struct {
	// BaseURL is the endpoint's base, e.g. "https://api.openai.com/v1" or
	// "http://127.0.0.1:11434/v1" (default: $OPENAI_BASE_URL, else OpenAI).
	BaseURL string
	// APIKeyEnv names the environment variable holding the API key
	// (default OPENAI_API_KEY). The key itself never goes into history.
	APIKeyEnv string
	// Model is used when the transcript names none.
	Model string
	// RequestTimeout bounds one HTTP request (default 2 minutes); the
	// activity's start-to-close timeout bounds the attempt.
	RequestTimeout time.Duration
	// HTTPClient replaces the transport (tests, proxies).
	HTTPClient *http.Client
	// CacheBytes bounds the requests kept built from earlier turns
	// (default 32 MiB).
	CacheBytes int
}

// Model calls one endpoint. It is safe for concurrent use.
type Model struct {
	cfg    Config
	client openai.Client
	cache  *prefixCache
}

// New returns a Model for cfg.
func New(cfg Config) (*Model, error) {
	if cfg.APIKeyEnv == "" {
		cfg.APIKeyEnv = "OPENAI_API_KEY"
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = os.Getenv("OPENAI_BASE_URL")
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = "https://api.openai.com/v1"
	}
	if cfg.RequestTimeout <= 0 {
		cfg.RequestTimeout = 2 * time.Minute
	}
	if cfg.CacheBytes <= 0 {
		cfg.CacheBytes = 32 << 20
	}
	key := os.Getenv(cfg.APIKeyEnv)
	if key == "" {
		key = "none" // local servers (vLLM, Ollama, the fake) take any key
	}
	opts := []option.RequestOption{option.WithBaseURL(cfg.BaseURL), option.WithAPIKey(key), option.WithMaxRetries(0)}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &Model{cfg: cfg, client: openai.NewClient(opts...), cache: newPrefixCache(cfg.CacheBytes)}, nil
}

// Registrar is what a worker offers to register an activity.
type Registrar interface {
	RegisterActivity(fn any, opts ...activities.Options) error
}

// Register registers the model call on w as ActivityName, metered (it
// reports usage and counts against the run's budget).
func (m *Model) Register(w Registrar) error {
	return w.RegisterActivity(m.Chat, activities.Options{Name: ActivityName, Metered: true})
}

// Chat is the activity: it rebuilds the request from the transcript the
// payload references, calls the endpoint (streaming when the transcript's
// settings ask for it) and returns the assistant's answer as a transcript
// payload extending the input — the answer's entry (the message and its
// CallInfo) on top of the conversation it answers — so that history
// records the answer once: as the chunk the next turn's input extends.
// Decode it with Answer.
func (m *Model) Chat(ctx context.Context, in history.Payload) (history.Payload, error) {
	if in.Encoding != history.EncodingTranscript {
		return history.Payload{}, activities.NewNonRetryableError(fmt.Sprintf("the model call's input is %q, not a transcript", in.Encoding), FailureTranscript)
	}
	r, err := m.call(ctx, in)
	if err != nil {
		return history.Payload{}, err
	}
	data, err := history.AppendTranscript(nil, r.Answer())
	if err != nil {
		return history.Payload{}, err
	}
	out := history.Payload{Encoding: history.EncodingTranscript, Ref: in.StoredRef(), Data: data}
	m.remember(ctx, in, out)
	return out, nil
}

// checkAnswer fails an empty answer — no text, no tool call — unless the
// transcript allows it: a model that answers nothing is failing, and the
// call is retried (FailureEmptyAnswer) rather than ending an agent's run
// with an empty final answer. Its usage was recorded already.
func checkAnswer(r Result, allowEmpty bool) error {
	msg := r.Message
	if allowEmpty || len(msg.ToolCalls) > 0 || strings.TrimSpace(msg.Content) != "" {
		return nil
	}
	return activities.NewApplicationError(fmt.Sprintf("the model answered with neither text nor a tool call (finish reason %q)", r.FinishReason),
		FailureEmptyAnswer)
}

// Answer decodes Chat's result (its last chunk's entries, as workers
// resolve it) into the call's answer.
func Answer(p history.Payload) (Result, error) {
	entries, err := history.DecodeTranscript(p.Data)
	if err != nil {
		return Result{}, err
	}
	r, ok := history.AnswerOf(entries)
	if !ok {
		return Result{}, fmt.Errorf("%w: the model call's result holds no message", history.ErrInvalid)
	}
	return r, nil
}

// call makes the call and returns its answer.
func (m *Model) call(ctx context.Context, in history.Payload) (Result, error) {
	req, err := m.build(ctx, in)
	if err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.RequestTimeout)
	defer cancel()
	ctx, span := m.callSpan(ctx, req)
	var r Result
	if req.settings.Stream {
		r, err = m.stream(ctx, req)
	} else {
		r, err = m.complete(ctx, req)
	}
	if err == nil {
		err = checkAnswer(r, req.settings.AllowEmptyAnswer)
	}
	endCall(span, r, err)
	if err != nil {
		return Result{}, err
	}
	return r, nil
}

// complete makes a call without streaming.
func (m *Model) complete(ctx context.Context, req *request) (Result, error) {
	var raw *http.Response
	resp, err := m.client.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{},
		append(req.options(), option.WithResponseInto(&raw))...)
	if err != nil {
		return Result{}, classify(err)
	}
	r, err := resultOf(resp)
	if err != nil {
		return Result{}, err
	}
	activities.RecordUsage(ctx, r.Usage)
	return r, nil
}

// resultOf turns the endpoint's answer into a Result.
func resultOf(resp *openai.ChatCompletion) (Result, error) {
	if resp == nil || len(resp.Choices) == 0 {
		return Result{}, activities.NewApplicationError("the model answered without a choice", FailureMalformed)
	}
	c := resp.Choices[0]
	msg := Message{Role: "assistant", Content: c.Message.Content}
	for _, tc := range c.Message.ToolCalls {
		msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	return Result{Message: msg, Usage: usageOf(resp.Model, resp.Usage), FinishReason: c.FinishReason, Model: resp.Model, ID: resp.ID}, nil
}

func usageOf(model string, u openai.CompletionUsage) Usage {
	return Usage{Model: model, PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens,
		CachedTokens: u.PromptTokensDetails.CachedTokens}
}

// stream makes a streaming call, publishing the pieces as they come.
func (m *Model) stream(ctx context.Context, req *request) (Result, error) {
	s := m.client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{}, req.options()...)
	defer s.Close()
	acc := openai.ChatCompletionAccumulator{}
	var usage Usage
	for s.Next() {
		chunk := s.Current()
		acc.AddChunk(chunk)
		if chunk.Usage.PromptTokens > 0 || chunk.Usage.CompletionTokens > 0 {
			usage = usageOf(chunk.Model, chunk.Usage)
		}
		for _, c := range chunk.Choices {
			if c.Delta.Content != "" {
				activities.Stream(ctx, activities.StreamDelta{Kind: "text", Text: c.Delta.Content})
			}
			for _, tc := range c.Delta.ToolCalls {
				activities.Stream(ctx, activities.StreamDelta{Kind: "tool_call", Text: tc.Function.Arguments, ToolCallIndex: int(tc.Index),
					ToolCallID: tc.ID, ToolName: tc.Function.Name})
			}
		}
	}
	if err := s.Err(); err != nil {
		activities.RecordUsage(ctx, usage) // what a cut stream reported before it ended
		return Result{}, classify(err)
	}
	if !sawDone(&acc) {
		activities.RecordUsage(ctx, usage)
		return Result{}, activities.NewApplicationError("the stream ended before the answer was complete", FailureMalformed)
	}
	r, err := resultOf(&acc.ChatCompletion)
	if err != nil {
		return Result{}, err
	}
	if r.Usage.Tokens() == 0 {
		r.Usage = usage
	}
	activities.RecordUsage(ctx, r.Usage)
	return r, nil
}

// sawDone reports whether the stream delivered a finished choice.
func sawDone(acc *openai.ChatCompletionAccumulator) bool {
	return len(acc.Choices) > 0 && acc.Choices[0].FinishReason != ""
}

// classify turns a client error into an activity error the engine retries
// (or not) the right way.
func classify(err error) error {
	var apiErr *openai.Error
	if errors.As(err, &apiErr) {
		msg := fmt.Sprintf("model endpoint answered %d: %s", apiErr.StatusCode, apiErr.Message)
		if apiErr.StatusCode == http.StatusTooManyRequests || apiErr.StatusCode >= 500 {
			return activities.WithRetryAfter(activities.NewApplicationError(msg, FailureUnavailable), retryAfter(apiErr.Response))
		}
		return activities.NewNonRetryableError(msg, FailureRejected)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return activities.NewApplicationError("the model call timed out: "+err.Error(), FailureUnavailable)
	}
	var se interface{ Timeout() bool }
	if errors.As(err, &se) && se.Timeout() {
		return activities.NewApplicationError("the model call timed out: "+err.Error(), FailureUnavailable)
	}
	if errors.Is(err, context.Canceled) {
		return activities.NewApplicationError("the model call was canceled: "+err.Error(), FailureUnavailable)
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The request did not get an answer: refused, reset, hung up, a
		// name that does not resolve — the endpoint, not its answer.
		return activities.NewApplicationError("the model endpoint is unreachable: "+err.Error(), FailureUnavailable)
	}
	return activities.NewApplicationError("the model's answer could not be read: "+err.Error(), FailureMalformed)
}

// retryAfter reads a Retry-After header: seconds, or an HTTP date.
func retryAfter(resp *http.Response) time.Duration {
	if resp == nil {
		return 0
	}
	v := resp.Header.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil && s > 0 {
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(time.Until(t), 0)
	}
	return 0
}
