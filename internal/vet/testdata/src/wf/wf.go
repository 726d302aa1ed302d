// Package wf is a table of good and bad workflow functions for
// workflowcheck: each bad line carries the finding it must produce.
package wf

import (
	"context"
	crand "crypto/rand"
	"fmt"
	"maps"
	"math/rand"
	randv2 "math/rand/v2"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"example.com/wfutil"
	"github.com/cairnflow/cairn/sdk"
)

var counter int

var config = map[string]string{}

type state struct{ n int }

var global state

// Good uses only the SDK: nothing to report.
func Good(ctx sdk.Context, in map[string]int) (int, error) {
	now := sdk.Now(ctx)
	_ = now
	if err := sdk.Sleep(ctx, time.Second); err != nil { // a time.Duration is fine
		return 0, err
	}
	sdk.Go(ctx, func(ctx sdk.Context) {})
	total := 0
	for _, k := range slices.Sorted(maps.Keys(in)) { // sorted keys: fine
		total += in[k]
	}
	id := sdk.SideEffect(ctx, func(ctx sdk.Context) int { return rand.Int() }) // recorded: fine
	n := sdk.SideEffect(ctx, roll)
	local := 0
	local++
	_ = sdk.ExecuteActivity(ctx, Fetch, "https://example.com")
	return total + id + n + local + counter, nil // reading a global is fine
}

func roll(ctx sdk.Context) int { return rand.Intn(6) } // given to SideEffect: fine

// Fetch is an activity: I/O is its job, nothing to report.
func Fetch(ctx context.Context, url string) (string, error) {
	resp, err := http.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	fmt.Println(time.Now())
	return resp.Status, nil
}

// Clock reads the wall clock and sleeps on it.
func Clock(ctx sdk.Context, start time.Time) (time.Duration, error) {
	t := time.Now()            // want `time.Now in workflow Clock: use sdk.Now\(ctx\)`
	_ = time.Since(start)      // want `time.Since in workflow Clock: use sdk.Now\(ctx\).Sub\(t\)`
	_ = time.Until(start)      // want `time.Until in workflow Clock`
	time.Sleep(time.Second)    // want `time.Sleep in workflow Clock: use sdk.Sleep\(ctx, d\)`
	<-time.After(time.Second)  // want `channel receive` `time.After in workflow Clock: use sdk.NewTimer`
	_ = time.Tick(time.Second) // want `time.Tick`
	_ = time.NewTimer(0)       // want `time.NewTimer`
	_ = time.NewTicker(1)      // want `time.NewTicker`
	return t.Sub(start), nil
}

// Concurrency uses Go's own goroutines and channels.
func Concurrency(ctx sdk.Context, in int) (int, error) {
	ch := make(chan int, 1) // want `make\(chan\) in workflow Concurrency: use sdk.NewChannel`
	go func() {}()          // want `go statement in workflow Concurrency: use sdk.Go\(ctx, fn\)`
	ch <- in                // want `channel send`
	v := <-ch               // want `channel receive`
	select {                // want `select statement in workflow Concurrency: use sdk.NewSelector\(ctx\)`
	default:
	}
	for range ch { // want `range over a channel`
	}
	return v, nil
}

// Maps iterates over maps.
func Maps(ctx sdk.Context, in map[string]int) ([]string, error) {
	var out []string
	for k := range in { // want `range over a map \(its order changes from run to run\) in workflow Maps: range over the sorted keys`
		out = append(out, k)
	}
	for k := range maps.Keys(in) { // want `range over maps.Keys`
		out = append(out, k)
	}
	return out, nil
}

// Random draws random numbers.
func Random(ctx sdk.Context, _ int) (int, error) {
	a := rand.Intn(10)     // want `math/rand \(Intn\) in workflow Random: get random values and ids through sdk.SideEffect`
	b := randv2.IntN(10)   // want `math/rand/v2 \(IntN\)`
	_, _ = crand.Read(nil) // want `crypto/rand \(Read\)`
	return a + b, nil
}

// Globals writes package-level variables.
func Globals(ctx sdk.Context, in int) (int, error) {
	counter = in      // want `write to package-level variable counter in workflow Globals`
	counter++         // want `write to package-level variable counter`
	config["k"] = "v" // want `write to package-level variable config`
	global.n = in     // want `write to package-level variable global`
	return counter, nil
}

// IO does I/O.
func IO(ctx sdk.Context, name string) (string, error) {
	b, _ := os.ReadFile(name)              // want `I/O \(os.ReadFile\) in workflow IO: do I/O in an activity`
	_, _ = http.Get("https://example.com") // want `I/O \(net/http.Get\)`
	fmt.Println(string(b))                 // want `fmt.Println in workflow IO: log with sdk.GetLogger\(ctx\)`
	_ = os.Getenv("HOME")                  // want `I/O \(os.Getenv\)`
	fmt.Fprintln(os.Stderr, "x")           // want `fmt.Fprintln to os.Stderr in workflow IO: log with sdk.GetLogger`
	var sb strings.Builder
	fmt.Fprintln(&sb, "x") // to a builder: fine
	return string(b), nil
}

// Suppressed says why each finding is fine.
func Suppressed(ctx sdk.Context, _ int) (int, error) {
	_ = time.Now() //cairn:nondeterministic-ok only logged, never decides anything
	//cairn:nondeterministic-ok the line below is checked by hand
	_ = os.Getenv("HOME")
	return 0, nil
}

// Transitive calls helpers that are not workflow functions themselves.
func Transitive(ctx sdk.Context, _ int) (int64, error) {
	return stamp() + (&state{}).bump(), nil
}

func stamp() int64 { return deeper() }

func deeper() int64 {
	return time.Now().Unix() // want `time.Now in deeper, called from workflow Transitive: use sdk.Now\(ctx\)`
}

func (s *state) bump() int64 {
	counter++ // want `write to package-level variable counter in bump, called from workflow Transitive`
	return int64(s.n)
}

// notCalled is not reached from workflow code: nothing to report.
func notCalled() { _ = time.Now() }

// Register is not a workflow function, but the literal it registers is.
func Register(register func(any)) {
	_ = time.Now()
	register(func(ctx sdk.Context, in int) (int, error) {
		time.Sleep(time.Second) // want `time.Sleep in workflow func literal`
		return in, nil
	})
}

// SortedIdioms ranges over maps where the order cannot matter.
func SortedIdioms(ctx sdk.Context, in map[string]int) ([]string, error) {
	keys := make([]string, 0, len(in))
	for k := range in { // collected, then sorted: fine
		keys = append(keys, k)
	}
	sort.Strings(keys)
	vals := []int{}
	for _, v := range in { // collected, then sorted: fine
		vals = append(vals, v)
	}
	slices.Sort(vals)
	copied := map[string]int{}
	for k, v := range in { // copied into another map: fine
		copied[k] = v
	}
	unsorted := []string{}
	for k := range in { // want `range over a map`
		unsorted = append(unsorted, k)
	}
	return append(keys, unsorted...), nil
}

// Locks blocks on sync primitives.
func Locks(ctx sdk.Context, _ int) (int, error) {
	var mu sync.Mutex
	mu.Lock() // want `sync.Mutex.Lock \(it blocks outside the SDK\) in workflow Locks: wait with sdk.Await`
	mu.Unlock()
	var wg sync.WaitGroup
	wg.Wait() // want `sync.WaitGroup.Wait`
	return 0, nil
}

// PureIO uses the I/O packages for what does no I/O: nothing to report.
func PureIO(ctx sdk.Context, addr string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if os.IsNotExist(err) {
		return "", err
	}
	h := http.Header{}
	h.Set("Host", host)
	req, _ := http.NewRequest("GET", "http://"+net.JoinHostPort(host, port), nil)
	_ = req.URL.String()
	return h.Get("Host") + net.ParseIP(host).String() + http.StatusText(http.StatusOK), nil
}

// Conns talks over the network.
func Conns(ctx sdk.Context, addr string) (string, error) {
	c, err := net.Dial("tcp", addr) // want `I/O \(net.Dial\)`
	if err != nil {
		return "", err
	}
	_, _ = c.Write(nil)                           // want `I/O \(net.Conn.Write\)`
	_, _ = http.DefaultClient.Do(&http.Request{}) // want `I/O \(net/http.Client.Do\)`
	f, _ := os.Create("x")                        // want `I/O \(os.Create\)`
	_, _ = f.WriteString("x")                     // want `I/O \(os.File.WriteString\)`
	return "", nil
}

// AcrossPackages calls helpers of another package.
func AcrossPackages(ctx sdk.Context, in map[string]int) (int64, error) {
	n := wfutil.Stamp() // want `call to wfutil.Stamp \(time.Now at util.go:14, through unix\) in workflow AcrossPackages: use sdk.Now\(ctx\)`
	_ = wfutil.Sorted(in)
	_ = wfutil.Fine()
	_ = wfutil.Clock{}.Now() // want `call to wfutil.Clock.Now \(time.Now at util.go:38\)`
	return n, nil
}
