// Package acceptance holds the acceptance scenarios of the SDK and the
// workers as tests: each drives real workers against the engine through
// sdk/testenv (an in-memory engine and a fake clock that skips ahead when
// everything waits on time). The package has no API; read the tests as
// worked examples of the workflow API.
//
//	go test ./sdk/acceptance/
//
// With CAIRN_TEST_STORE=postgres each test's engine runs on a PostgreSQL
// schema of its own instead of the in-memory store (newEnv).
package acceptance
