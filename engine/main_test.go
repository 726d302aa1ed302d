package engine

import (
	"testing"

	"github.com/cairnflow/cairn/internal/pgtest"
)

// TestMain says in one line when the Postgres suites were skipped
// (CAIRN_TEST_STORE=postgres with no database reachable).
func TestMain(m *testing.M) { pgtest.Main(m) }
