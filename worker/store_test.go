package worker_test

import (
	"os"
	"testing"

	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/storetest"
	"github.com/cairnflow/cairn/sdk/testenv"
)

// TestMain says in one line when the Postgres suites were skipped
// (CAIRN_TEST_STORE=postgres without a database).
func TestMain(m *testing.M) {
	if os.Getenv(sinkEnv) != "" {
		runSink() // BenchmarkTracing's collector, in a process of its own
		return
	}
	pgtest.Main(m)
}

// newEnv is testenv.New on the suites' store: the env's own in-memory
// one, or with CAIRN_TEST_STORE=postgres a schema of the test's own,
// every shard of it served by the env's engine (internal/storetest).
func newEnv(t testing.TB, opts testenv.Options) *testenv.Env {
	t.Helper()
	if st, owner := storetest.Embedded(t, "worker"); st != nil {
		opts.Engine.Store, opts.Engine.Shards = st, owner
	}
	return testenv.New(t, opts)
}
