// Package testkit runs Cairn beside a test the way people run it: the
// cairn binary built from this module, `cairn server` on ports the kernel
// picks, worker processes (often the test binary itself, re-executed),
// the CLI, and a run's history followed until an event shows up. It is
// for _test.go files only.
//
// A test package that builds binaries hands its TestMain to Main, which
// removes them when the tests are done:
//
//	func TestMain(m *testing.M) { testkit.Main(m) }
//
//	func TestApprove(t *testing.T) {
//		ctx := t.Context()
//		srv := testkit.StartServer(ctx, t, testkit.ServerOptions{})  // --listen 127.0.0.1:0 --ui-listen off
//		w := testkit.Start(t, testkit.Cmd{Path: testkit.Build(t, "./examples/hello"), Args: []string{"run", "--address", srv.Addr}})
//		w.WaitLog(ctx, "worker started")
//		out, err := testkit.CLI(ctx, t, srv.Addr, "workflow", "start", "--type", "Greeting", "--id", "g", "--task-queue", "hello")
//		if err != nil {
//			t.Fatal(err) // the exit code, and what it printed on stderr; out.Code and out.Stdout are there too
//		}
//		t.Log(out.Stdout)
//		c := testkit.Dial(t, srv.Addr, "test")
//		testkit.WaitEvent(ctx, t, c.Service(), "g", "", "the timer", func(ev history.Event) bool {
//			return ev.Type() == history.TypeTimerStarted
//		})
//		srv.Kill() // SIGKILL; Freeze and Thaw are SIGSTOP and SIGCONT
//	}
//
// Every wait is bounded by its context; a context without a deadline (such
// as t.Context()) gets WaitTimeout. A wait that fails fails the test with
// the end of the process's output; the kit never sleeps to let something
// happen. Processes are killed and reaped when the test that started them
// ends, and their output is logged when it failed.
//
// A server's store is a fresh Badger directory, or under
// CAIRN_TEST_STORE=postgres a Postgres schema of the test's own
// (internal/storetest); ServerOptions.Store restarts a server on the data
// of another (Server.Store), and ServerOptions.Data names a Badger
// directory for a test that needs Badger's files. A package whose tests
// start servers ends with pgtest's line: testkit.Main(m, pgtest.Done).
//
// Servers listen on 127.0.0.1:0 and report the address they bound: no
// test depends on Cairn's default ports (7233, 8233) being free. FreeAddr
// is for the one case that needs an address before the server exists — a
// server that must come back at the same address after it was killed.
package testkit
