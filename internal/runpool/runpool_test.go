package runpool

import (
	"runtime"
	"sync"
	"testing"
)

// TestRunsEveryFunctionOnce: concurrent Go calls run each function exactly
// once, reusing goroutines, and no more than maxIdle stay waiting.
func TestRunsEveryFunctionOnce(t *testing.T) {
	p := New(4)
	const n = 1000
	var (
		mu   sync.Mutex
		seen = make(map[int]int)
		wg   sync.WaitGroup
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		p.Go(func() {
			defer wg.Done()
			mu.Lock()
			seen[i]++
			mu.Unlock()
		})
	}
	wg.Wait()
	if len(seen) != n {
		t.Fatalf("%d functions ran, want %d", len(seen), n)
	}
	for i, c := range seen {
		if c != 1 {
			t.Fatalf("function %d ran %d times", i, c)
		}
	}
	if idle := p.Idle(); idle > 4 {
		t.Fatalf("%d goroutines idle, want at most 4", idle)
	}
}

// TestReusesAnIdleGoroutine: functions run one after another run on
// goroutines the pool already has. (A goroutine counts itself idle just
// before it blocks to receive, so a function may now and then find none
// receiving yet and start one: the test asks for reuse, not for exactly one
// goroutine.)
func TestReusesAnIdleGoroutine(t *testing.T) {
	p := New(1)
	for i := 0; i < 100; i++ {
		ran := make(chan struct{})
		p.Go(func() { close(ran) })
		<-ran
		for p.Idle() != 1 { // the goroutine is on its way back to waiting
			runtime.Gosched()
		}
	}
	if n := p.started.Load(); n >= 50 {
		t.Fatalf("%d goroutines started for 100 sequential functions: idle ones are not reused", n)
	}
}
