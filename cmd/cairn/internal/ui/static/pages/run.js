// A run: its summary, what it waits for, its effects, and its history as a
// live timeline (server-sent events).
import { html, get, errorBox, post, when, status, runStatus, short, payload, payloadText, runLink, toast, confirmDialog, who, durMs, fmtMs, setLive, parseJSON, go } from "../lib.js";
import { resolveForm, wireResolve, budgetForm, wireBudget, approvalForm, wireApprovals, effectText } from "./resolve.js";

export async function render(main, [id, runId]) {
  main.innerHTML = html`
    <div class="head"><h1 id="run-title">${id}</h1><span id="run-status"></span><span class="mono muted" id="run-id"></span>
      <span id="base-link"></span><div class="actions" id="actions"></div></div>
    <div id="stream-error"></div><div id="damage"></div>
    <div id="pause"></div><div id="waiting"></div>
    <div class="columns"><section class="panel" aria-labelledby="h-summary"><h2 id="h-summary">Summary</h2><div id="summary"><p class="muted">Loading…</p></div></section>
      <section class="panel" aria-labelledby="h-io"><h2 id="h-io">Input and outcome</h2><div id="io"></div></section></div>
    <section id="pending"></section>
    <section id="effects"></section>
    <section id="chain"></section>
    <section aria-labelledby="h-history"><h2 id="h-history">History <span class="muted" id="history-count"></span></h2>
      <table class="timeline" id="timeline" aria-label="History, one row per event">
        <thead><tr><th class="num">#</th><th>Time</th><th>Event</th><th>Name</th><th class="num">Attempt</th><th>Duration</th><th>Details</th><th></th></tr></thead>
        <tbody></tbody></table></section>`.s;

  let maxDur = 1;
  const tbody = main.querySelector("#timeline tbody");
  const addRows = (rows) => {
    for (const r of rows) {
      const ms = durMs(r.duration);
      maxDur = Math.max(maxDur, ms);
      const ev = r.event || {};
      const a = ev.attributes || {};
      let link = "";
      if (r.type === "ChildWorkflowStarted") link = runLink(a.workflowId, a.runId, "open child");
      if (r.type === "ActivityDeduplicated" && a.originalRunId) link = runLink(id, a.originalRunId, "run that did it");
      if (r.type === "WorkflowContinuedAsNew") link = runLink(id, a.newRunId, "next run");
      if (r.type === "WorkflowReset" && a.baseWorkflowId) {
        // A reset or forked run: its base run, and the two side by side.
        const href = compareHref(a.baseWorkflowId + "/" + a.baseRunId, id + (runId ? "/" + runId : ""));
        link = html`${runLink(a.baseWorkflowId, a.baseRunId, "base run")} · <a href="${href}">compare with base run</a>`;
        main.querySelector("#base-link").innerHTML = html`${a.kind || "reset"} of ${runLink(a.baseWorkflowId, a.baseRunId, a.baseWorkflowId + "/" + short(a.baseRunId))}
          · <a href="${href}" id="compare-base">compare with base run</a>`.s;
      }
      tbody.insertAdjacentHTML("beforeend", html`
        <tr class="ev tone-${r.tone || "none"}" data-event="${r.id}">
          <td class="num">${r.id}</td>
          <td class="t" title="${r.time}">+${fmtMs(durMs(r.offset))}</td>
          <td class="type">${r.type}</td>
          <td>${r.name || ""}</td>
          <td class="num">${r.attempt || ""}</td>
          <td class="t">${ms ? html`${fmtMs(ms)}<div class="bar" data-ms="${ms}"></div>` : ""}</td>
          <td class="ellipsis" title="${r.detail || ""}">${r.detail || ""} ${link}</td>
          <td><button type="button" class="toggle" aria-expanded="false" aria-label="Show event ${r.id}">▸</button></td>
        </tr>
        <tr class="detail" hidden data-detail="${r.id}"><td colspan="8"><pre>${JSON.stringify(ev, null, 2)}</pre></td></tr>`.s);
    }
    for (const b of tbody.querySelectorAll(".bar")) b.style.width = Math.max(2, (Number(b.dataset.ms) / maxDur) * 100) + "%";
    main.querySelector("#history-count").textContent = `(${tbody.querySelectorAll("tr.ev").length} events)`;
  };
  tbody.addEventListener("click", (e) => {
    const btn = e.target.closest("button.toggle");
    const tr = e.target.closest("tr.ev");
    if (!tr || (e.target.closest("a") && !btn)) return;
    const detail = tbody.querySelector(`tr[data-detail="${tr.dataset.event}"]`);
    detail.hidden = !detail.hidden;
    const b = tr.querySelector("button.toggle");
    b.setAttribute("aria-expanded", String(!detail.hidden));
    b.textContent = detail.hidden ? "▸" : "▾";
  });

  const show = (v) => {
    const i = v.info;
    document.title = `${i.workflowId} · Cairn`;
    main.querySelector("#run-status").innerHTML = html`${runStatus(i)}`.s;
    main.querySelector("#run-id").textContent = i.runId;
    main.querySelector("#run-id").title = "run id";
    renderActions(main.querySelector("#actions"), i, v);
    renderDamage(main.querySelector("#damage"), v);
    renderPause(main.querySelector("#pause"), v);
    renderWaiting(main.querySelector("#waiting"), v);
    renderSummary(main.querySelector("#summary"), v);
    renderIO(main.querySelector("#io"), v);
    renderPending(main.querySelector("#pending"), v);
    renderEffects(main.querySelector("#effects"), v);
    if (v.runs) renderChain(main.querySelector("#chain"), v);
  };

  const q = new URLSearchParams({ id });
  if (runId) q.set("run", runId);
  const es = new EventSource("/api/stream/run?" + q);
  es.addEventListener("history", (e) => { addRows(parseJSON(e.data).rows || []); setLive(true); });
  es.addEventListener("run", (e) => { show(parseJSON(e.data)); setLive(true); });
  es.addEventListener("end", () => { es.close(); main.querySelector("#timeline").dataset.complete = "1"; });
  es.addEventListener("failure", (e) => {
    const err = parseJSON(e.data);
    es.close();
    // What the page already shows stays; the failure says why it stopped.
    main.querySelector("#stream-error").innerHTML = html`<div class="callout bad" role="alert" id="stream-failure">
      <strong>This page stopped following the run</strong> (${err.code}): ${err.message}</div>`.s;
    if (main.querySelector("#summary").textContent.trim() === "Loading…") main.querySelector("#summary").innerHTML = "";
  });
  es.onerror = () => {
    if (es.readyState !== EventSource.CLOSED) { setLive(false); return; } // the browser reconnects
    // The answer was not a stream (no such run, a server error): the
    // browser will not try again, so say why instead of "Loading…".
    get("/api/run", { id, run: runId }).then((v) => {
      show(v);
      main.querySelector("#stream-error").innerHTML = html`<div class="callout bad" role="alert" id="stream-failure">
        <strong>This page stopped following the run</strong>: reload it to follow again.</div>`.s;
    }, (err) => {
      main.querySelector("#stream-error").innerHTML = html`<div id="stream-failure">${errorBox(err)}</div>`.s;
      if (main.querySelector("#summary").textContent.trim() === "Loading…") main.querySelector("#summary").innerHTML = "";
    });
  };
  return () => es.close();
}

function renderActions(el, i, v) {
  const convo = v.conversation || el.dataset.convo === "1";
  if (v.conversation) el.dataset.convo = "1";
  const talk = html`${convo ? html`<a class="button" href="/agent/${encodeURIComponent(i.workflowId)}/${i.runId}" id="conversation">Conversation</a>` : ""}
    <a class="button" href="${compareHref(i.workflowId + "/" + i.runId, "")}" id="compare-with">Compare with…</a>`;
  // Any run but a quarantined one or a child can be reset; only an open
  // one takes the other actions.
  const resettable = i.status && !i.corrupt && !i.parentWorkflowId;
  const open = i.status && ["running", "paused"].includes(i.status) && !i.corrupt;
  const key = i.runId + convo + open + resettable;
  if (el.dataset.for === key) return;
  el.dataset.for = key;
  const reset = resettable ? html`<button type="button" data-act="reset">Reset…</button>` : "";
  const del = i.status && !open && !i.corrupt ? html`<button type="button" data-act="delete" class="danger">Delete…</button>` : "";
  el.innerHTML = open ? html`${talk}<button type="button" data-act="signal">Signal…</button>
    <button type="button" data-act="cancel">Cancel…</button>${reset}
    <button type="button" data-act="terminate" class="danger">Terminate…</button>`.s : html`${talk}${reset}${del}`.s;
  el.onclick = async (e) => {
    const act = e.target.closest("button")?.dataset.act;
    if (!act) return;
    const whoField = { name: "by", label: "Your name (recorded)", value: who.get() };
    let values;
    if (act === "signal") {
      values = await confirmDialog({ title: `Signal ${i.workflowId}`, body: "The run's code receives the signal on its channel of that name.",
        confirm: "Send signal", fields: [{ name: "name", label: "Signal name", required: true, placeholder: "approve" },
          { name: "input", label: "Argument, as JSON (optional)", textarea: true, placeholder: '"Grace"' }, whoField] });
    } else if (act === "cancel") {
      values = await confirmDialog({ title: `Cancel ${i.workflowId}?`, body: "The run's code sees a cancel request and decides how to stop.",
        confirm: "Request cancel", fields: [{ name: "reason", label: "Reason (recorded)" }, whoField] });
    } else if (act === "reset") {
      values = await confirmDialog({ title: `Reset ${i.workflowId}?`,
        body: html`A new run replays this one's history up to a workflow task and runs the code again from there. This run is terminated (if open) and linked to it. Effects it performed after the point are <strong>answered from the effects ledger, not performed again</strong>; one in doubt pauses the new run.`,
        confirm: "Reset", fields: [{ name: "eventId", label: "To the WorkflowTaskCompleted event # (empty: the last task)", placeholder: "12" },
          { name: "reason", label: "Reason (recorded)", required: true }, whoField] });
      if (values) {
        values.eventId = Number(values.eventId || 0);
        values.requestId = `${i.runId}-${Date.now()}`;
      }
    } else if (act === "delete") {
      values = await confirmDialog({ title: `Delete this run of ${i.workflowId}?`, danger: true,
        body: html`Its history, state and list entry are deleted <strong>now</strong>, as the retention sweep would later. Its effects-ledger entries stay: the workflow id started again is still answered from them.`,
        confirm: "Delete", fields: [whoField] });
    } else {
      values = await confirmDialog({ title: `Terminate ${i.workflowId}?`, danger: true,
        body: html`The run closes <strong>at once</strong>, without running its code: nothing it would do next happens, and pending activities are abandoned.`,
        confirm: "Terminate", fields: [{ name: "reason", label: "Reason (recorded)" }, whoField] });
    }
    if (!values) return;
    if (values.by) who.set(values.by);
    try {
      const res = await post("/api/" + act, { workflowId: i.workflowId, runId: i.runId, ...values });
      if (act === "delete") {
        toast(`Deleted run ${short(i.runId)}`);
        go("/runs");
        return;
      }
      if (act === "reset") {
        toast(`Reset to event ${res.atEventId}: new run ${short(res.runId)}`);
        go(`/runs/${encodeURIComponent(i.workflowId)}/${res.runId}`);
        return;
      }
      toast(act === "signal" ? `Signal ${values.name} sent` : act === "cancel" ? "Cancel requested" : "Terminated");
    } catch (err) {
      toast(`${act} failed: ${err.message}`);
    }
  };
}

// renderDamage says, above everything, that the run needs a person's look
// for another reason than a pause: it is quarantined (its stored data is
// damaged), or an effect of it may have happened twice.
function renderDamage(el, v) {
  const i = v.info;
  el.innerHTML = html`${i.corrupt ? html`<div class="callout bad" role="alert" id="corrupt">
      <h2>Quarantined: this run's stored data is damaged</h2>
      <p>${i.corrupt}</p>
      <p>Nothing can be written to it (signals, cancel and terminate are refused) and its history cannot be read. What is shown is its last known good state.
        Restore a backup (<code>cairn restore</code>) or see <code>cairn check</code>.</p></div>` : ""}
    ${i.duplicates || i.effectConflicts ? html`<div class="callout bad" role="alert" id="duplicates">
      <h2>${i.duplicates ? `${i.duplicates} effect(s) of this run may have happened twice` : `${i.effectConflicts} effect conflict(s)`}</h2>
      <p>A late report said an action ran again after another attempt had done it. Check the downstream system.
        <a href="/effects?id=${encodeURIComponent(i.workflowId)}&dups=1">The duplicates in the ledger</a></p></div>` : ""}`.s;
}

function renderPause(el, v) {
  const p = v.info.pause;
  if (!p) {
    // A decision made here stays said once the run goes on.
    el.innerHTML = el.dataset.decided ? decidedNote(el.dataset.decided, v.info.status).s : "";
    delete el.dataset.for;
    return;
  }
  const key = `${v.info.runId}/${p.scheduledEventId}/${p.attempt}/${(v.pendingApprovals || []).map((a) => a.key).join(",")}`;
  if (el.dataset.for === key) return; // keep what the person typed
  el.dataset.for = key;
  if (p.kind === "approval") {
    renderApprovals(el, v);
    return;
  }
  if (p.kind === "budget") {
    el.innerHTML = html`<div class="callout" role="region" aria-label="Paused">
      <h2>Paused: the budget is used up</h2>
      <p>A model call (event ${p.scheduledEventId}) is held since ${when(p.since)}. <a href="/agent/${encodeURIComponent(v.info.workflowId)}/${v.info.runId}">See the conversation</a></p>
      ${budgetForm(v.info, p, v.budget)}</div>`.s;
    wireBudget(el);
    return;
  }
  el.innerHTML = html`<div class="callout" role="region" aria-label="Paused">
    <h2>Paused: waiting for a person</h2>
    <p><strong>${p.activityType}</strong> (activity ${p.activityId}, event ${p.scheduledEventId}, attempt ${p.attempt}) may or may not have taken effect, since ${when(p.since)}.</p>
    <dl class="grid"><dt>Why</dt><dd>${p.reason}</dd><dt>Key</dt><dd class="mono wrap">${p.idempotencyKey}</dd><dt>Arguments</dt><dd>${payload(p.input)}</dd></dl>
    ${resolveForm(v.info, p)}</div>`.s;
  wireResolve(el);
}

// renderApprovals shows the agent's tool calls awaiting a person's
// approval: each with its tool, effect class and arguments, and Approve
// and Reject.
function renderApprovals(el, v) {
  const i = v.info, calls = v.pendingApprovals || [];
  el.innerHTML = html`<div class="callout" role="region" aria-label="Awaiting approval" id="approvals">
    <h2>Paused: ${calls.length === 1 ? "a tool call waits" : `${calls.length} tool calls wait`} for your approval</h2>
    <p>The agent asked to run ${calls.map((c, n) => html`${n ? ", " : ""}<strong>${c.tool || "a tool"}</strong>`)} since ${when(i.pause.since)}; nothing runs until a person decides.
      <a href="/agent/${encodeURIComponent(i.workflowId)}/${i.runId}">See the conversation</a></p>
    ${calls.map((c) => html`<dl class="grid" data-call="${c.callId}"><dt>Tool</dt><dd><strong>${c.tool || "(not recorded)"}</strong> · ${effectText(c.effectKnown, c.effect)}</dd>
      <dt>Call</dt><dd class="mono">${c.callId} <span class="muted">(signal ${c.signal})</span></dd>
      <dt>Arguments</dt><dd>${c.arguments ? html`<pre class="payload">${prettyArgs(c.arguments)}</pre>` : html`<span class="muted">not recorded</span>`}</dd></dl>
      ${approvalForm(i, c)}`)}</div>`.s;
  wireApprovals(el, (_id, _run, said) => {
    el.dataset.decided = said;
    if (!el.querySelector("form[data-approve]")) el.innerHTML = decidedNote(said).s; // the run moved on meanwhile
  });
}

// decidedNote says what a person decided on this page, and what the run is
// now (when known).
const decidedNote = (said, now) => html`<div class="callout ok" id="decided">${said}${now ? html` The run is now ${status(now)}.` : ""}</div>`;

function prettyArgs(s) {
  try { return JSON.stringify(parseJSON(s), null, 2); } catch { return s; }
}

// renderWaiting says that a task of the run waits on a task queue no
// worker polls (the engine's describe: unpolled), with where to look.
function renderWaiting(el, v) {
  const qs = v.unpolled || [];
  el.innerHTML = qs.length ? html`<div class="callout" role="status" aria-label="Waiting for a worker">
    <h2>Waiting for a worker</h2>
    ${qs.map((q) => html`<p class="unpolled">${q.message}: is a worker running on task queue <strong>${q.taskQueue}</strong>?</p>`)}
    <p><a href="/queues">Task queues and their pollers</a></p></div>`.s : "";
}

function renderSummary(el, v) {
  const i = v.info;
  const rows = [
    ["Type", i.workflowType], ["Task queue", html`${i.taskQueue} ${queueNote(v)}`], ["Run", html`<span class="mono">${i.runId}</span>`],
    ["Started", when(i.startTime)], ["Closed", i.closeTime ? when(i.closeTime) : html`<span class="muted">open</span>`],
    ["Duration", fmtMs((i.closeTime ? new Date(i.closeTime) : Date.now()) - new Date(i.startTime))],
    ["Events", i.historyLength],
  ];
  if (v.executionTimeout || v.runTimeout || v.taskTimeout) {
    rows.push(["Timeouts", [v.executionTimeout && `execution ${v.executionTimeout}`, v.runTimeout && `run ${v.runTimeout}`,
      v.taskTimeout && `task ${v.taskTimeout}`].filter(Boolean).join(", ")]);
  }
  if (i.parentWorkflowId) rows.push(["Parent", runLink(i.parentWorkflowId, i.parentRunId)]);
  if (v.continuedFromRunId) rows.push(["Continued from", runLink(i.workflowId, v.continuedFromRunId, short(v.continuedFromRunId))]);
  if (i.continuedAsNewRunId) rows.push(["Continued as", runLink(i.workflowId, i.continuedAsNewRunId, short(i.continuedAsNewRunId))]);
  if (i.base) rows.push([i.base.kind === "fork" ? "Forked from" : "Reset from",
    html`<span id="base-run">${runLink(i.base.workflowId, i.base.runId)} up to event ${i.base.atEventId}${i.base.effects ? html` · effects: ${i.base.effects}` : ""}</span>`]);
  if (i.resetRunId) rows.push(["Reset to", html`<span id="reset-run">${runLink(i.workflowId, i.resetRunId, short(i.resetRunId))}</span>`]);
  if (i.ledgerAnswers) rows.push(["Ledger", html`<span id="ledger-answers">${i.ledgerAnswers} result(s) answered from the effects ledger, not performed</span>`]);
  if (v.cancelRequested && ["running", "paused"].includes(i.status)) rows.push(["Cancel", "requested"]);
  if (i.corrupt) rows.push(["Quarantined", html`<span class="error">${i.corrupt}</span>`]);
  if (i.duplicates) rows.push(["Duplicates", html`<span class="error">${i.duplicates} effect(s) may have happened twice</span>`]);
  el.innerHTML = html`<dl class="grid">${rows.map(([k, val]) => html`<dt>${k}</dt><dd>${val}</dd>`)}</dl>`.s;
}

function queueNote(v) {
  const q = v.queue;
  if (!q) return "";
  const pollers = (q.workflowPollers || []).length + (q.activityPollers || []).length;
  if (pollers === 0) return html` <span class="pill bad" title="No worker polled this queue in the last 5 minutes">no worker polls it: stuck</span>`;
  return html` <a class="pill ok" href="/queues">${pollers} poller${pollers > 1 ? "s" : ""}</a>`;
}

function renderIO(el, v) {
  const i = v.info;
  let outcome = html`<p class="muted">Not closed yet.</p>`;
  if (i.status === "completed") outcome = html`<h3>Result</h3>${payload(v.result)}`;
  else if (v.failure) outcome = html`<h3>${i.status === "failed" ? "Failure" : i.status.replace(/_/g, " ")}</h3>
    <div class="callout bad"><strong>${v.failure.type || "error"}</strong>: ${v.failure.message}</div>
    ${v.failure.stack ? html`<details><summary>Stack</summary><pre>${v.failure.stack}</pre></details>` : ""}`;
  else if (i.status === "continued_as_new") outcome = html`<p>Continued as ${runLink(i.workflowId, i.continuedAsNewRunId, short(i.continuedAsNewRunId))}.</p>`;
  el.innerHTML = html`<h3>Input</h3>${payload(v.input)}${outcome}`.s;
}

function renderPending(el, v) {
  const acts = v.pendingActivities || [], timers = v.pendingTimers || [], kids = v.pendingChildren || [];
  const wft = v.workflowTask;
  if (!acts.length && !timers.length && !kids.length && !(wft && wft.lastFailure)) { el.innerHTML = ""; return; }
  el.innerHTML = html`<h2>Pending</h2>
    ${wft && wft.lastFailure ? html`<div class="callout bad">Workflow task failing (attempt ${wft.attempt}): ${wft.lastFailure.message}</div>` : ""}
    ${acts.length ? html`<table aria-label="Pending activities"><thead><tr><th>Activity</th><th>Effect</th><th>State</th><th class="num">Attempt</th><th>Lease ends</th><th>Last heartbeat</th><th>Next attempt</th><th>Last failure</th></tr></thead><tbody>
      ${acts.map((a) => html`<tr class="${a.state === "unknown" ? "paused" : ""}">
        <td>${a.activityType} <span class="muted">#${a.scheduledEventId}${a.activityId ? html` id ${a.activityId}` : ""}</span>${a.limitKey ? html`<div class="muted mono">${a.limitKey}</div>` : ""}</td><td>${a.effect}</td>
        <td>${status(a.state)}${a.waitsForLimit ? html`<div class="pill warn" data-waits-for-limit title="cairn task-queue describe">waits for a slot: ${a.waitsForLimit}</div>` : ""}</td>
        <td class="num">${a.attempt}</td><td>${a.state === "started" ? when(a.leaseExpires) : "–"}</td>
        <td>${a.lastHeartbeat ? html`${when(a.lastHeartbeat)}${a.heartbeatDetails ? html`<div class="muted">${payloadText(a.heartbeatDetails)}</div>` : ""}` : "–"}</td>
        <td>${a.nextAttemptAt && a.state === "backoff" ? when(a.nextAttemptAt) : "–"}</td>
        <td>${a.lastFailure ? html`<span class="error">${a.lastFailure.type ? a.lastFailure.type + ": " : ""}${a.lastFailure.message}</span>` : "–"}</td></tr>`)}
      </tbody></table>` : ""}
    ${timers.length ? html`<h3>Timers</h3><ul>${timers.map((t) => html`<li>${t.timerId} fires ${when(t.fireAt)}</li>`)}</ul>` : ""}
    ${kids.length ? html`<h3>Children</h3><ul>${kids.map((c) => html`<li>${runLink(c.workflowId, c.runId)} (${c.workflowType})</li>`)}</ul>` : ""}`.s;
}

function renderEffects(el, v) {
  const effs = v.effects || [];
  if (!effs.length) { el.innerHTML = ""; return; }
  el.innerHTML = html`<h2>Effects of this run</h2>
    <table aria-label="Effects"><thead><tr><th>Activity</th><th>Key</th><th>State</th><th class="num">Attempts</th><th>Duplicates</th><th>Result</th><th>Updated</th></tr></thead><tbody>
    ${effs.map((e) => html`<tr class="${e.duplicates ? "paused" : ""}"><td>${e.activityType} <span class="muted">${e.effect}</span></td>
      <td class="mono wrap">${e.idempotencyKey}</td><td>${status(e.state)}</td><td class="num">${e.attempts}</td>
      <td>${e.duplicates ? html`<span class="pill bad">${e.duplicates} duplicate</span>` : e.conflicts ? html`<span class="pill warn">${e.conflicts} conflict</span>` : "–"}</td>
      <td class="ellipsis">${payloadText(e.result)}</td><td>${when(e.updated)}</td></tr>`)}
    </tbody></table><p><a href="/effects?id=${encodeURIComponent(v.info.workflowId)}">The workflow id's whole ledger</a></p>`.s;
}

function renderChain(el, v) {
  const runs = v.runs || [];
  if (runs.length < 2) { el.innerHTML = ""; return; }
  el.innerHTML = html`<h2>Runs of ${v.info.workflowId}</h2>
    <table aria-label="Runs of this workflow id"><thead><tr><th>Run</th><th>Status</th><th>Started</th><th>Closed</th><th></th></tr></thead><tbody>
    ${runs.map((r) => html`<tr class="${r.runId === v.info.runId ? "sel" : ""}"><td class="mono">${runLink(r.workflowId, r.runId, short(r.runId))}</td>
      <td>${runStatus(r)}</td><td>${when(r.startTime)}</td><td>${r.closeTime ? when(r.closeTime) : "open"}</td>
      <td>${r.runId === v.info.runId ? "this run" : html`${r.continuedAsNewRunId ? "continued as new · " : ""}<a href="${compareHref(v.info.workflowId + "/" + v.info.runId, r.workflowId + "/" + r.runId)}">compare</a>`}</td></tr>`)}
    </tbody></table>`.s;
}

// compareHref is the compare page of runs a and b (each ID/RUN; b may be
// empty: the page asks for it).
function compareHref(a, b) {
  const q = new URLSearchParams({ a });
  if (b) q.set("b", b);
  return "/compare?" + q;
}
