// Schedules: every schedule with its state and next action, and one
// schedule's spec, policies, next and recent actions, with pause, unpause
// and trigger — `cairn schedule list` and `describe`, refreshed every few
// seconds.
import { html, get, post, when, status, runLink, every, rowKeys, confirmDialog, toast, errorBox } from "../lib.js";

export async function render(main, params) {
  const id = params[0];
  return id ? one(main, id) : list(main);
}

function spec(s) {
  const sp = s.spec || {};
  const parts = [];
  if (sp.cron) parts.push(html`cron <code>${sp.cron}</code>${sp.timeZone ? html` in ${sp.timeZone}` : ""}`);
  else parts.push(html`every ${sp.interval}${sp.offset ? html` + ${sp.offset}` : ""}`);
  if (sp.jitter) parts.push(html`, jitter ${sp.jitter}`);
  return html`${parts}`;
}

function state(s) {
  return s.paused ? html`<span class="pill warn" data-state="paused">paused${s.note ? html`: ${s.note}` : ""}</span>`
    : html`<span class="pill ok" data-state="active">active</span>`;
}

async function list(main) {
  main.innerHTML = html`<div class="head"><h1>Schedules</h1><span class="muted">runs started on a cron expression or an interval</span></div>
    <div id="schedules"><p class="muted">Loading…</p></div>`.s;
  return every(3000, async () => {
    const v = await get("/api/schedules");
    const ss = v.schedules || [];
    main.querySelector("#schedules").innerHTML = html`<table id="schedules-table" aria-label="Schedules">
      <thead><tr><th>Schedule</th><th>Spec</th><th>Workflow type</th><th>State</th><th>Next action</th><th class="num">Actions</th><th>Last action</th></tr></thead><tbody>
      ${ss.length ? ss.map((s) => {
        const last = (s.recentActions || []).at(-1);
        const next = (s.nextActionTimes || [])[0];
        return html`<tr data-schedule="${s.scheduleId}" data-href="/schedules/${encodeURIComponent(s.scheduleId)}">
          <td><a href="/schedules/${encodeURIComponent(s.scheduleId)}">${s.scheduleId}</a></td><td>${spec(s.schedule)}</td>
          <td>${s.schedule.action.workflowType}</td><td>${state(s.schedule)}</td>
          <td>${next ? when(next) : html`<span class="muted">–</span>`}</td><td class="num">${s.actions}</td>
          <td>${last ? html`${runLink(last.workflowId, last.runId)} ${status(last.status)}` : html`<span class="muted">none yet</span>`}</td></tr>`;
      }) : html`<tr><td colspan="7" class="muted">No schedule yet: <code>cairn schedule create --id ID --cron EXPR --type TYPE --task-queue QUEUE</code>.</td></tr>`}
      </tbody></table>`.s;
    rowKeys(main.querySelector("#schedules-table"));
  });
}

async function one(main, id) {
  main.innerHTML = html`<div class="head"><h1>Schedule <span class="mono">${id}</span></h1><span id="sched-state"></span>
    <div class="row"><button type="button" id="sched-pause"></button> <button type="button" id="sched-trigger" class="primary">Trigger now</button></div></div>
    <div id="schedule"><p class="muted">Loading…</p></div>`.s;
  let info = null;
  main.querySelector("#sched-pause").addEventListener("click", async () => {
    if (!info) return;
    const action = info.schedule.paused ? "unpause" : "pause";
    const v = await confirmDialog({ title: `${action === "pause" ? "Pause" : "Unpause"} ${id}?`,
      body: action === "pause" ? "No action is taken while it is paused, nor caught up after." : "Its next nominal time fires; the ones passed while paused do not.",
      confirm: action === "pause" ? "Pause" : "Unpause", fields: [{ name: "note", label: "Note" }] });
    if (v) act(action, v.note);
  });
  main.querySelector("#sched-trigger").addEventListener("click", () => act("trigger", ""));
  const act = async (action, note) => {
    try {
      await post("/api/schedule", { scheduleId: id, action, note });
      toast(`${action}: done`);
      refresh();
    } catch (e) {
      main.querySelector("#schedule").insertAdjacentHTML("afterbegin", errorBox(e).s);
    }
  };
  const refresh = async () => {
    info = await get("/api/schedule", { id });
    const s = info.schedule, p = s.policies || {};
    main.querySelector("#sched-state").innerHTML = state(s).s;
    main.querySelector("#sched-pause").textContent = s.paused ? "Unpause" : "Pause";
    const recent = [...(info.recentActions || [])].reverse();
    main.querySelector("#schedule").innerHTML = html`<section class="panel" aria-label="Spec and policies"><dl class="keys">
        <dt>Spec</dt><dd>${spec(s)}</dd>
        ${s.spec.start || s.spec.end ? html`<dt>Between</dt><dd>${s.spec.start || "–"} and ${s.spec.end || "–"}</dd>` : ""}
        <dt>Action</dt><dd>${s.action.workflowType} on task queue <code>${s.action.taskQueue}</code></dd>
        <dt>Overlap</dt><dd>${p.overlap}</dd><dt>Catch-up window</dt><dd>${p.catchupWindow || "1 year (default)"}</dd>
        <dt>Counts</dt><dd>${info.actions} started, ${info.overlapSkipped} skipped by the overlap policy, ${info.missedCatchup} missed (older than the catch-up window)</dd>
        ${(info.buffered || []).length ? html`<dt>Buffered</dt><dd>${info.buffered.map((b) => html`<div>${b}</div>`)}</dd>` : ""}
      </dl></section>
      <section class="panel" aria-label="Next actions"><h2>Next actions</h2>
        ${(info.nextActionTimes || []).length ? html`<ol id="next-actions">${info.nextActionTimes.map((t) => html`<li><time datetime="${t}">${t}</time> (${when(t)})</li>`)}</ol>`
          : html`<p class="muted" id="next-actions">None${s.paused ? ": paused" : ""}.</p>`}</section>
      <section class="panel" aria-label="Recent actions"><h2>Recent actions</h2>
        <table id="recent-actions" aria-label="Recent actions"><thead><tr><th>Nominal time</th><th>Started</th><th>Trigger</th><th>Run</th><th>Status</th></tr></thead><tbody>
        ${recent.length ? recent.map((a) => html`<tr data-href="/runs/${encodeURIComponent(a.workflowId)}/${a.runId || ""}">
          <td>${a.nominalTime}</td><td>${when(a.actualTime)}</td><td>${a.trigger}</td><td>${runLink(a.workflowId, a.runId)}</td>
          <td>${a.error ? html`<span class="pill bad">not started</span> ${a.error}` : status(a.status)}</td></tr>`)
        : html`<tr><td colspan="5" class="muted">No action yet.</td></tr>`}</tbody></table></section>`.s;
    rowKeys(main.querySelector("#recent-actions"));
  };
  return every(3000, refresh);
}
