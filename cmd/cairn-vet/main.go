// Command cairn-vet runs workflowcheck, the determinism checker of Cairn
// workflow code (internal/vet; `cairn vet` runs the same), under go vet:
//
//	go install github.com/cairnflow/cairn/cmd/cairn-vet
//	go vet -vettool=$(which cairn-vet) ./...
package main

import (
	"golang.org/x/tools/go/analysis/unitchecker"

	"github.com/cairnflow/cairn/internal/vet"
)

func main() { unitchecker.Main(vet.Analyzer) }
