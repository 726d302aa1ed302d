package matching

import (
	"context"
	"slices"
	"strings"
	"testing"
)

// item is "key/kind/n".
func gateParts(it string) (string, string) {
	p := strings.Split(it, "/")
	return p[0], p[1]
}

func TestGateRoundRobinBetweenKeys(t *testing.T) {
	q := NewQueues[string]()
	q.SetGate(Gate[string]{Key: gateParts})
	for i := range 100 {
		q.Push("q", "A/llm/"+string(rune('0'+i%10)))
	}
	q.Push("q", "B/llm/0")
	q.Push("q", "C/llm/0")
	ctx := context.Background()
	var got []string
	for range 4 {
		v, _ := q.Poll(ctx, "q")
		got = append(got, v[:1])
	}
	if want := []string{"A", "B", "C", "A"}; !slices.Equal(got, want) {
		t.Fatalf("served %v, want %v", got, want)
	}
	if q.Len("q") != 98 {
		t.Fatalf("Len = %d", q.Len("q"))
	}
}

func TestGateHoldsBackAndKick(t *testing.T) {
	q := NewQueues[string]()
	waits := waitSignal(q, 4)
	open := map[string]bool{"email": true}
	var unadmitted []string
	q.SetGate(Gate[string]{
		Key:     gateParts,
		Admit:   func(_ string, it string) bool { _, k := gateParts(it); return open[k] },
		Unadmit: func(_ string, it string) { unadmitted = append(unadmitted, it) },
	})
	q.Push("q", "A/llm/1")
	q.Push("q", "A/email/2")
	q.Push("q", "A/llm/3")
	ctx := context.Background()
	// The llm items are held back; the younger email item of the same key passes.
	if v, ok := q.Poll(ctx, "q"); !ok || v != "A/email/2" {
		t.Fatalf("Poll = %q %v", v, ok)
	}
	got := make(chan string, 1)
	go func() { v, _ := q.Poll(ctx, "q"); got <- v }()
	<-waits
	if q.Waiting("q") != 1 || q.Len("q") != 2 {
		t.Fatalf("waiting %d, len %d", q.Waiting("q"), q.Len("q"))
	}
	q.mu.Lock()
	open["llm"] = true
	q.mu.Unlock()
	q.Kick("q")
	if v := <-got; v != "A/llm/1" {
		t.Fatalf("kicked poller got %q", v)
	}
	// An item given back is unadmitted and served first again.
	q.GiveBack("q", "A/llm/1")
	if !slices.Equal(unadmitted, []string{"A/llm/1"}) {
		t.Fatalf("unadmitted %v", unadmitted)
	}
	if v, _ := q.Poll(ctx, "q"); v != "A/llm/1" {
		t.Fatalf("after give back: %q", v)
	}
}

// BenchmarkPushPoll: a push and a poll of a queued item, one FIFO (no
// gate) against a gate with 64 keys served in turn and an Admit call.
func BenchmarkPushPoll(b *testing.B) {
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = "tenant/" + string(rune('A'+i))
	}
	for _, c := range []struct {
		name string
		gate bool
	}{{"no-gate", false}, {"gate-64-keys", true}} {
		b.Run(c.name, func(b *testing.B) {
			q := NewQueues[int]()
			if c.gate {
				q.SetGate(Gate[int]{Key: func(i int) (string, string) { return keys[i%64], "llm" },
					Admit: func(string, int) bool { return true }})
			}
			for i := range 1000 { // a standing backlog
				q.Push("q", i)
			}
			ctx := context.Background()
			i := 0
			for b.Loop() {
				q.Push("q", i)
				i++
				if _, ok := q.Poll(ctx, "q"); !ok {
					b.Fatal("empty")
				}
			}
		})
	}
}
