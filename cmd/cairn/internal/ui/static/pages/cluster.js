// The cluster: the servers sharing the store, who serves which shard, the
// shards without a live owner (a takeover under way) and the answering
// server's counters — `cairn cluster describe`, refreshed every few
// seconds. Ages are by the database's clock, as the server computed them.
import { html, raw, get, every, fmtMs, durMs } from "../lib.js";

export async function render(main) {
  main.innerHTML = html`<div class="head"><h1>Cluster</h1><span class="muted" id="cluster-summary"></span></div>
    <div id="cluster"><p class="muted">Loading…</p></div>`.s;
  return every(3000, async () => {
    const v = await get("/api/cluster");
    main.querySelector("#cluster-summary").innerHTML = (v.clustered ? summary(v) : html``).s;
    main.querySelector("#cluster").innerHTML = (v.clustered ? cluster(v) : alone()).s;
  });
}

// alone is the page of a server on the embedded store: no cluster.
function alone() {
  return html`<div class="panel" id="cluster-alone"><p>One server on the embedded store; <code>cairn server --store postgres://…</code> to share a database.</p></div>`;
}

// ageOf writes a duration the server computed by the database's clock
// ("350ms ago"; "now" for none).
const ageOf = (d) => (durMs(d) > 0 ? fmtMs(durMs(d)) + " ago" : "now");

// breakable lets ranges ("0-3,7,9-12") wrap after a comma only.
const breakable = (ranges) => (ranges || "").split(",").map((r, i) => html`${i ? raw(",<wbr>") : ""}${r}`);

function summary(v) {
  const alive = (v.servers || []).filter((s) => s.alive).length;
  return html`${alive} of ${(v.servers || []).length} server(s) alive, ${v.shards} shards; answered by
    <span class="mono">${v.self}</span>; database clock <time datetime="${v.now}" title="${v.now}">${new Date(v.now).toLocaleTimeString()}</time>`;
}

function cluster(v) {
  const servers = v.servers || [], owners = v.owners || [], st = v.stats || {};
  const ownerless = owners.filter((g) => !g.held);
  return html`
    ${v.ownerless ? html`<div class="callout" id="ownerless" role="status"><strong>${v.ownerless} shard(s) without a live owner: a takeover is under way.</strong>
      ${ownerless.map((g) => html`<div>${g.count} (${g.ranges}): ${g.owner
        ? html`the lease of <span class="mono">${g.owner}</span> ran out or was given up${g.ownerlessFor ? ` ${ageOf(g.ownerlessFor)}` : ""}`
        : "never owned yet"}</div>`)}
      <div class="muted">Runs of these shards wait until a live server takes them, within a tick of its loop.</div></div>` : ""}
    <section class="panel cluster" aria-label="Servers">
      <h2>Servers</h2>
      <table id="servers" aria-label="Servers sharing the store">
        <thead><tr><th>Server</th><th>Address</th><th>State</th><th class="num">Shards</th><th>Last heartbeat</th><th>Version</th></tr></thead>
        <tbody>${servers.length ? servers.map((s) => html`<tr data-server="${s.id}" class="${s.alive ? "" : "gone"}">
          <td class="mono">${s.id}${s.id === v.self ? html` <span class="pill" title="the server answering this page">this server</span>` : ""}</td>
          <td class="mono">${s.address || html`<span class="muted">–</span>`}</td>
          <td>${s.alive ? html`<span class="pill ok">alive</span>` : html`<span class="pill bad" title="its registration ran out: it stopped heartbeating">gone</span>`}</td>
          <td class="num" data-shards>${s.shards}</td>
          <td title="${s.lastHeartbeat || ""}">${ageOf(s.heartbeatAge)}</td>
          <td class="mono">${s.version || ""}</td></tr>`)
        : html`<tr><td colspan="6" class="muted">No server is registered.</td></tr>`}</tbody>
      </table>
    </section>
    <section class="panel cluster" aria-label="Shards">
      <h2>Shards by owner</h2>
      <table id="shards" aria-label="Shards by owner">
        <thead><tr><th>Owner</th><th class="num">Shards</th><th>Which</th></tr></thead>
        <tbody>${owners.map((g) => html`<tr class="${g.held ? "" : "paused"}" ${g.held ? html`data-owner="${g.owner}"` : html`data-ownerless="${g.owner || ""}"`}>
          <td class="nowrap">${g.held ? html`<span class="mono">${g.owner}</span>` : html`<span class="pill warn">no live owner</span> ${g.owner ? html`<span class="muted">lease of <span class="mono">${g.owner}</span> ran out</span>` : html`<span class="muted">never owned</span>`}`}</td>
          <td class="num">${g.count}</td><td class="mono">${breakable(g.ranges)}</td></tr>`)}</tbody>
      </table>
    </section>
    <section class="panel cluster" aria-label="This server's counters" id="counters">
      <h2>This server, <span class="mono">${v.self}</span>, <span class="muted">since it started</span></h2>
      <dl class="stats">
        ${[["Shards taken", st.acquired], ["Given up", st.released], ["Lost to a takeover", st.lost], ["Commits fenced", st.fencedCommits], ["Refused past its lease", st.refusedPastLease],
          ["Calls forwarded", st.forwarded], ["Tasks given back", st.handedBack]].map(([k, n]) => html`<div><dt>${k}</dt><dd>${n || 0}</dd></div>`)}
      </dl>
    </section>`;
}
