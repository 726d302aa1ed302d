package pgstore

import (
	"testing"

	"github.com/cairnflow/cairn/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
