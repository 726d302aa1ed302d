package agent

import (
	"github.com/cairnflow/cairn/history"
	"github.com/cairnflow/cairn/sdk"
)

// A long agent continues as new carrying its conversation by reference.
//
// The transcript is a chain of content-addressed chunks, so what the next
// run needs is the 32-byte hash of the chain's last chunk (Carry.Tip) and
// the few entries added since the last model call (the last turn's tool
// results, themselves references when large): the conversation's bytes
// are not copied into the continue-as-new's input, nor into the new run's
// history. The new run's first model call extends the carried chunk, and
// the model sees the whole conversation.
//
//	func LongAgent(ctx sdk.Context, in Input) (agent.Result, error) {
//		a := agent.New(ctx, agent.Options{…, Resume: in.Carry,
//			ContinueAsNew: func(ctx sdk.Context, c agent.Carry) error {
//				return sdk.NewContinueAsNewError(ctx, LongAgent, Input{Carry: &c})
//			}})
//		msg := in.Task
//		if in.Carry != nil {
//			msg = "" // the conversation goes on
//		}
//		return a.Run(ctx, msg)
//	}

// Carry is an agent's conversation as the next run of a continue-as-new
// takes it (Options.Resume): a reference, not a copy.
type Carry struct {
	// Tip is the stored chunk holding the conversation up to the last
	// model call (nil: no model call was made yet).
	Tip []byte
	// Pending are the entries added since (tool results, a user message).
	Pending []history.TranscriptEntry
	// Texts holds the text of the pending entries that record a reference
	// to their content (a tool's result), by index in Pending.
	Texts map[int]string `msgpack:",omitempty"`
	// Turns counts the model calls of the runs before: Options.MaxTurns
	// bounds the conversation across them.
	Turns int
}

// Carry returns the conversation to carry into the next run (see
// Options.Resume). Call it between Runs, or from Options.ContinueAsNew.
func (a *Agent) Carry() Carry {
	t := &a.tr
	c := Carry{Tip: t.tip, Pending: append([]history.TranscriptEntry(nil), t.entries[t.sent:]...), Turns: a.carriedTurns + a.turn}
	for i := t.sent; i < len(t.entries); i++ {
		if text, ok := t.texts[i]; ok {
			if c.Texts == nil {
				c.Texts = map[int]string{}
			}
			c.Texts[i-t.sent] = text
		}
	}
	return c
}

// resume starts the transcript from a carried conversation: the carried
// tip, the entries pending since, then the settings of this code (its
// tools), which apply from here on. The system prompt is in the carried
// conversation already.
func (a *Agent) resume(c *Carry, settings *history.ChatConfig) {
	a.tr.tip = c.Tip
	a.carriedTurns = c.Turns
	for i, e := range c.Pending {
		a.tr.appendEntry(e)
		if text, ok := c.Texts[i]; ok {
			if a.tr.texts == nil {
				a.tr.texts = map[int]string{}
			}
			a.tr.texts[len(a.tr.entries)-1] = text
		}
	}
	a.tr.appendEntry(history.TranscriptEntry{Config: settings})
}

// continueAsNew asks Options.ContinueAsNew to continue the run as new when
// the engine suggests it (sdk.ContinueAsNewSuggested), at the start of a
// turn: the conversation is then whole (no call in flight, no approval
// waiting). It returns nil to go on in this run.
func (a *Agent) continueAsNew(ctx sdk.Context) error {
	if a.opts.ContinueAsNew == nil || !sdk.ContinueAsNewSuggested(ctx) {
		return nil
	}
	return a.opts.ContinueAsNew(ctx, a.Carry())
}
