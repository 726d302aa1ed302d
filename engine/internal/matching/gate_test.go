package matching

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
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

// TestGateStress: pollers with random cancellations take items of 8 keys
// under a limit of 2 held per key, releasing each (and kicking the queue)
// when done: every item is received exactly once and no key ever has more
// than 2 held, give-backs (Unadmit) included.
func TestGateStress(t *testing.T) {
	const (
		keys    = 8
		total   = 4000
		pollers = 16
		limit   = 2
	)
	q := NewQueues[string]()
	var (
		lim    sync.Mutex
		admits = map[string]int{} // reserved per key, by the gate
		held   = map[string]int{} // held per key, by the consumers
	)
	q.SetGate(Gate[string]{
		Key: gateParts,
		Admit: func(_ string, it string) bool {
			k, _ := gateParts(it)
			lim.Lock()
			defer lim.Unlock()
			if admits[k] >= limit {
				return false
			}
			admits[k]++
			return true
		},
		Unadmit: func(_ string, it string) {
			k, _ := gateParts(it)
			lim.Lock()
			admits[k]--
			lim.Unlock()
		},
	})
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		all  = make(chan struct{})
	)
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	for p := range pollers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 3))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(100) < 30 {
					spin := r.IntN(200)
					go func() {
						for range spin {
							_ = rand.Int()
						}
						cancel()
					}()
				} else {
					go func() {
						select {
						case <-stop:
							cancel()
						case <-ctx.Done():
						}
					}()
				}
				v, ok := q.Poll(ctx, "q")
				cancel()
				if !ok {
					continue
				}
				k, _ := gateParts(v)
				lim.Lock()
				held[k]++
				if held[k] > limit {
					t.Errorf("key %s: %d held, limit %d", k, held[k], limit)
				}
				held[k]--
				admits[k]--
				lim.Unlock()
				q.Kick("q")
				mu.Lock()
				seen[v]++
				if len(seen) == total {
					close(all)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range total {
		q.Push("q", fmt.Sprintf("k%d/kind%d/%d", i%keys, i%3%2, i))
	}
	<-all
	close(stop)
	pwg.Wait()
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("%s received %d times", v, n)
		}
	}
	if q.Len("q") != 0 {
		t.Fatalf("%d items left", q.Len("q"))
	}
}
