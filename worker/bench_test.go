//go:build unix

package worker_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	netpkg "net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/cairnflow/cairn/engine"
	"github.com/cairnflow/cairn/history/badgerstore"
	"github.com/cairnflow/cairn/sdk/client"
	"github.com/cairnflow/cairn/worker"
)

// BenchmarkOneActivityWorkflowsSDK measures durable one-activity workflows
// per second through the whole stack in one process: client.NewLocal over
// an engine on an on-disk Badger store with fsync on (every acknowledged
// transition is durable), the real clock, and a worker.Worker running the
// Hello workflow (one Greet activity) on the SDK runtime. Many workflows
// are started concurrently and each is awaited with Run.Get. Run it with
//
//	go test -run '^$' -bench OneActivityWorkflowsSDK -benchtime 20000x ./worker
//
// It is not run by plain `go test`.
func BenchmarkOneActivityWorkflowsSDK(b *testing.B) {
	// The worker runs with its default options: what an embedding
	// application gets without tuning.
	b.Run("inflight=256", func(b *testing.B) { benchOneActivitySDK(b, 256, worker.Options{}) })
}

func benchOneActivitySDK(b *testing.B, inflight int, wo worker.Options) {
	benchOneActivityWith(b, inflight, client.Options{}, wo)
}

// BenchmarkTracing is BenchmarkOneActivityWorkflowsSDK with OpenTelemetry
// tracing off (no provider: the global no-op) and on (the SDK's provider,
// every span sampled, batched to the OTLP/HTTP exporter and sent to an
// HTTP server that reads and discards the bodies — in a process of its
// own, the test binary run again, as a collector is: its CPU is not the
// workflow's), the two interleaved in one sitting with -count. Compare
// cpu-µs/workflow:
//
//	go test -run '^$' -bench Tracing -benchtime 5000x -count 5 ./worker
func BenchmarkTracing(b *testing.B) {
	b.Run("off", func(b *testing.B) { benchOneActivitySDK(b, 256, worker.Options{}) })
	b.Run("on", func(b *testing.B) {
		url := startSink(b)
		exp, err := otlptracehttp.New(context.Background(), otlptracehttp.WithEndpointURL(url+"/v1/traces"))
		if err != nil {
			b.Fatal(err)
		}
		counted := &countingExporter{SpanExporter: exp}
		tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(counted))
		benchOneActivityWith(b, 256, client.Options{TracerProvider: tp}, worker.Options{TracerProvider: tp})
		if err := tp.Shutdown(context.Background()); err != nil {
			b.Fatal(err)
		}
		// 4 expected (the start, two workflow tasks, the attempt); fewer
		// means the batcher dropped spans and the figure is low.
		b.ReportMetric(float64(counted.n.Load())/float64(b.N), "spans/workflow")
	})
}

// sinkEnv makes the test binary serve as BenchmarkTracing's collector.
const sinkEnv = "CAIRN_BENCH_OTLP_SINK"

// startSink runs the test binary again as an OTLP/HTTP sink and returns
// its address; the process ends with the benchmark.
func startSink(b *testing.B) string {
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), sinkEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		b.Fatalf("the sink process: %v", err)
	}
	return strings.TrimSpace(line)
}

// runSink serves OTLP/HTTP requests, reading and discarding their bodies,
// and prints its address; it runs until killed.
func runSink() {
	ln, err := netpkg.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("http://%s\n", ln.Addr())
	_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
}

// countingExporter counts the spans it exports.
type countingExporter struct {
	sdktrace.SpanExporter
	n atomic.Int64
}

func (e *countingExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return e.SpanExporter.ExportSpans(ctx, spans)
}

func benchOneActivityWith(b *testing.B, inflight int, co client.Options, wo worker.Options) {
	st, err := badgerstore.Open(badgerstore.Options{Dir: b.TempDir()}) // fsync on
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.Open(engine.Options{Store: st})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = eng.Close()
		_ = st.Close()
	}()
	c := client.NewLocal(eng, co)
	wo.TaskQueue = "bench"
	w, err := worker.New(c, wo)
	if err != nil {
		b.Fatal(err)
	}
	if err := w.RegisterWorkflow(Hello); err != nil {
		b.Fatal(err)
	}
	if err := w.RegisterActivity(Greet); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- w.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			b.Error(err)
		}
	}()

	var (
		next  atomic.Int64
		total = int64(b.N)
		wg    sync.WaitGroup
		errc  = make(chan error, inflight)
	)
	b.ReportAllocs()
	b.ResetTimer()
	start, cpu0 := time.Now(), cpuTime()
	for range inflight {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				run, err := c.StartWorkflow(ctx, client.StartOptions{ID: fmt.Sprint("bench-", i), TaskQueue: "bench"}, Hello, "world")
				if err == nil {
					var out string
					err = run.Get(ctx, &out)
				}
				if err != nil {
					errc <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "workflows/s")
	b.ReportMetric(float64(eng.Stats().Commits)/elapsed.Seconds(), "commits/s")
	// CPU time per workflow (user+system, the whole process: client,
	// engine, store and worker): steadier than the rate on a shared machine.
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(b.N), "cpu-µs/workflow")
}

// cpuTime is the process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkOneActivityWorkflowsSDKSequential is the same stack with one
// workflow at a time: its ns/op is the embedded start→result latency.
//
//	go test -run '^$' -bench OneActivityWorkflowsSDKSequential -benchtime 1000x ./worker
func BenchmarkOneActivityWorkflowsSDKSequential(b *testing.B) {
	benchOneActivitySDK(b, 1, worker.Options{})
}
