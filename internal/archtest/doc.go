// Package archtest holds the test that keeps Cairn's floor plan: which
// package may import which (docs/architecture.md, "Import rules"). The
// rules are data (rules.go); the test reads the module's import graph with
// `go list` and fails on every import that crosses one.
//
//	go test ./internal/archtest
package archtest
