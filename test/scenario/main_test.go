package scenario_test

import (
	"testing"

	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/testkit"
)

// TestMain removes the binaries the tests built and says in one line when
// the Postgres suites were skipped (CAIRN_TEST_STORE=postgres without a
// database).
func TestMain(m *testing.M) { testkit.Main(m, pgtest.Done) }
