package browser

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/cairnflow/cairn/internal/pgtest"
	"github.com/cairnflow/cairn/internal/testkit"
)

// The Cluster page against a real cluster: two `cairn server` processes
// sharing a Postgres schema, each serving its web UI. Either's page lists
// both servers alive, heartbeating by the database's clock, and the 256
// shards split between them as ranges, each shard once; the answering
// server is marked and its counters shown. A third server with an id
// made of markup joins (its id is shown as text: nothing of it runs or
// loads) and is killed: the page shows it gone, and its shards served by
// the two others again, every shard with a live owner.
func TestClusterPage(t *testing.T) {
	exe := chromium(t)
	dbURL, schema := pgtest.URL(t)
	ctx := t.Context()
	server := func(id string) *testkit.Server {
		return testkit.StartServer(ctx, t, testkit.ServerOptions{UI: true, Name: "cairn server " + id,
			Args: []string{"--store", dbURL, "--schema", schema, "--server-id", id, "--lease-ttl", "5s"}})
	}
	a := server("cairn-a")
	b := server("cairn-b")
	shots := screenshotDir(t)
	bctx, _ := browse(t, exe)

	run(t, bctx, "see both servers share the 256 shards",
		chromedp.Navigate(strings.TrimSuffix(a.UI, "/")+"/cluster"),
		until(`document.querySelector("#servers") !== null`),
		until(servesShards(map[string]int{"cairn-a": 128, "cairn-b": 128})),
	)
	servers := textOf(t, bctx, "#servers")
	for _, want := range []string{"cairn-a", "cairn-b", a.Addr, b.Addr, "this server"} {
		if !strings.Contains(servers, want) {
			t.Errorf("the servers lack %q:\n%s", want, servers)
		}
	}
	if n := strings.Count(servers, "this server"); n != 1 {
		t.Errorf("%d servers are marked as the one answering:\n%s", n, servers)
	}
	check(t, bctx, "the answering server is marked", `document.querySelector('#servers tr[data-server="cairn-a"]').textContent.includes("this server")`)
	check(t, bctx, "every heartbeat is a moment ago, by the database's clock",
		`[...document.querySelectorAll("#servers tr[data-server] td:nth-child(5)")].every((td) => /^(now|\d+ms ago|\d\.\d\ds ago)$/.test(td.textContent.trim()))`)
	if s := textOf(t, bctx, "#cluster-summary"); !strings.Contains(s, "2 of 2 server(s) alive, 256 shards") || !strings.Contains(s, "answered by cairn-a") {
		t.Errorf("the summary: %s", s)
	}
	counters := textOf(t, bctx, "#counters")
	for _, want := range []string{"Shards taken", "Given up", "Lost to a takeover", "Commits fenced", "Calls forwarded", "Tasks given back"} {
		if !strings.Contains(counters, want) {
			t.Errorf("the counters lack %q:\n%s", want, counters)
		}
	}
	// cairn-a took every shard alone, then gave half to cairn-b.
	if m := regexp.MustCompile(`Shards taken\s*(\d+)\s*Given up\s*(\d+)`).FindStringSubmatch(counters); m == nil || atoi(m[1]) < 128 || atoi(m[2]) < 1 {
		t.Errorf("cairn-a's counters: %q", counters)
	}
	shot(t, bctx, shots, "cluster")

	run(t, bctx, "ask the other server",
		chromedp.Navigate(strings.TrimSuffix(b.UI, "/")+"/cluster"),
		until(`document.querySelector('#servers tr[data-server="cairn-b"]')?.textContent.includes("this server")`),
		until(servesShards(map[string]int{"cairn-a": 128, "cairn-b": 128})),
	)

	const odd = `<img src=x onerror=alert(1)>&amp;`
	c := server(odd)
	run(t, bctx, "see a server whose id is markup join, its id as text",
		until(`[...document.querySelectorAll("#servers tr[data-server]")].some((tr) => tr.dataset.server === `+jsString(odd)+
			` && tr.children[0].textContent.startsWith(`+jsString(odd)+`) && tr.textContent.includes("alive"))`),
	)
	check(t, bctx, "the id's markup is not markup", `document.querySelector("main img") === null`)
	c.Kill()
	run(t, bctx, "see it gone, and its shards taken over",
		until(`[...document.querySelectorAll("#servers tr[data-server]")].some((tr) => tr.dataset.server === `+jsString(odd)+` && tr.textContent.includes("gone"))`),
		until(servesShards(map[string]int{"cairn-a": 128, "cairn-b": 128})),
	)
}

// servesShards is a condition on the Cluster page: the servers named are
// alive and serve these many shards each, the shards-by-owner table gives
// every shard exactly one live owner, with these servers' ranges, and no
// shard is without one.
func servesShards(want map[string]int) string {
	var b strings.Builder
	b.WriteString(`(() => { const want = {`)
	for id, n := range want {
		b.WriteString(jsString(id) + ": " + strconv.Itoa(n) + ", ")
	}
	b.WriteString(`};
	  const rows = Object.fromEntries([...document.querySelectorAll("#servers tr[data-server]")].map((tr) => [tr.dataset.server, tr]));
	  for (const [id, n] of Object.entries(want)) {
	    const tr = rows[id];
	    if (!tr || !tr.textContent.includes("alive") || tr.querySelector("[data-shards]").textContent !== String(n)) return false;
	  }
	  if (document.querySelector("#ownerless, #shards tr[data-ownerless]")) return false;
	  const seen = new Array(256).fill(0);
	  for (const tr of document.querySelectorAll("#shards tr[data-owner]")) {
	    const n = want[tr.dataset.owner];
	    if (n === undefined || Number(tr.children[1].textContent) !== n) return false;
	    let count = 0;
	    for (const part of tr.children[2].textContent.trim().split(",")) {
	      const [lo, hi] = part.split("-").map(Number);
	      for (let s = lo; s <= (hi ?? lo); s++) { seen[s]++; count++; }
	    }
	    if (count !== n) return false;
	  }
	  return seen.every((x) => x === 1);
	})()`)
	return b.String()
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}
