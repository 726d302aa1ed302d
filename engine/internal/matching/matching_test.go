package matching

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"sort"
	"sync"
	"testing"
	"time"
)

// waitSignal installs an onWait hook and returns a channel receiving the
// queue name each time a poller starts waiting. Must be called before any
// concurrent use of q.
func waitSignal[T any](q *Queues[T], buf int) <-chan string {
	ch := make(chan string, buf)
	q.onWait = func(name string) { ch <- name }
	return ch
}

func TestFIFOAndLen(t *testing.T) {
	q := NewQueues[int]()
	for i := range 200 {
		q.Push("a", i)
	}
	q.Push("b", -1)
	if q.Len("a") != 200 || q.Len("b") != 1 || q.Len("c") != 0 {
		t.Fatalf("Len a=%d b=%d c=%d", q.Len("a"), q.Len("b"), q.Len("c"))
	}
	ctx := context.Background()
	for i := range 200 {
		v, ok := q.Poll(ctx, "a")
		if !ok || v != i {
			t.Fatalf("Poll = %d %v, want %d", v, ok, i)
		}
	}
	if v, ok := q.Poll(ctx, "b"); !ok || v != -1 {
		t.Fatalf("Poll b = %d %v", v, ok)
	}
	if n := q.numQueues(); n != 0 {
		t.Fatalf("%d queues left in map", n)
	}
}

func TestPushFrontKeepsOrder(t *testing.T) {
	q := NewQueues[int]()
	qq := &queue[int]{}
	pop := func() int {
		v, ok := q.popLocked("q", qq)
		if !ok {
			t.Fatal("nothing to pop")
		}
		return v
	}
	for i := 1; i <= 5; i++ {
		q.pushBack(qq, i)
	}
	q.pushFront(qq, 0)
	pop()
	pop()
	q.pushFront(qq, 1)
	q.pushFront(qq, 0)
	q.pushFront(qq, -1)
	var got []int
	for qq.n > 0 {
		got = append(got, pop())
	}
	if want := []int{-1, 0, 1, 2, 3, 4, 5}; !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestHandoffToLongestWaiting(t *testing.T) {
	q := NewQueues[int]()
	waits := waitSignal(q, 3)
	results := make([]chan int, 3)
	for i := range results {
		results[i] = make(chan int, 1)
		go func() {
			v, ok := q.Poll(context.Background(), "q")
			if !ok {
				v = -100
			}
			results[i] <- v
		}()
		<-waits // poller i is now waiting, behind pollers 0..i-1
	}
	if q.Waiting("q") != 3 {
		t.Fatalf("Waiting = %d", q.Waiting("q"))
	}
	for i := range 3 {
		q.Push("q", 10+i)
		if got := <-results[i]; got != 10+i {
			t.Fatalf("poller %d got %d", i, got)
		}
	}
	if q.Len("q") != 0 || q.Waiting("q") != 0 || q.numQueues() != 0 {
		t.Fatalf("leftover state: len=%d waiting=%d queues=%d", q.Len("q"), q.Waiting("q"), q.numQueues())
	}
}

func TestCancelWithdrawsWaiterAndDropsQueue(t *testing.T) {
	q := NewQueues[int]()
	waits := waitSignal(q, 1000)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for i := range 1000 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := q.Poll(ctx, fmt.Sprintf("sticky-%d", i)); ok {
				t.Error("Poll returned an item")
			}
		}()
	}
	for range 1000 {
		<-waits
	}
	if n := q.numQueues(); n != 1000 {
		t.Fatalf("numQueues = %d", n)
	}
	cancel()
	wg.Wait()
	if n := q.numQueues(); n != 0 {
		t.Fatalf("numQueues after cancel = %d, want 0", n)
	}
}

func TestPollWithDoneCtxConsumesNothing(t *testing.T) {
	q := NewQueues[int]()
	q.Push("q", 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, ok := q.Poll(ctx, "q"); ok {
		t.Fatal("Poll with done ctx returned an item")
	}
	if q.Len("q") != 1 {
		t.Fatal("item consumed")
	}
}

func TestClose(t *testing.T) {
	q := NewQueues[int]()
	waits := waitSignal(q, 10)
	var wg sync.WaitGroup
	for i := range 10 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, ok := q.Poll(context.Background(), fmt.Sprint(i%3)); ok {
				t.Error("Poll returned true after Close")
			}
		}()
	}
	for range 10 {
		<-waits
	}
	q.Close()
	wg.Wait()
	q.Close() // idempotent
	q.Push("0", 1)
	if _, ok := q.Poll(context.Background(), "0"); ok {
		t.Fatal("Poll after Close returned true")
	}
	for i := range 3 {
		if q.Waiting(fmt.Sprint(i)) != 0 {
			t.Fatal("waiters left after Close")
		}
	}
}

// TestRaceHandoffVsCancel forces, many times over, a push and a cancel to hit
// the same waiting poller, and checks the item is either returned by Poll or
// still in the queue — never lost, never duplicated.
func TestRaceHandoffVsCancel(t *testing.T) {
	q := NewQueues[int]()
	waits := waitSignal(q, 1)
	returned, requeued := 0, 0
	for i := range 5000 {
		ctx, cancel := context.WithCancel(context.Background())
		res := make(chan bool, 1)
		go func() {
			v, ok := q.Poll(ctx, "q")
			if ok && v != i {
				t.Errorf("got %d, want %d", v, i)
			}
			res <- ok
		}()
		<-waits
		if i%2 == 0 {
			q.Push("q", i)
			cancel()
		} else {
			cancel()
			q.Push("q", i)
		}
		ok := <-res
		n := q.Len("q")
		switch {
		case ok && n == 0:
			returned++
		case !ok && n == 1:
			requeued++
			if v, ok := q.Poll(context.Background(), "q"); !ok || v != i {
				t.Fatalf("requeued item = %d %v, want %d", v, ok, i)
			}
		default:
			t.Fatalf("iteration %d: Poll ok=%v, Len=%d", i, ok, n)
		}
		if q.numQueues() != 0 {
			t.Fatalf("iteration %d: queue not dropped", i)
		}
	}
	t.Logf("returned=%d requeued=%d", returned, requeued)
}

// TestStressExactlyOnce runs many pollers with random cancellations against
// concurrent pushers on a few queues and checks every pushed item is
// received exactly once.
func TestStressExactlyOnce(t *testing.T) {
	const (
		queues   = 4
		pushers  = 8
		perPush  = 3000
		pollers  = 32
		total    = pushers * perPush
		cancelPc = 30 // percent of Polls that get a short random cancellation
	)
	q := NewQueues[int]()
	giveBacks := 0
	q.onGiveBack = func() { giveBacks++ } // called with q.mu held
	names := make([]string, queues)
	for i := range names {
		names[i] = fmt.Sprintf("q%d", i)
	}
	var (
		mu   sync.Mutex
		seen = make([]int, total)
		got  int
		all  = make(chan struct{})
	)
	record := func(v int) {
		mu.Lock()
		defer mu.Unlock()
		seen[v]++
		got++
		if got == total {
			close(all)
		}
	}
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	for p := range pollers {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				name := names[r.IntN(queues)]
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(100) < cancelPc {
					// Cancel from another goroutine at a random moment,
					// racing with handoff.
					spin := r.IntN(200)
					go func() {
						for range spin {
							// burn a little CPU; no sleeping
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
				v, ok := q.Poll(ctx, name)
				cancel()
				if ok {
					record(v)
				}
			}
		}()
	}
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(p), 2))
			for i := range perPush {
				q.Push(names[r.IntN(queues)], p*perPush+i)
			}
		}()
	}
	wg.Wait()
	// Stop the random pollers (waiting ones are cancelled via stop), then
	// drain what is left, without concurrency.
	close(stop)
	pwg.Wait()
	for _, name := range names {
		for q.Len(name) > 0 {
			v, ok := q.Poll(context.Background(), name)
			if !ok {
				t.Fatalf("Poll(%s) = false with Len > 0", name)
			}
			record(v)
		}
	}
	select {
	case <-all:
	default:
		t.Fatalf("received %d of %d", got, total)
	}
	t.Logf("items given back after cancellation: %d", giveBacks)
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("item %d received %d times", v, n)
		}
	}
	for _, name := range names {
		if q.Len(name) != 0 || q.Waiting(name) != 0 {
			t.Fatalf("%s: len=%d waiting=%d", name, q.Len(name), q.Waiting(name))
		}
	}
	if n := q.numQueues(); n != 0 {
		t.Fatalf("numQueues = %d", n)
	}
}

// BenchmarkHandoff measures push→poll latency when a poller is already
// waiting on the queue.
func BenchmarkHandoff(b *testing.B) {
	q := NewQueues[time.Time]()
	waits := waitSignal(q, 1)
	lat := make(chan time.Duration, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			t0, ok := q.Poll(context.Background(), "q")
			if !ok {
				return
			}
			lat <- time.Since(t0)
		}
	}()
	samples := make([]time.Duration, 0, b.N)
	for b.Loop() {
		<-waits // poller is parked in Poll
		q.Push("q", time.Now())
		samples = append(samples, <-lat)
	}
	b.StopTimer()
	q.Close()
	<-done
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	pct := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))].Nanoseconds()) / 1e3
	}
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
}

// TestOfferOnlyToAWaitingPoller: Offer and OfferBuilt hand an item to a
// poller already waiting (OfferBuilt knowing its tag) and queue nothing
// when none waits.
func TestOfferOnlyToAWaitingPoller(t *testing.T) {
	q := NewQueues[string]()
	if q.Offer("a", "x") {
		t.Fatal("Offer with no poller reported true")
	}
	if q.Len("a") != 0 {
		t.Fatal("Offer with no poller queued the item")
	}
	got := make(chan string, 1)
	go func() {
		item, _ := q.PollTagged(context.Background(), "a", "worker-7")
		got <- item
	}()
	for q.Waiting("a") == 0 {
		runtime.Gosched()
	}
	if q.OfferBuilt("a", func(string) (string, bool) { return "", false }) {
		t.Fatal("OfferBuilt reported true although build declined")
	}
	if !q.OfferBuilt("a", func(tag string) (string, bool) { return "for " + tag, true }) {
		t.Fatal("OfferBuilt to a waiting poller reported false")
	}
	if item := <-got; item != "for worker-7" {
		t.Fatalf("poller got %q", item)
	}
}
