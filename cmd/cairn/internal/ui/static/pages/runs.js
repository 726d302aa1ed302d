// Runs: every run, newest first; filters by status, type, workflow id
// prefix and start time; counts by status; paused runs stand out.
import { html, get, when, runStatus, short, every, go, rowKeys } from "../lib.js";

// A quarantined run (its stored data is damaged) is listed and counted as
// quarantined, not under the status it had when the damage was found;
// "awaiting approval" keeps the paused runs whose agent awaits a person's
// approval of a tool call (counted among the paused too).
const STATUSES = ["running", "paused", "awaiting_approval", "completed", "failed", "canceled", "terminated", "timed_out", "continued_as_new", "quarantined"];

export async function render(main, _params, q) {
  const f = { status: q.get("status") || "", type: q.get("type") || "", prefix: q.get("prefix") || "",
    after: q.get("after") || "", before: q.get("before") || "", page: q.get("page") || "" };
  main.innerHTML = html`
    <div class="head"><h1>Runs</h1></div>
    <form class="filters" id="filters" role="search">
      <div><label for="f-prefix">Workflow id starts with</label><input id="f-prefix" name="prefix" value="${f.prefix}" data-search placeholder="invoice-"></div>
      <div><label for="f-type">Type</label><input id="f-type" name="type" value="${f.type}" placeholder="PayInvoice"></div>
      <div><label for="f-status">Status</label><select id="f-status" name="status">
        <option value="">any</option>${STATUSES.map((s) => html`<option value="${s}" ${s === f.status ? html`selected` : ""}>${s.replace(/_/g, " ")}</option>`)}
      </select></div>
      <div><label for="f-after">Started after</label><input id="f-after" name="after" type="datetime-local" step="1" value="${f.after}"></div>
      <div><label for="f-before">Started before</label><input id="f-before" name="before" type="datetime-local" step="1" value="${f.before}"></div>
      <div><button type="submit" class="primary">Filter</button></div>
      <div><a class="button" href="/runs">Clear</a></div>
    </form>
    <div class="counts" id="counts" aria-label="Runs by status"></div>
    <div id="list"><p class="muted">Loading…</p></div>`.s;
  const form = main.querySelector("#filters");
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    const p = new URLSearchParams();
    for (const [k, v] of new FormData(form)) if (v) p.set(k, v);
    go("/runs" + (p.toString() ? "?" + p : ""));
  });
  form.querySelector("#f-status").addEventListener("change", () => form.requestSubmit());

  const query = (over) => {
    const p = new URLSearchParams();
    for (const [k, v] of Object.entries({ ...f, page: "", ...over })) if (v) p.set(k, v);
    return "/runs" + (p.toString() ? "?" + p : "");
  };
  const iso = (v) => (v ? new Date(v).toISOString() : ""); // datetime-local is local time
  const filt = { status: f.status, type: f.type, prefix: f.prefix, after: iso(f.after), before: iso(f.before), page: f.page };
  const counts = async () => {
    const c = await get("/api/counts", { type: f.type, prefix: f.prefix, after: filt.after, before: filt.before });
    const by = Object.fromEntries((c.byStatus || []).map((x) => [x.status, x.count]));
    main.querySelector("#counts").innerHTML = html`
      <a href="${query({ status: "" })}" class="pill ${f.status ? "" : "active"}">all ${c.total}</a>
      ${STATUSES.filter((s) => by[s]).map((s) => html`<a href="${query({ status: s })}" class="pill ${s} ${f.status === s ? "active" : ""}" data-count="${s}">${s.replace(/_/g, " ")} ${by[s]}</a>`)}`.s;
  };
  const list = async () => {
    const r = await get("/api/runs", filt);
    const rows = r.workflows || [];
    const sel = main.querySelector("tr.sel")?.dataset.href;
    main.querySelector("#list").innerHTML = html`
      <table class="runs" id="runs-table" aria-label="Runs: j and k move, Enter opens">
        <thead><tr><th>Workflow id</th><th>Status</th><th>Type</th><th>Run</th><th>Queue</th><th>Started</th><th>Closed</th><th class="num">Events</th></tr></thead>
        <tbody>${rows.length ? rows.map((w) => html`
          <tr class="clickable ${w.status === "paused" ? "paused" : ""}" data-href="/runs/${encodeURIComponent(w.workflowId)}/${w.runId}" data-run="${w.workflowId}">
            <td><a href="/runs/${encodeURIComponent(w.workflowId)}/${w.runId}">${w.workflowId}</a>
              ${w.pause ? html`<div class="muted" data-waits="${w.pause.kind}">waits for a person: ${waitsFor(w.pause)}</div>` : ""}
              ${w.corrupt ? html`<div class="error">quarantined: ${w.corrupt}</div>` : ""}
              ${w.duplicates ? html`<div class="error">${w.duplicates} duplicate effect(s)</div>` : ""}</td>
            <td>${runStatus(w)}</td>
            <td>${w.workflowType}</td>
            <td class="mono" title="${w.runId}">${short(w.runId)}</td>
            <td>${w.taskQueue}</td>
            <td>${when(w.startTime)}</td>
            <td>${w.closeTime ? when(w.closeTime) : html`<span class="muted">open</span>`}</td>
            <td class="num">${w.historyLength}</td>
          </tr>`) : html`<tr><td colspan="8" class="muted">No runs${f.status || f.type || f.prefix || f.after || f.before ? " match these filters" : " yet: start one with cairn workflow start"}.</td></tr>`}
        </tbody>
      </table>
      <p class="row">${f.page ? html`<a class="button" href="${query({})}">First page</a>` : ""}
        ${r.next ? html`<a class="button" href="${query({ page: r.next })}" id="next-page">Next page</a>` : ""}</p>`.s;
    rowKeys(main.querySelector("#runs-table"));
    if (sel) main.querySelector(`tr[data-href="${CSS.escape(sel)}"]`)?.classList.add("sel");
  };
  const stops = [every(3000, list), every(10000, counts)];
  return () => stops.forEach((s) => s());
}

// waitsFor says what a paused run waits for.
function waitsFor(p) {
  if (p.kind === "budget") return "its budget is used up";
  if (p.kind === "approval") {
    const more = p.approvals > 1 ? ` and ${p.approvals - 1} more` : "";
    return `approval of ${p.activityType || "a tool call"}${p.effectKnown ? ` (${p.effect})` : ""}${more}`;
  }
  return `${p.activityType} outcome unknown`;
}
