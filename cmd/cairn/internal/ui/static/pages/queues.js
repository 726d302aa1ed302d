// Task queues and their workers: the backlog of each queue and who polled
// it lately, so that a queue nobody polls is visibly stuck; its activity
// limits (in flight and waiting) and its backlog by limit key.
import { html, get, when, every } from "../lib.js";

export async function render(main) {
  main.innerHTML = html`<div class="head"><h1>Task queues</h1><span class="muted">workers seen in the last 5 minutes</span></div><div id="queues"><p class="muted">Loading…</p></div>`.s;
  return every(3000, async () => {
    const v = await get("/api/queues");
    const qs = v.queues || [];
    main.querySelector("#queues").innerHTML = qs.length ? html`${qs.map(queue)}`.s :
      html`<div class="panel"><p>No task queue has work waiting or a worker polling it.</p></div>`.s;
  });
}

function queue(q) {
  const wp = q.workflowPollers || [], ap = q.activityPollers || [];
  const stuck = (q.workflowBacklog > 0 && !wp.length) || (q.activityBacklog > 0 && !ap.length);
  const pollers = [...wp.map((p) => ({ ...p, kind: "workflow" })), ...ap.map((p) => ({ ...p, kind: "activity" }))];
  return html`<section class="panel" data-queue="${q.name}" aria-label="Task queue ${q.name}">
    <div class="head"><h2>${q.name}</h2>
      ${stuck ? html`<span class="pill bad" data-stuck>stuck: tasks wait and no worker polls for them</span>` : html`<span class="pill ok">served</span>`}
      <span class="muted">backlog: ${q.workflowBacklog} workflow task(s), ${q.activityBacklog} activity task(s)</span></div>
    ${pollers.length ? html`<table aria-label="Pollers of ${q.name}"><thead><tr><th>Worker</th><th>Polls for</th><th>Last seen</th><th>Now</th></tr></thead><tbody>
      ${pollers.map((p) => html`<tr><td class="mono">${p.identity}</td><td>${p.kind} tasks</td><td>${when(p.lastSeen)}</td>
        <td>${p.polling ? html`<span class="pill ok">polling (${p.polling})</span>` : html`<span class="pill">idle</span>`}</td></tr>`)}
      </tbody></table>` : html`<p class="error">No worker polled this queue in the last 5 minutes: start a worker on task queue <code>${q.name}</code>.</p>`}
    ${limits(q)}
  </section>`;
}

// limits draws a queue's activity limits with their use, and its activity
// backlog by limit key (the queue serves keys in turn).
function limits(q) {
  const ls = q.activityLimits || [], keys = q.activityKeys || [];
  const any = (s) => s || html`<span class="muted">any</span>`;
  // A family limit ("tenant/*") bounds each key apart: its keys fill up, not the family.
  const family = (l) => (l.limit.limitKey || "").endsWith("*");
  const used = (max, n) => max > 0 && n >= max ? html`<span class="pill warn">${n} (full)</span>` : `${n}`;
  return html`${ls.length ? html`<table data-limits aria-label="Activity limits of ${q.name}"><thead><tr><th>Activity type</th><th>Limit key</th>
      <th>Max in flight</th><th>Rate /s</th><th>In flight</th><th>Waiting</th></tr></thead><tbody>
    ${ls.map((l) => html`<tr><td class="mono">${any(l.limit.activityType)}</td><td class="mono">${any(l.limit.limitKey)}</td>
      <td>${l.limit.maxInFlight || "–"}</td><td>${l.limit.ratePerSecond ? `${l.limit.ratePerSecond} (burst ${l.limit.burst || Math.max(1, Math.ceil(l.limit.ratePerSecond))})` : "–"}</td>
      <td>${family(l) ? `${l.inFlight}` : used(l.limit.maxInFlight, l.inFlight)}</td><td>${l.waiting}</td></tr>
      ${(l.keys || []).map((k) => html`<tr><td></td><td class="mono">↳ ${k.key}</td><td></td><td></td><td>${used(l.limit.maxInFlight, k.inFlight)}</td><td>${k.waiting}</td></tr>`)}`)}
    </tbody></table>` : ""}
  ${keys.length ? html`<table data-limit-keys aria-label="Activity backlog of ${q.name} by limit key"><thead><tr><th>Limit key</th><th>Queued</th><th>In flight (limited)</th></tr></thead><tbody>
    ${keys.map((k) => html`<tr><td class="mono">${k.key || html`<span class="muted">no key</span>`}</td><td>${k.waiting}</td><td>${k.inFlight}</td></tr>`)}
    </tbody></table>` : ""}`;
}
