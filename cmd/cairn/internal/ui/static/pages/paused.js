// Paused: every run waiting for a person — an agent's tool call awaiting
// approval (Approve or Reject), an effect whose outcome is unknown (what
// its action was called with, its key, why, and a form to resolve it), a
// budget used up. A decided run leaves the list and visibly goes on. The
// page polls the list of paused runs (one call); a card's details are
// asked once.
import { html, get, when, payload, runLink, every, status, errorBox, parseJSON } from "../lib.js";
import { resolveForm, wireResolve, budgetForm, wireBudget, approvalForm, wireApprovals, effectText } from "./resolve.js";

// cardKey names a run's card by what it waits for: a new wait is a new card.
const cardKey = (i) => `${i.runId}/${i.pause.kind === "approval" ? i.pause.activityId : i.pause.scheduledEventId}`;

export async function render(main) {
  main.innerHTML = html`<div class="head"><h1>Paused</h1><span class="muted">runs waiting for a person: approvals, effects whose outcome is unknown, budgets used up</span></div>
    <div id="paused-list"><p class="muted">Loading…</p></div><section id="resolved" aria-live="polite"></section>`.s;
  const list = main.querySelector("#paused-list");
  const followed = new Map(); // runs resolved here: workflow id → run id, followed until they close
  const refresh = async () => {
    const v = await get("/api/paused");
    const runs = v.runs || [];
    // Keep the cards a person is typing into; add new ones, drop resolved ones.
    const keep = new Set(runs.map((r) => cardKey(r.info)));
    for (const card of list.querySelectorAll("[data-card]")) if (!keep.has(card.dataset.card) && !card.dataset.resolved) card.remove();
    if (!runs.length && !list.querySelector("[data-card]")) {
      list.innerHTML = html`<div class="panel"><p>Nobody needs to decide anything: no run is paused.</p></div>`.s;
    } else {
      list.querySelector(".panel.empty")?.remove();
      if (!list.querySelector("[data-card]")) list.innerHTML = "";
      // The list is the index's (one call a poll); a new card's details
      // (arguments, ledger entry, Reconcile) are asked once, when it appears.
      const fresh = runs.filter((r) => !list.querySelector(`[data-card="${CSS.escape(cardKey(r.info))}"]`));
      const details = await Promise.all(fresh.map((r) => get("/api/pause", { id: r.info.workflowId, run: r.info.runId }).catch(() => r)));
      for (const d of details) {
        if (!d.info.pause) continue; // resolved meanwhile
        const id = cardKey(d.info);
        if (list.querySelector(`[data-card="${CSS.escape(id)}"]`)) continue;
        list.insertAdjacentHTML("beforeend", card(d).s);
      }
      list.querySelector("#paused-more")?.remove();
      if (v.more) list.insertAdjacentHTML("beforeend", html`<p class="muted" id="paused-more">More runs are paused than shown here: resolve these first, or see <a href="/runs?status=paused">every paused run</a>.</p>`.s);
    }
    const onDone = (wf, run) => {
      followed.set(wf, run);
      const c = [...list.querySelectorAll("[data-card]")].find((x) => x.dataset.wf === wf);
      if (!c) return;
      c.dataset.resolved = "1";
      const since = c.querySelector("[data-since]");
      if (since) since.textContent = `${since.dataset.since} · resolved here`;
    };
    wireResolve(list, onDone);
    wireBudget(list, onDone);
    wireApprovals(list, onDone);
    await follow();
  };
  // follow shows the runs resolved on this page going on, until they close.
  const follow = async () => {
    for (const [wf, run] of followed) {
      const c = [...list.querySelectorAll("[data-card]")].find((x) => x.dataset.wf === wf);
      try {
        const r = await get("/api/run", { id: wf, run });
        const el = c?.querySelector(".after");
        if (el) el.innerHTML = html`<p>Now ${status(r.info.status)} — ${r.info.historyLength} events. ${runLink(wf, run, "Open the run")}</p>`.s;
        const head = c?.querySelector("[data-state]"); // the header says what the run is now, not "paused"
        if (head) head.innerHTML = html`${status(r.info.status)}`.s;
        if (!["running", "paused"].includes(r.info.status)) followed.delete(wf);
      } catch (e) {
        if (c) c.querySelector(".after").innerHTML = errorBox(e).s;
        followed.delete(wf);
      }
    }
  };
  return every(2000, refresh);
}

function card(r) {
  const i = r.info, p = i.pause, a = r.activity || {};
  if (p.kind === "approval") return approvalCard(r);
  if (p.kind === "budget") {
    return html`<article class="panel" data-card="${i.runId}/${p.scheduledEventId}" data-wf="${i.workflowId}" aria-label="Paused run ${i.workflowId}">
      <div class="head"><h2>${runLink(i.workflowId, i.runId)}</h2><span data-state>${status("paused")}</span><span class="muted" data-since="${i.workflowType}">${i.workflowType} · budget used up ${when(p.since)}</span>
        <a href="/agent/${encodeURIComponent(i.workflowId)}/${i.runId}">Conversation</a></div>
      ${budgetForm(i, p, r.budget)}<div class="after"></div></article>`;
  }
  return html`<article class="panel" data-card="${i.runId}/${p.scheduledEventId}" data-wf="${i.workflowId}" aria-label="Paused run ${i.workflowId}">
    <div class="head"><h2>${runLink(i.workflowId, i.runId)}</h2><span data-state>${status("paused")}</span><span class="muted" data-since="${i.workflowType}">${i.workflowType} · waiting since ${when(p.since)}</span></div>
    <div class="columns">
      <dl class="grid">
        <dt>Action</dt><dd><strong>${p.activityType}</strong> (activity ${p.activityId}, attempt ${p.attempt})</dd>
        <dt>Key</dt><dd class="mono wrap">${p.idempotencyKey}</dd>
        <dt>Why unknown</dt><dd>${p.reason}</dd>
        ${a.inDoubt ? html`<dt>Recovery</dt><dd class="error">The store was recovered (${a.inDoubt}): this action may have been performed in what was lost. Check the downstream system before you answer.</dd>` : ""}
        ${r.reconcile ? html`<dt>Reconcile said</dt><dd>${r.reconcile}</dd>` : html`<dt>Reconcile</dt><dd class="muted">none declared, or it did not run</dd>`}
        ${a.lastFailure ? html`<dt>Last failure</dt><dd>${a.lastFailure.message}</dd>` : ""}
        ${r.effect ? html`<dt>Ledger</dt><dd>${status(r.effect.state)} · ${r.effect.attempts} attempt(s)${r.effect.duplicates ? html` · <span class="error">${r.effect.duplicates} duplicate(s)</span>` : ""}</dd>` : ""}
      </dl>
      <div><h3>Arguments</h3>${payload(p.input)}</div>
    </div>
    ${resolveForm(i, p)}
    <div class="after"></div>
  </article>`;
}

// approvalCard is a run whose agent awaits a person's approval: each call
// waiting, its tool, effect class and arguments, with Approve and Reject.
function approvalCard(r) {
  const i = r.info, p = i.pause;
  const calls = r.approvals?.length ? r.approvals : [{ callId: p.callId, tool: p.activityType, effect: p.effect, effectKnown: p.effectKnown, signal: p.signal }];
  return html`<article class="panel" data-card="${cardKey(i)}" data-wf="${i.workflowId}" data-kind="approval" aria-label="Run ${i.workflowId} awaits approval">
    <div class="head"><h2>${runLink(i.workflowId, i.runId)}</h2><span data-state>${status("paused")}</span><span class="pill approval">awaits approval</span>
      <span class="muted" data-since="${i.workflowType}">${i.workflowType} · waiting since ${when(p.since)}</span>
      <a href="/agent/${encodeURIComponent(i.workflowId)}/${i.runId}">Conversation</a></div>
    ${calls.map((c) => html`<div class="columns" data-call="${c.callId}">
      <dl class="grid">
        <dt>Tool</dt><dd><strong>${c.tool || "(not recorded)"}</strong></dd>
        <dt>Effect</dt><dd data-effect>${c.effectKnown ? html`<span class="pill ${c.effect === "Read" ? "" : "warn"}">${c.effect}</span>` : html`<span class="muted">${effectText(false)}</span>`}</dd>
        <dt>Call</dt><dd class="mono">${c.callId}</dd>
        <dt>Signal</dt><dd class="mono">${c.signal}</dd>
      </dl>
      <div><h3>Arguments</h3>${c.arguments ? html`<pre class="payload">${pretty(c.arguments)}</pre>` : i.pause.input && c.callId === p.callId ? payload(i.pause.input) : html`<span class="muted">not recorded</span>`}</div>
    </div>
    ${approvalForm(i, c)}`)}
    <div class="after"></div>
  </article>`;
}

function pretty(s) {
  try { return JSON.stringify(parseJSON(s), null, 2); } catch { return s; }
}
