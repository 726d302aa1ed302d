// The effects ledger: every action with an idempotency key, across the
// runs of its workflow id; search by workflow id or key; duplicates
// flagged.
import { html, get, when, status, payloadText, runLink, short, every, go, rowKeys } from "../lib.js";

export async function render(main, _params, q) {
  const f = { id: q.get("id") || "", key: q.get("key") || "", dups: q.get("dups") || "", page: q.get("page") || "" };
  main.innerHTML = html`<div class="head"><h1>Effects ledger</h1><span class="muted">every action with an idempotency key; it outlives runs</span></div>
    <form class="filters" id="effects-filter" role="search">
      <div><label for="e-id">Workflow id</label><input id="e-id" name="id" value="${f.id}" data-search placeholder="invoice-INV-9"></div>
      <div><label for="e-key">Key starts with</label><input id="e-key" name="key" value="${f.key}" placeholder="4f1c…"></div>
      <div><label><input type="checkbox" name="dups" value="1" ${f.dups ? html`checked` : ""}> Duplicates only</label></div>
      <div><button type="submit" class="primary">Search</button></div><div><a class="button" href="/effects">Clear</a></div>
    </form><div id="ledger"><p class="muted">Loading…</p></div>`.s;
  const form = main.querySelector("#effects-filter");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    go("/effects" + (p.toString() ? "?" + p : ""));
  });
  return every(5000, async () => {
    const v = await get("/api/effects", f);
    const effs = v.effects || [];
    main.querySelector("#ledger").innerHTML = html`<table id="ledger-table" aria-label="Ledger entries">
      <thead><tr><th>Workflow id</th><th>Activity</th><th>Key</th><th>State</th><th class="num">Attempts</th><th>Duplicates</th><th>Runs</th><th>Result</th><th>Updated</th></tr></thead><tbody>
      ${effs.length ? effs.map((e) => html`<tr class="${e.duplicates ? "paused" : ""}" data-href="/runs/${encodeURIComponent(e.workflowId)}/${e.runId || ""}">
        <td>${runLink(e.workflowId, e.runId)}</td><td>${e.activityType} <span class="muted">${e.effect}</span></td>
        <td class="mono wrap">${e.idempotencyKey}</td><td>${status(e.state)}</td><td class="num">${e.attempts}</td>
        <td>${e.duplicates ? html`<span class="pill bad" data-duplicate>DUPLICATE ×${e.duplicates}</span>` : ""}${e.conflicts ? html` <span class="pill warn">conflict ×${e.conflicts}</span>` : ""}
          ${(e.reports || []).filter((r) => r.verdict !== "confirmation").map((r) => html`<div class="muted">${r.verdict.replace(/_/g, " ")}: ${r.detail}</div>`)}</td>
        <td>${(e.runIds || []).map((r) => html`${runLink(e.workflowId, r, short(r))} `)}</td>
        <td class="ellipsis">${payloadText(e.result)}</td><td>${when(e.updated)}</td></tr>`)
      : html`<tr><td colspan="9" class="muted">No ledger entry${f.id || f.key || f.dups ? " matches" : " yet: only Idempotent and SideEffect activities have one"}.</td></tr>`}
      </tbody></table>
      <p class="row">${f.page ? html`<a class="button" href="/effects?${new URLSearchParams({ ...f, page: "" })}">First page</a>` : ""}
      ${v.next ? html`<a class="button" href="/effects?${new URLSearchParams({ ...f, page: v.next })}">Next page</a>` : ""}</p>`.s;
    rowKeys(main.querySelector("#ledger-table"));
  });
}
