package vet_test

import (
	"testing"

	"golang.org/x/tools/go/analysis/analysistest"

	"github.com/cairnflow/cairn/internal/vet"
)

// TestWorkflowcheck runs the analyzer on testdata/src/wf, a table of good
// and bad workflow functions whose every bad line says, in a // want
// comment, the finding it must produce.
func TestWorkflowcheck(t *testing.T) {
	analysistest.Run(t, analysistest.TestData(), vet.Analyzer, "wf")
}
