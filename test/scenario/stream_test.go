package scenario_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/cairnflow/cairn/activities/llm/fakellm"
	"github.com/cairnflow/cairn/engine/api"
	"github.com/cairnflow/cairn/sdk/agent"
	"github.com/cairnflow/cairn/sdk/client"
)

const finalText = "INV-5 is paid in full: pay_001, and the vendor was told."

// attemptKey names one attempt of one activity in a stream.
type attemptKey struct {
	sched   int64
	attempt int32
}

// streamView is what a client showing the live answer ends up with,
// following docs/agents.md: append text per attempt, drop a superseded
// attempt's text, keep a done attempt's.
type streamView struct {
	text       map[attemptKey]*strings.Builder
	done       map[attemptKey]int
	superseded map[attemptKey]int
	order      []attemptKey
	seqs       map[int64]int // times each Seq was seen
}

func newStreamView() *streamView {
	return &streamView{text: map[attemptKey]*strings.Builder{}, done: map[attemptKey]int{}, superseded: map[attemptKey]int{},
		seqs: map[int64]int{}}
}

func (v *streamView) add(ev api.StreamEvent) {
	v.seqs[ev.Seq]++
	k := attemptKey{ev.ScheduledEventID, ev.Attempt}
	if v.text[k] == nil {
		v.text[k] = &strings.Builder{}
		v.order = append(v.order, k)
	}
	switch ev.Kind {
	case api.StreamText:
		v.text[k].WriteString(ev.Text)
	case api.StreamDone:
		v.done[k]++
	case api.StreamSuperseded:
		v.superseded[k]++
	}
}

// shown is the text of the attempts that completed, in stream order.
func (v *streamView) shown() []string {
	var out []string
	for _, k := range v.order {
		if v.done[k] > 0 && v.superseded[k] == 0 {
			out = append(out, v.text[k].String())
		}
	}
	return out
}

// check fails unless the final answer was shown exactly once, every
// attempt ended exactly once, and the cut attempt was superseded.
func (v *streamView) check(t *testing.T) {
	t.Helper()
	for seq, n := range v.seqs {
		if n != 1 {
			t.Errorf("event %d seen %d times", seq, n)
		}
	}
	n, cut := 0, 0
	for _, s := range v.shown() {
		n += strings.Count(s, finalText)
	}
	for _, k := range v.order {
		if v.done[k]+v.superseded[k] != 1 {
			t.Errorf("attempt %+v ended %d times done, %d superseded", k, v.done[k], v.superseded[k])
		}
		if v.superseded[k] == 1 {
			cut++
		}
	}
	if n != 1 || cut != 1 {
		t.Fatalf("the final text was shown %d times (want 1), %d attempts superseded (want 1); shown %q", n, cut, v.shown())
	}
}

// streamScript: a tool turn, then the final answer, whose first attempt's
// stream is cut in the middle (the worker retries it).
func streamScript() fakellm.Script {
	return fakellm.Script{
		fakellm.CallTool("ReadInvoice", `{"id":"INV-5"}`),
		{Content: finalText, Faults: []fakellm.Reply{{Content: finalText, CutAfter: 3}}},
	}
}

// watch follows a run's stream with long polls until the run closes.
func watch(ctx context.Context, c client.Client, id string, v *streamView) error {
	after := int64(0)
	for {
		resp, err := c.Service().WatchStream(ctx, &api.WatchStreamRequest{WorkflowID: id, AfterSeq: after, Wait: true})
		if err != nil {
			return err
		}
		if resp.Gap {
			return fmt.Errorf("a gap in the stream after %d", after)
		}
		for _, ev := range resp.Events {
			if ev.Seq <= after {
				return fmt.Errorf("event %d after %d: out of order", ev.Seq, after)
			}
			after = ev.Seq
			v.add(ev)
		}
		if resp.Closed {
			return nil
		}
	}
}

// A client watching an agent's stream sees the final answer exactly once,
// although the first attempt's stream was cut and retried: that attempt
// ends "superseded", the retry "done".
func TestStreamShowsTheFinalTextOnce(t *testing.T) {
	ctx := testCtx(t)
	model := fakellm.New(streamScript())
	s := newScene(t, model)
	run := s.start(t, ctx, "stream", Task{Stream: true})
	v := newStreamView()
	errc := make(chan error, 1)
	go func() { errc <- watch(ctx, s.env.Client, "stream", v) }()
	var res agent.Result
	must(t, run.Get(ctx, &res))
	must(t, <-errc)
	if res.Final != finalText {
		t.Fatalf("final %q", res.Final)
	}
	v.check(t)
}
