package engine

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/engine/machine"
	"github.com/cairnflow/cairn/history"
)

// GetTranscript implements api.Service: it reads the run's history and
// the transcript chunks its model calls reference, and lays them out in
// order — the messages each model call added, the call itself, the tool
// calls its answer asked for and what became of them.
func (e *Engine) GetTranscript(ctx context.Context, req *api.GetTranscriptRequest) (*api.GetTranscriptResponse, error) {
	if err := e.enter(); err != nil {
		return nil, err
	}
	defer e.leave()
	st, _, err := e.snapshot(ctx, req.WorkflowID, req.RunID)
	if err != nil {
		return nil, err
	}
	b, err := e.transcript(ctx, st)
	if err != nil {
		return nil, err
	}
	return &api.GetTranscriptResponse{RunID: st.RunID, Status: st.EffectiveStatus(), Items: b.items,
		Usage: *st.UsageSummary(e.opts.Pricing), Budget: st.BudgetStatus(e.opts.Pricing), Ignored: b.ignored}, nil
}

// transcript lays out the conversation of st's run from its history.
func (e *Engine) transcript(ctx context.Context, st *machine.RunState) (*transcriptBuilder, error) {
	evs, err := e.readRun(ctx, st, 1, int(st.NextEventID-1))
	if err != nil {
		return nil, err
	}
	b := &transcriptBuilder{ctx: ctx, src: chunkSource{e}, st: st, emitted: map[string]bool{}, tools: map[string]*api.ToolCallInfo{},
		toolBySched: map[int64]*api.ToolCallInfo{}, calls: map[int64]*api.ModelCallInfo{}}
	if err := b.build(ctx, evs); err != nil {
		return nil, err
	}
	for key, t := range b.tools {
		if t.ScheduledEventID == 0 { // no activity (yet): the class its tool is declared with
			e.toolEffect(st, key, t)
		}
	}
	return b, nil
}

type transcriptBuilder struct {
	ctx     context.Context
	src     history.ChunkSource
	st      *machine.RunState
	items   []api.TranscriptItem
	emitted map[string]bool
	tools   map[string]*api.ToolCallInfo // by "<turn>:<call id>"
	// toolBySched finds a tool call by its activity.
	toolBySched map[int64]*api.ToolCallInfo
	calls       map[int64]*api.ModelCallInfo // by scheduled event id
	model       string
	turn        int64
	// results counts the tool messages of the current turn by call id.
	results map[string]int
	last    *api.ModelCallInfo // the last model call, whose answer no chunk holds yet
	lastMsg *history.ChatMessage
	ignored []api.IgnoredApproval
}

func (b *transcriptBuilder) build(ctx context.Context, evs []history.Event) error {
	for _, ev := range evs {
		switch a := ev.Attrs.(type) {
		case *history.ActivityScheduled:
			if a.Metered && a.Input.Encoding == history.EncodingTranscript {
				if err := b.modelCall(ctx, ev.ID, a); err != nil {
					return err
				}
			} else if strings.HasPrefix(a.ActivityID, history.ToolActivityPrefix) {
				t := b.tool(strings.TrimPrefix(a.ActivityID, history.ToolActivityPrefix))
				t.ScheduledEventID, t.Effect, t.IdempotencyKey, t.State = ev.ID, a.Effect, a.IdempotencyKey, api.CallScheduled
				t.EffectKnown = true
				b.toolBySched[ev.ID] = t
			}
		case *history.ActivityKeyed: // the declaration of the worker that ran it applied: its class and key
			if t := b.toolBySched[a.ScheduledEventID]; t != nil {
				t.Effect = a.Effect
				if a.IdempotencyKey != "" {
					t.IdempotencyKey = a.IdempotencyKey
				}
			}
		case *history.ActivityStarted:
			b.started(a.ScheduledEventID, a.Attempt)
		case *history.ActivityCompleted:
			b.closed(a.ScheduledEventID, api.CallCompleted, a.Usage, nil, a.Result)
		case *history.ActivityDeduplicated:
			b.closed(a.ScheduledEventID, api.CallCompleted, history.Usage{}, nil, a.Result)
		case *history.ActivityResolved: // by a person or a Reconcile lookup
			switch a.Resolution {
			case history.ResolvedHappened:
				b.closed(a.ScheduledEventID, api.CallCompleted, history.Usage{}, nil, a.Result)
			case history.ResolvedFailed:
				f := history.Failure{Type: "ResolvedFailed", Message: a.Reason}
				if a.Failure != nil {
					f = *a.Failure
				}
				b.closed(a.ScheduledEventID, api.CallFailed, history.Usage{}, &f, history.Payload{})
			} // not happened: retried, still pending (its live state below)
		case *history.ActivityFailed:
			f := a.Failure
			b.started(a.ScheduledEventID, a.Attempt)
			b.closed(a.ScheduledEventID, api.CallFailed, a.Usage, &f, history.Payload{})
		case *history.ActivityTimedOut:
			f := a.LastFailure
			b.started(a.ScheduledEventID, a.Attempt)
			b.closed(a.ScheduledEventID, api.CallFailed, a.Usage, &f, history.Payload{})
		case *history.ActivityCanceled:
			b.closed(a.ScheduledEventID, api.CallFailed, a.Usage, &history.Failure{Type: "Canceled"}, history.Payload{})
		case *history.MarkerRecorded:
			b.marker(ev.ID, a)
		}
	}
	if b.lastMsg != nil {
		b.message(b.lastMsg)
	}
	for id, c := range b.calls { // pending model calls: their live state
		if a := b.st.Activities[id]; a != nil {
			c.State, c.Attempt, c.Usage, c.LastFailure = pendingState(a), a.Attempt, a.Usage, a.LastFailure
		}
	}
	for _, t := range b.tools {
		if a := b.st.Activities[t.ScheduledEventID]; a != nil && t.ScheduledEventID != 0 {
			t.State = pendingState(a)
		}
	}
	return nil
}

func pendingState(a *machine.ActivityInfo) string {
	switch a.State {
	case api.ActivityStateStarted:
		if a.Reconciling {
			return api.CallUnknown
		}
		return api.CallRunning
	case api.ActivityStateBackoff:
		return api.CallRetrying
	case api.ActivityStateHeld:
		return api.CallHeld
	case api.ActivityStateUnknown:
		return api.CallUnknown
	}
	return api.CallScheduled
}

// modelCall emits the transcript entries the call added, then the call.
func (b *transcriptBuilder) modelCall(ctx context.Context, id int64, a *history.ActivityScheduled) error {
	var chain []history.Chunk
	for h := a.Input.Ref; len(h) > 0 && !history.IsRoot(h) && !b.emitted[string(h)]; {
		c, err := b.src.Chunk(ctx, h)
		if err != nil {
			return fmt.Errorf("transcript of model call %d: %w", id, err)
		}
		b.emitted[string(h)] = true
		chain = append(chain, c)
		h = c.Parent
	}
	b.lastMsg = nil // the chunk carries the previous call's answer from here on
	for i := len(chain) - 1; i >= 0; i-- {
		entries, err := history.DecodeTranscript(chain[i].Data)
		if err != nil {
			return fmt.Errorf("%w: transcript of model call %d: %w", api.ErrInternal, id, err)
		}
		for _, en := range entries {
			if en.Config != nil {
				if en.Config.Model != "" {
					b.model = en.Config.Model
				}
				continue
			}
			m, err := history.EntryMessage(ctx, b.src, en) // a tool's result by reference: read it
			if err != nil {
				return fmt.Errorf("%w: transcript of model call %d: %w", api.ErrInternal, id, err)
			}
			b.message(&m)
		}
	}
	b.turn++
	b.results = map[string]int{}
	c := &api.ModelCallInfo{ScheduledEventID: id, ActivityType: a.ActivityType, Model: b.model, State: api.CallScheduled, Attempt: 1}
	b.calls[id] = c
	b.last = c
	b.items = append(b.items, api.TranscriptItem{Kind: api.ItemModelCall, ModelCall: c})
	return nil
}

// toolCalls returns the tool calls m asks for, known by history.ToolCallKey.
func (b *transcriptBuilder) toolCalls(m *history.ChatMessage) []*api.ToolCallInfo {
	var out []*api.ToolCallInfo
	for i, tc := range m.ToolCalls {
		t := b.tool(history.ToolCallKey(b.turn, m.ToolCalls, i))
		t.ID, t.Name, t.Arguments = tc.ID, tc.Name, tc.Arguments
		out = append(out, t)
	}
	return out
}

// message emits a message, and after an assistant message the tool calls
// it asks for.
func (b *transcriptBuilder) message(m *history.ChatMessage) {
	b.items = append(b.items, api.TranscriptItem{Kind: api.ItemMessage, Message: m})
	for _, t := range b.toolCalls(m) {
		b.items = append(b.items, api.TranscriptItem{Kind: api.ItemToolCall, ToolCall: t})
	}
	if m.Role == "tool" {
		if b.results == nil {
			// Before the run's first model call: a conversation carried
			// from the run before (a continue-as-new, sdk/agent's Carry),
			// whose calls ran there.
			b.results = map[string]int{}
		}
		// The n-th result of a repeated call id answers its n-th call.
		b.results[m.ToolCallID]++
		key := strconv.FormatInt(b.turn, 10) + ":" + m.ToolCallID
		if n := b.results[m.ToolCallID]; n > 1 {
			key += "#" + strconv.Itoa(n)
		}
		if t := b.tools[key]; t != nil && t.Result == "" {
			t.Result = m.Content
			if b.turn == 0 && t.ScheduledEventID == 0 {
				t.State = api.CallCompleted // it ran in the run before
			} else if t.ScheduledEventID == 0 && t.State == api.CallScheduled {
				t.State = api.CallFailed // answered without running: an unknown tool or invalid arguments
			}
		}
	}
}

// tool returns the tool call of key, made on first use.
func (b *transcriptBuilder) tool(key string) *api.ToolCallInfo {
	t := b.tools[key]
	if t == nil {
		t = &api.ToolCallInfo{State: api.CallScheduled}
		b.tools[key] = t
	}
	return t
}

// started records the attempt history says a model call is at (an
// ActivityStarted, or the attempt its failure names): the transcript's
// attempt is history's, not a count of usage reports.
func (b *transcriptBuilder) started(schedID int64, attempt int32) {
	if c := b.calls[schedID]; c != nil && attempt > 0 {
		c.Attempt = attempt
	}
}

// closed records how an activity ended.
func (b *transcriptBuilder) closed(schedID int64, state string, u history.Usage, f *history.Failure, result history.Payload) {
	if c := b.calls[schedID]; c != nil {
		c.State, c.Usage, c.LastFailure = state, u, f
		if c == b.last && state == api.CallCompleted {
			if r, ok := b.answer(result); ok {
				b.lastMsg = &r.Message
				if r.Model != "" {
					c.Model = r.Model
				}
				// The tool calls it asks for are scheduled before the next
				// model call's chunk carries this message: know them now,
				// so that their activities are linked as they come.
				b.toolCalls(&r.Message)
			}
		}
		return
	}
	if t := b.toolBySched[schedID]; t != nil {
		t.State = state
	}
}

// marker reads the agent's approval markers (recorded at event id).
func (b *transcriptBuilder) marker(id int64, m *history.MarkerRecorded) {
	if m.Name == history.MarkerApprovalIgnored {
		var ig history.IgnoredApproval
		if msgpack.Unmarshal(m.Data.Data, &ig) != nil {
			ig = history.IgnoredApproval{CallID: m.ID, Why: "(the marker's data cannot be read)"}
		}
		b.ignored = append(b.ignored, api.IgnoredApproval{EventID: id, CallID: ig.CallID, Approved: ig.Approved, By: ig.By, Reason: ig.Reason, Why: ig.Why})
		return
	}
	if m.Name != history.MarkerApprovalRequested && m.Name != history.MarkerApprovalDecided {
		return
	}
	t := b.tool(m.ID)
	switch m.Name {
	case history.MarkerApprovalRequested:
		t.State = api.CallAwaitingApproval
	case history.MarkerApprovalDecided:
		var ap history.Approval
		if msgpack.Unmarshal(m.Data.Data, &ap) == nil {
			t.ApprovedBy = ap.By
			if !ap.Approved {
				t.State = api.CallRejected
			} else {
				t.State = api.CallScheduled
			}
		}
	}
}

// answer decodes a model call's result: the chunk that extends its input
// with the answer's entry (llm.Chat), or an older-style ModelResult value.
func (b *transcriptBuilder) answer(result history.Payload) (history.ModelResult, bool) {
	if result.Encoding == history.EncodingTranscript && result.ByRef() && len(result.Data) == 0 {
		c, err := b.src.Chunk(b.ctx, result.Ref)
		if err != nil {
			return history.ModelResult{}, false
		}
		entries, err := history.DecodeTranscript(c.Data)
		if err != nil {
			return history.ModelResult{}, false
		}
		r, ok := history.AnswerOf(entries)
		return r, ok && r.Message.Role != ""
	}
	var r history.ModelResult
	p, err := history.Resolve(b.ctx, b.src, result)
	if err != nil || msgpack.Unmarshal(p.Data, &r) != nil || r.Message.Role == "" {
		return history.ModelResult{}, false
	}
	return r, true
}
