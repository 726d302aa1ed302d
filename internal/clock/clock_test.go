package clock

import (
	"sync"
	"testing"
	"time"
)

var epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeOrderAndNow(t *testing.T) {
	f := NewFake(epoch)
	var got []int
	var nows []time.Time
	add := func(d time.Duration, id int) Timer {
		return f.AfterFunc(d, func() { got = append(got, id); nows = append(nows, f.Now()) })
	}
	add(3*time.Second, 3)
	add(1*time.Second, 1)
	add(2*time.Second, 20)
	add(2*time.Second, 21) // tie: creation order
	add(10*time.Second, 10)
	if n := f.Pending(); n != 5 {
		t.Fatalf("Pending = %d, want 5", n)
	}
	if d, ok := f.NextDeadline(); !ok || !d.Equal(epoch.Add(time.Second)) {
		t.Fatalf("NextDeadline = %v %v", d, ok)
	}
	f.Advance(500 * time.Millisecond)
	if len(got) != 0 {
		t.Fatalf("fired early: %v", got)
	}
	f.Advance(2500 * time.Millisecond)
	want := []int{1, 20, 21, 3}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("got %v, want %v", got, want)
		}
		if !nows[i].Equal(epoch.Add(3 * time.Second)) {
			t.Fatalf("callback saw Now=%v, want advanced time", nows[i])
		}
	}
	if n := f.Pending(); n != 1 {
		t.Fatalf("Pending = %d, want 1", n)
	}
	f.Set(epoch.Add(10 * time.Second))
	if got[len(got)-1] != 10 {
		t.Fatalf("Set did not fire: %v", got)
	}
	if _, ok := f.NextDeadline(); ok {
		t.Fatal("NextDeadline ok with nothing pending")
	}
}

func TestFakeStop(t *testing.T) {
	f := NewFake(epoch)
	fired := false
	tm := f.AfterFunc(time.Second, func() { fired = true })
	if !tm.Stop() {
		t.Fatal("first Stop = false")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true")
	}
	f.Advance(time.Hour)
	if fired {
		t.Fatal("stopped timer fired")
	}
	tm2 := f.AfterFunc(time.Second, func() {})
	f.Advance(time.Second)
	if tm2.Stop() {
		t.Fatal("Stop after fire = true")
	}
}

func TestFakeCallbackStopsLaterAndChains(t *testing.T) {
	f := NewFake(epoch)
	var got []string
	var later Timer
	f.AfterFunc(time.Second, func() {
		got = append(got, "a")
		later.Stop()
		f.AfterFunc(0, func() { got = append(got, "chained") })
		f.AfterFunc(time.Hour, func() { got = append(got, "far") })
	})
	later = f.AfterFunc(2*time.Second, func() { got = append(got, "later") })
	f.Advance(5 * time.Second)
	if len(got) != 2 || got[0] != "a" || got[1] != "chained" {
		t.Fatalf("got %v", got)
	}
	if f.Pending() != 1 {
		t.Fatalf("Pending = %d", f.Pending())
	}
}

func TestFakeZeroDelayFiresOnAdvanceZero(t *testing.T) {
	f := NewFake(epoch)
	n := 0
	f.AfterFunc(0, func() { n++ })
	f.AfterFunc(-time.Second, func() { n++ })
	if n != 0 {
		t.Fatal("ran synchronously in AfterFunc")
	}
	f.Advance(0)
	if n != 2 {
		t.Fatalf("n = %d", n)
	}
}

func TestFakeBlockUntil(t *testing.T) {
	f := NewFake(epoch)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		f.BlockUntil(3)
		close(done)
	}()
	for i := range 3 {
		select {
		case <-done:
			t.Fatalf("BlockUntil returned with %d pending", i)
		default:
		}
		f.AfterFunc(time.Duration(i+1)*time.Second, func() {})
	}
	<-done
	wg.Wait()
	f.BlockUntil(0)
}

func TestFakeConcurrent(t *testing.T) {
	f := NewFake(epoch)
	var mu sync.Mutex
	count := 0
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				tm := f.AfterFunc(time.Duration(i%7)*time.Millisecond, func() {
					mu.Lock()
					count++
					mu.Unlock()
				})
				if (i+g)%5 == 0 {
					tm.Stop()
				}
				_ = f.Now()
			}
		}()
	}
	wg.Wait()
	pending := f.Pending()
	f.Advance(time.Second)
	if count != pending {
		t.Fatalf("fired %d, pending was %d", count, pending)
	}
}

func TestReal(t *testing.T) {
	c := Real()
	start := c.Now()
	ch := make(chan struct{})
	c.AfterFunc(time.Millisecond, func() { close(ch) })
	select {
	case <-ch:
	case <-time.After(5 * time.Second):
		t.Fatal("real AfterFunc did not fire")
	}
	if c.Now().Sub(start) < time.Millisecond {
		t.Fatal("fired before its delay")
	}
	tm := c.AfterFunc(time.Hour, func() { t.Error("stopped timer fired") })
	if !tm.Stop() {
		t.Fatal("Stop = false")
	}
}
