package timerq

import (
	"math/rand/v2"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cairnflow/cairn/internal/clock"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// newFakeQueue returns a started queue on a fake clock whose fired keys are
// sent on the returned channel.
func newFakeQueue[K comparable](t *testing.T) (*Queue[K], *clock.Fake, chan K) {
	t.Helper()
	clk := clock.NewFake(epoch)
	fired := make(chan K, 10000)
	q := New(clk, func(k K) { fired <- k })
	q.Start()
	t.Cleanup(q.Stop)
	return q, clk, fired
}

func recv[K comparable](t *testing.T, ch <-chan K) K {
	t.Helper()
	select {
	case k := <-ch:
		return k
	case <-time.After(5 * time.Second):
		t.Fatal("timed out waiting for a fire")
		panic("unreachable")
	}
}

func TestOrder(t *testing.T) {
	q, clk, fired := newFakeQueue[string](t)
	q.Add(epoch.Add(3*time.Second), "c")
	q.Add(epoch.Add(1*time.Second), "a")
	q.Add(epoch.Add(2*time.Second), "b1")
	q.Add(epoch.Add(2*time.Second), "b2") // tie: insertion order
	q.Add(epoch.Add(2*time.Second), "b1") // duplicate key allowed
	if q.Len() != 5 {
		t.Fatalf("Len = %d", q.Len())
	}
	clk.Advance(3 * time.Second)
	for _, want := range []string{"a", "b1", "b2", "b1", "c"} {
		if got := recv(t, fired); got != want {
			t.Fatalf("got %q, want %q", got, want)
		}
	}
	if q.Len() != 0 {
		t.Fatalf("Len = %d", q.Len())
	}
}

func TestNotEarly(t *testing.T) {
	q, clk, fired := newFakeQueue[string](t)
	q.Add(epoch.Add(5*time.Second), "later")
	clk.Advance(5*time.Second - time.Millisecond)
	// A due sentinel proves the goroutine has run a pass at the new time.
	q.Add(clk.Now(), "sentinel")
	if got := recv(t, fired); got != "sentinel" {
		t.Fatalf("got %q first", got)
	}
	if q.Len() != 1 {
		t.Fatalf("Len = %d, want 1 (fired early)", q.Len())
	}
	clk.BlockUntil(1)
	clk.Advance(time.Millisecond)
	if got := recv(t, fired); got != "later" {
		t.Fatalf("got %q", got)
	}
}

func TestRearmOnEarlierAdd(t *testing.T) {
	q, clk, fired := newFakeQueue[string](t)
	q.Add(epoch.Add(10*time.Second), "late")
	if d, ok := clk.NextDeadline(); !ok || !d.Equal(epoch.Add(10*time.Second)) || clk.Pending() != 1 {
		t.Fatalf("armed %v %v pending=%d", d, ok, clk.Pending())
	}
	q.Add(epoch.Add(20*time.Second), "later") // no re-arm for a later entry
	if d, _ := clk.NextDeadline(); !d.Equal(epoch.Add(10*time.Second)) || clk.Pending() != 1 {
		t.Fatalf("re-armed for a later entry: %v pending=%d", d, clk.Pending())
	}
	q.Add(epoch.Add(5*time.Second), "early")
	if d, _ := clk.NextDeadline(); !d.Equal(epoch.Add(5*time.Second)) || clk.Pending() != 1 {
		t.Fatalf("not re-armed: %v pending=%d", d, clk.Pending())
	}
	clk.Advance(5 * time.Second)
	if got := recv(t, fired); got != "early" {
		t.Fatalf("got %q", got)
	}
	clk.BlockUntil(1) // goroutine re-arms for the next entry
	if d, _ := clk.NextDeadline(); !d.Equal(epoch.Add(10*time.Second)) || clk.Pending() != 1 {
		t.Fatalf("re-armed for %v pending=%d", d, clk.Pending())
	}
	clk.Advance(5 * time.Second)
	if got := recv(t, fired); got != "late" {
		t.Fatalf("got %q", got)
	}
	clk.BlockUntil(1)
	clk.Advance(10 * time.Second)
	if got := recv(t, fired); got != "later" {
		t.Fatalf("got %q", got)
	}
}

func TestDueOnAdd(t *testing.T) {
	clk := clock.NewFake(epoch)
	fired := make(chan int, 10)
	q := New(clk, func(k int) { fired <- k })
	q.Add(epoch.Add(-time.Second), 1) // due before Start
	q.Start()
	defer q.Stop()
	if got := recv(t, fired); got != 1 {
		t.Fatalf("got %d", got)
	}
	q.Add(epoch.Add(time.Hour), 99)
	q.Add(epoch, 2) // due now, while a later timer is armed
	if got := recv(t, fired); got != 2 {
		t.Fatalf("got %d", got)
	}
	if q.Len() != 1 {
		t.Fatalf("Len = %d", q.Len())
	}
}

func TestManyEntries(t *testing.T) {
	q, clk, fired := newFakeQueue[int](t)
	const n = 5000
	r := rand.New(rand.NewPCG(1, 2))
	at := make([]time.Time, n)
	for i := range n {
		at[i] = epoch.Add(time.Duration(r.IntN(1000)) * time.Millisecond)
		q.Add(at[i], i)
	}
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	sort.SliceStable(want, func(i, j int) bool { return at[want[i]].Before(at[want[j]]) })
	for clk.Now().Before(epoch.Add(time.Second)) {
		clk.Advance(time.Duration(1+r.IntN(50)) * time.Millisecond)
	}
	for i := range n {
		if got := recv(t, fired); got != want[i] {
			t.Fatalf("fire %d: got %d (at %v), want %d (at %v)", i, got, at[got], want[i], at[want[i]])
		}
	}
}

func TestConcurrentAdds(t *testing.T) {
	q, clk, fired := newFakeQueue[int](t)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 500 {
				q.Add(epoch.Add(time.Duration(i%37)*time.Millisecond), g*500+i)
			}
		}()
	}
	wg.Wait()
	clk.Advance(time.Second)
	seen := make(map[int]bool)
	for range 4000 {
		k := recv(t, fired)
		if seen[k] {
			t.Fatalf("key %d fired twice", k)
		}
		seen[k] = true
	}
}

func TestStop(t *testing.T) {
	clk := clock.NewFake(epoch)
	release := make(chan struct{})
	fired := make(chan int, 10)
	q := New(clk, func(k int) {
		fired <- k
		if k == 1 {
			<-release
		}
	})
	q.Add(epoch, 1)
	q.Add(epoch, 2)
	q.Add(epoch.Add(time.Minute), 3)
	q.Start()
	if got := recv(t, fired); got != 1 {
		t.Fatalf("got %d", got)
	}
	stopped := make(chan struct{})
	go func() { q.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while fire was running")
	default:
	}
	close(release)
	<-stopped
	// Key 2 may or may not have fired, depending on whether Stop began
	// before fire(1) returned; nothing may fire once Stop has returned.
	if len(fired) == 1 {
		if k := <-fired; k != 2 {
			t.Fatalf("got %d", k)
		}
	}
	q.Stop() // idempotent
	clk.Advance(time.Hour)
	if clk.Pending() != 0 {
		t.Fatalf("clock timer still pending after Stop: %d", clk.Pending())
	}
	q.Add(epoch, 4) // after Stop: kept, never fired
	select {
	case k := <-fired:
		t.Fatalf("key %d fired after Stop", k)
	default:
	}
	q.Start() // no-op after Stop
	if clk.Pending() != 0 {
		t.Fatal("Start after Stop armed a timer")
	}
}

// TestStopWithoutStart: a queue stopped before it started returns from
// Stop (twice), and nothing it holds fires, even once its time has come
// and it is asked to start.
func TestStopWithoutStart(t *testing.T) {
	clk := clock.NewFake(epoch)
	var fired atomic.Int32
	q := New(clk, func(int) { fired.Add(1) })
	q.Add(epoch.Add(time.Second), 1)
	q.Stop()
	q.Stop()
	q.Start() // refused: a stopped queue stays stopped
	clk.Advance(time.Hour)
	q.Add(epoch, 2)
	if n := fired.Load(); n != 0 {
		t.Fatalf("%d entries fired after Stop", n)
	}
	if got := q.Len(); got != 2 {
		t.Fatalf("Len = %d after Stop, want the 2 entries kept", got)
	}
}

func TestRealClock1ms(t *testing.T) {
	fired := make(chan time.Time, 1)
	q := New(clock.Real(), func(at time.Time) { fired <- at })
	q.Start()
	defer q.Stop()
	at := time.Now().Add(time.Millisecond)
	q.Add(at, at)
	select {
	case got := <-fired:
		if !got.Equal(at) {
			t.Fatalf("fired %v, want %v", got, at)
		}
		if time.Now().Before(at) {
			t.Fatal("fired before its deadline")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("1ms timer did not fire within 5s")
	}
}

func percentiles(b *testing.B, lat []time.Duration) {
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	ms := func(p float64) float64 {
		return float64(lat[int(p*float64(len(lat)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(ms(0.50), "p50-late-ms")
	b.ReportMetric(ms(0.99), "p99-late-ms")
	b.ReportMetric(ms(1), "max-late-ms")
}

// BenchmarkTimerLatency1ms adds one 1 ms timer at a time on the real clock
// and measures how late it fires (fire time minus deadline).
func BenchmarkTimerLatency1ms(b *testing.B) {
	late := make(chan time.Duration, 1)
	q := New(clock.Real(), func(at time.Time) { late <- time.Since(at) })
	q.Start()
	defer q.Stop()
	lat := make([]time.Duration, 0, b.N)
	for b.Loop() {
		at := time.Now().Add(time.Millisecond)
		q.Add(at, at)
		lat = append(lat, <-late)
	}
	percentiles(b, lat)
}

// BenchmarkTimerLatency1msConcurrent keeps 256 timers in flight, each with a
// 1 ms deadline jittered by up to 1 ms, and measures fire lateness.
func BenchmarkTimerLatency1msConcurrent(b *testing.B) {
	const inflight = 256
	late := make(chan time.Duration, inflight)
	q := New(clock.Real(), func(at time.Time) { late <- time.Since(at) })
	q.Start()
	defer q.Stop()
	r := rand.New(rand.NewPCG(3, 4))
	lat := make([]time.Duration, 0, b.N)
	add := func() {
		at := time.Now().Add(time.Millisecond + time.Duration(r.IntN(1000))*time.Microsecond)
		q.Add(at, at)
	}
	n := 0
	for ; n < inflight && n < b.N; n++ {
		add()
	}
	for range b.N {
		lat = append(lat, <-late)
		if n < b.N {
			add()
			n++
		}
	}
	percentiles(b, lat)
}

// TestSyncLeavesNextArmed: once Sync returns, the clock has a timer armed
// for the next entry. A test environment that skips time reads the
// clock's next deadline right after Sync; when the queue's goroutine had
// fired the due entry but not yet re-armed for the next one, there was no
// deadline to skip to and the environment waited forever (the hang of
// worker's TestReplayFileTrace).
func TestSyncLeavesNextArmed(t *testing.T) {
	for i := range 300 {
		clk := clock.NewFake(epoch)
		q := New(clk, func(string) {})
		q.Start()
		q.Add(epoch.Add(10*time.Second), "task timeout")
		q.Add(epoch.Add(time.Hour), "timer")
		at, ok := clk.NextDeadline()
		if !ok || !at.Equal(epoch.Add(10*time.Second)) {
			t.Fatalf("before: next deadline %v %v", at, ok)
		}
		clk.Set(at)
		q.Sync()
		at, ok = clk.NextDeadline()
		q.Stop()
		if !ok || !at.Equal(epoch.Add(time.Hour)) {
			t.Fatalf("round %d: after Sync the clock's next deadline is %v (%v), want the next entry's", i, at, ok)
		}
	}
}
