// The agent's conversation: the transcript of an agent-kit run as a chat
// (system, user, assistant, tool calls and their results), tokens and cost
// per model call and in total, the answer streaming live; and two runs of
// one workflow id side by side (?compare=RUN).
import { html, get, go, status, short, runLink, errorBox, setLive, APIError, parseJSON } from "../lib.js";
import { approvalForm, wireApprovals, effectText } from "./resolve.js";

export async function render(main, [id, runId], q) {
  const v = await get("/api/run", { id, run: runId || "" });
  const runs = v.runs || [];
  const compare = q.get("compare") || "";
  const self = v.info.runId;
  main.innerHTML = html`
    <div class="head"><h1>Conversation of ${id}</h1>${runLink(id, self, "the run's page")}
      ${runs.length > 1 ? html`<div class="actions"><label for="compare" class="inline">Side by side with</label>
        <select id="compare"><option value="">(one run)</option>
        ${runs.filter((r) => r.runId !== self).map((r) => html`<option value="${r.runId}" ${r.runId === compare ? html`selected` : ""}>run ${short(r.runId)} · ${r.status}</option>`)}
        </select>${compare ? html` <a href="/compare?${new URLSearchParams({ a: id + "/" + self, b: id + "/" + compare })}" id="compare-decisions">where they diverge</a>` : ""}</div>` : ""}</div>
    <div class="${compare ? "side" : ""}" id="columns">
      <section class="panel convo" data-convo="${self}" aria-label="Run ${self}"></section>
      ${compare ? html`<section class="panel convo" data-convo="${compare}" aria-label="Run ${compare}"></section>` : ""}
    </div>`.s;
  main.querySelector("#compare")?.addEventListener("change", (e) => {
    const p = new URLSearchParams();
    if (e.target.value) p.set("compare", e.target.value);
    go(`/agent/${encodeURIComponent(id)}/${self}` + (p.toString() ? "?" + p : ""), true);
  });
  const stops = [...main.querySelectorAll("[data-convo]")].map((el) => follow(el, id, el.dataset.convo));
  return () => stops.forEach((s) => s());
}

// follow shows one run's conversation and keeps it live.
function follow(el, id, run) {
  el.innerHTML = html`<div class="convo-head"></div><div class="approvals"></div><div class="chat" role="log" aria-live="polite"></div><div class="live-answers"></div>`.s;
  const head = el.querySelector(".convo-head"), chat = el.querySelector(".chat"), live = el.querySelector(".live-answers");
  const asks = el.querySelector(".approvals");
  const streaming = new Map(); // "event:attempt" → the bubble of an answer being streamed
  const es = new EventSource("/api/stream/agent?" + new URLSearchParams({ id, run }));
  es.addEventListener("transcript", (e) => {
    const t = parseJSON(e.data);
    head.innerHTML = summary(id, t).s;
    showApprovals(asks, id, t);
    chat.innerHTML = conversation(t.items || []).s || html`<p class="muted">No conversation yet.</p>`.s;
    // An answer now recorded replaces its stream.
    for (const [k, b] of streaming) if (b.dataset.done) { b.remove(); streaming.delete(k); }
    el.dataset.status = t.status;
    setLive(true);
  });
  es.addEventListener("delta", (e) => {
    const d = parseJSON(e.data);
    el.dataset.deltas = Number(el.dataset.deltas || 0) + 1;
    const k = `${d.scheduledEventId}:${d.attempt}`;
    let b = streaming.get(k);
    if (d.kind === "superseded") { b?.remove(); streaming.delete(k); return; }
    if (!b) {
      b = document.createElement("div");
      b.className = "msg assistant streaming";
      b.dataset.stream = k;
      b.innerHTML = html`<div class="who">assistant <span class="muted">streaming · ${d.activityType} attempt ${d.attempt}</span></div><div class="text"></div><div class="tools"></div>`.s;
      live.append(b);
      streaming.set(k, b);
    }
    if (d.kind === "text") b.querySelector(".text").textContent += d.text || "";
    if (d.kind === "tool_call") {
      let tc = b.querySelector(`[data-index="${d.toolCallIndex}"]`);
      if (!tc) {
        tc = document.createElement("pre");
        tc.dataset.index = d.toolCallIndex;
        b.querySelector(".tools").append(tc);
      }
      tc.textContent = (d.toolName ? d.toolName + " " : tc.textContent.split(" ")[0] + " ") + (tc.dataset.args = (tc.dataset.args || "") + (d.text || ""));
    }
    if (d.kind === "done") { b.dataset.done = "1"; b.classList.remove("streaming"); }
  });
  es.addEventListener("end", () => { es.close(); el.dataset.complete = "1"; });
  es.addEventListener("failure", (e) => {
    const err = parseJSON(e.data);
    es.close();
    head.innerHTML = errorBox(new APIError(err.code, err.message)).s;
  });
  es.onerror = () => {
    if (es.readyState !== EventSource.CLOSED) { setLive(false); return; } // the browser reconnects
    // The answer was not a stream (a quarantined run's transcript, a server
    // error): the browser will not try again, so say why.
    get("/api/transcript", { id, run }).then(
      () => { head.innerHTML = errorBox(new APIError("unavailable", "this page stopped following the run: reload it to follow again")).s; },
      (err) => { head.innerHTML = errorBox(err).s; });
  };
  return () => es.close();
}

const tokens = (u) => (u ? (u.promptTokens || 0) + (u.completionTokens || 0) : 0);
const cost = (u) => (u && u.costUSD ? "$" + u.costUSD.toFixed(u.costUSD < 0.01 ? 5 : 4) : "");

function summary(id, t) {
  const u = t.usage || {}, tot = u.total || {};
  const b = t.budget;
  return html`<div class="head"><h2>${runLink(id, t.runId, "run " + short(t.runId))}</h2>${status(t.status)}</div>
    <dl class="grid totals">
      <dt>Model calls</dt><dd data-calls>${u.calls || 0}</dd>
      <dt>Tokens</dt><dd data-tokens>${tokens(tot)} <span class="muted">(${tot.promptTokens || 0} in${tot.cachedTokens ? `, ${tot.cachedTokens} cached` : ""}, ${tot.completionTokens || 0} out)</span></dd>
      <dt>Cost</dt><dd data-cost>${cost(tot) || html`<span class="muted">${(u.unpriced || []).length ? "unpriced: " + u.unpriced.join(", ") : "–"}</span>`}</dd>
      ${b ? html`<dt>Budget</dt><dd>${[b.budget?.maxTokens && `${b.budget.maxTokens} tokens`, b.budget?.maxCostUSD && `$${b.budget.maxCostUSD}`,
        b.budget?.maxTurns && `${b.budget.maxTurns} turns`].filter(Boolean).join(", ") || "none"}
        ${b.exceeded ? html`<div class="error">exceeded: ${b.exceeded}</div>` : ""}</dd>` : ""}
    </dl>${ignored(t.ignored || [])}`;
}

// showApprovals shows, above the conversation, the tool calls awaiting a
// person's approval, each with Approve and Reject. It is redrawn only when
// the calls waiting change, so that what a person types stays; a decision
// made here stays said.
function showApprovals(el, id, t) {
  const waiting = (t.items || []).filter((it) => it.toolCall?.state === "awaiting_approval").map((it) => it.toolCall);
  const key = `${t.runId}/${waiting.map((c) => c.id).join(",")}`;
  if (el.dataset.for === key) return;
  el.dataset.for = key;
  if (!waiting.length || !["running", "paused"].includes(t.status)) {
    el.innerHTML = el.dataset.decided ? html`<div class="callout ok" data-decided-note>${el.dataset.decided}</div>`.s : "";
    return;
  }
  el.innerHTML = html`<div class="callout" id="awaiting-approval" role="region" aria-label="Awaiting approval">
    <strong>${waiting.length === 1 ? "A tool call waits" : `${waiting.length} tool calls wait`} for your approval</strong>
    ${waiting.map((c) => html`<pre>${c.name} ${pretty(c.arguments)}</pre>${approvalForm({ workflowId: id, runId: t.runId }, { callId: c.id, tool: c.name, effect: c.effect, effectKnown: c.effectKnown })}`)}</div>`.s;
  wireApprovals(el, (_id, _run, said) => {
    el.dataset.decided = said;
    if (!el.querySelector("form[data-approve]")) el.innerHTML = html`<div class="callout ok" data-decided-note>${said}</div>`.s; // the run moved on meanwhile
  });
}

// ignored lists the approval signals the agent received and applied to no
// call (sdk/agent records them, with why; docs/agents.md).
function ignored(list) {
  if (!list.length) return "";
  return html`<div class="callout warn" id="ignored-approvals"><strong>${list.length} approval signal(s) ignored</strong>
    <ul>${list.map((a) => html`<li data-event="${a.eventId}">${a.approved ? "approve" : "reject"}${a.callId ? html` <span class="mono">${a.callId}</span>` : ""}${a.by ? " by " + a.by : ""}${a.reason ? ` (${a.reason})` : ""}: ${a.why}</li>`)}</ul></div>`;
}

// conversation renders the items. A tool call is one card — its
// arguments, state, effect class, key and result — so the assistant
// message that asked for it does not repeat its arguments, and the tool
// message that answered it (the card's result) is not shown again.
function conversation(items) {
  const carded = new Map(); // call id → cards not yet answered by a tool message
  return html`${items.map((it, i) => {
    if (it.kind === "tool_call") {
      const id = it.toolCall?.id;
      carded.set(id, (carded.get(id) || 0) + 1);
      return item(it);
    }
    const m = it.message;
    if (it.kind === "message" && m?.role === "tool" && carded.get(m.toolCallId) > 0) {
      carded.set(m.toolCallId, carded.get(m.toolCallId) - 1); // the n-th answer of an id answers its n-th call
      return "";
    }
    if (it.kind === "message" && (m?.toolCalls || []).length) {
      const rest = uncarded(m.toolCalls, items.slice(i + 1));
      return message({ ...m, toolCalls: rest, asks: m.toolCalls.filter((tc) => !rest.includes(tc)).map((tc) => tc.name) });
    }
    return item(it);
  })}`;
}

// uncarded returns the calls the items that follow a message do not show
// as cards (the engine follows each assistant message with a card per call).
function uncarded(calls, after) {
  const cards = [];
  for (const it of after) {
    if (it.kind !== "tool_call") break;
    cards.push(it.toolCall?.id);
  }
  return calls.filter((tc) => {
    const k = cards.indexOf(tc.id);
    if (k < 0) return true;
    cards.splice(k, 1);
    return false;
  });
}

function item(it) {
  if (it.kind === "message") return message(it.message || {});
  if (it.kind === "model_call") {
    const c = it.modelCall || {}, u = c.usage || {};
    return html`<div class="call" data-model-call="${c.scheduledEventId}">
      <span class="pill ${c.state === "completed" ? "ok" : c.state === "failed" ? "bad" : "warn"}">${c.activityType} ${c.state}</span>
      <span class="muted">${c.model || u.model || ""}${c.attempt > 1 ? ` · attempt ${c.attempt}` : ""} · ${tokens(u)} tokens (${u.promptTokens || 0} in, ${u.completionTokens || 0} out)${cost(u) ? " · " + cost(u) : ""}</span>
      ${c.lastFailure ? html`<div class="error">${c.lastFailure.message}</div>` : ""}</div>`;
  }
  if (it.kind === "tool_call") {
    const c = it.toolCall || {};
    return html`<div class="msg tool" data-tool-call="${c.id}"><div class="who">tool call · ${c.name}
      <span class="pill ${c.state === "completed" ? "ok" : ["failed", "rejected"].includes(c.state) ? "bad" : "warn"}">${(c.state || "").replace(/_/g, " ")}</span>
      <span class="muted" data-effect>${effectText(c.effectKnown, c.effect)}</span></div>
      <pre>${pretty(c.arguments)}</pre>
      ${c.idempotencyKey ? html`<div class="muted mono">key ${c.idempotencyKey}</div>` : ""}
      ${c.result ? html`<div class="muted">result</div><pre>${pretty(c.result)}</pre>` : ""}
      ${c.approvedBy ? html`<div class="muted">${c.state === "rejected" ? "rejected" : "approved"} by ${c.approvedBy}</div>` : ""}
      ${c.state === "awaiting_approval" ? html`<div class="muted">waits for a person: approve or reject it above</div>` : ""}</div>`;
  }
  return "";
}

function message(m) {
  const role = m.role || "?";
  return html`<div class="msg ${role}" data-role="${role}"><div class="who">${role}${m.name ? " · " + m.name : ""}${m.toolCallId ? html` <span class="muted">answers ${m.toolCallId}</span>` : ""}</div>
    ${m.content ? html`<div class="text">${role === "tool" ? pretty(m.content) : m.content}</div>` : ""}
    ${(m.asks || []).length ? html`<div class="muted">asks for ${m.asks.map((n, i) => html`${i ? ", " : ""}<strong>${n}</strong>`)}</div>` : ""}
    ${(m.toolCalls || []).map((tc) => html`<div class="muted">asks for <strong>${tc.name}</strong></div><pre>${pretty(tc.arguments)}</pre>`)}</div>`;
}

function pretty(s) {
  if (!s) return "";
  try { return JSON.stringify(parseJSON(s), null, 2); } catch { return s; }
}
