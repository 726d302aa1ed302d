// Two runs side by side (/compare?a=ID[/RUN]&b=ID[/RUN]): where their
// decisions first differ, how they are related (a reset or fork of the
// other), and per run its model calls, tool calls, usage and result —
// GET /api/compare, the CLI's `cairn workflow compare --json`.
import { html, get, errorBox, go, status, short, runLink } from "../lib.js";

export async function render(main, _params, search) {
  const a = search.get("a") || "", b = search.get("b") || "";
  document.title = "Compare runs · Cairn";
  main.innerHTML = html`<div class="head"><h1>Compare runs</h1></div>
    <form class="filters" id="compare-form" aria-label="The two runs to compare">
      <label>A <input name="a" value="${a}" placeholder="workflow id or id/run" required></label>
      <label>B <input name="b" value="${b}" placeholder="workflow id or id/run" required></label>
      <button type="submit" class="primary">Compare</button></form>
    <div id="compare"></div>`.s;
  main.querySelector("#compare-form").addEventListener("submit", (e) => {
    e.preventDefault();
    const f = new FormData(e.target);
    go("/compare?" + new URLSearchParams({ a: f.get("a").trim(), b: f.get("b").trim() }));
  });
  const out = main.querySelector("#compare");
  if (!a || !b) {
    out.innerHTML = html`<p class="muted">Name two runs: a workflow id (its current run) or <code>id/run</code>.
      A run's page links here (“Compare with…”), and a reset or forked run to its base run.</p>`.s;
    if (a) main.querySelector('[name="b"]').focus();
    return;
  }
  out.innerHTML = html`<p class="muted">Loading…</p>`.s;
  try {
    const c = await get("/api/compare", { a, b });
    out.innerHTML = html`${c.relation ? html`<p class="callout ok" id="relation">${c.relation}</p>` : ""}
      ${divergence(c)}
      <div class="columns">${side("A", c.a)}${side("B", c.b)}</div>`.s;
  } catch (err) {
    out.innerHTML = errorBox(err).s;
  }
}

// divergence shows the first step where the runs differ, both sides.
function divergence(c) {
  const d = c.divergence;
  if (!d) {
    return html`<section class="callout ok" id="divergence"><h2>No divergence</h2>
      <p>Both runs took the same ${c.same || 0} steps.</p></section>`;
  }
  const stepOf = (name, s, run) => s
    ? html`<div><h3>${name} <span class="muted">event ${s.eventId}</span></h3>
        <p><strong>${s.kind}${s.turn ? ` (turn ${s.turn})` : ""}</strong> ${s.name || ""}</p>
        ${s.detail ? html`<pre class="step-detail">${s.detail}</pre>` : ""}</div>`
    : html`<div><h3>${name}</h3><p class="muted">No step ${d.step}: the run ${["running", "paused"].includes(run.status) ? "has not got that far yet" : "ended"}.</p></div>`;
  return html`<section class="callout" id="divergence"><h2>Diverge at step ${d.step}</h2>
    <p class="muted">after ${c.same || 0} steps alike (decisions and the answers they got, whatever their event ids)</p>
    <div class="columns">${stepOf("A", d.a, c.a)}${stepOf("B", d.b, c.b)}</div></section>`;
}

const money = (u) => "$" + (u?.costUSD || 0).toFixed(4);
const tokens = (u) => `${u?.promptTokens || 0} in / ${u?.completionTokens || 0} out`;

// side shows one run: status, base, result, usage, model and tool calls.
function side(name, s) {
  const base = s.base;
  return html`<section class="panel compare-side" id="side-${name.toLowerCase()}" aria-label="Run ${name}">
    <h2>${name}: ${runLink(s.workflowId, s.runId, s.workflowId)} <span class="mono muted">${short(s.runId)}</span> ${status(s.status)}</h2>
    <dl class="grid">
      ${base ? html`<dt>Base</dt><dd>${base.kind} of ${runLink(base.workflowId, base.runId, base.workflowId + "/" + short(base.runId))} at event ${base.atEventId}</dd>` : ""}
      <dt>Result</dt><dd>${s.result ? html`<code>${s.result}</code>` : html`<span class="muted">none yet</span>`}</dd>
      <dt>Usage</dt><dd>${(s.modelCalls || []).length} model calls, ${tokens(s.usage)} tokens, ${money(s.usage)}</dd>
      <dt>Steps</dt><dd>${s.steps || 0}</dd>
    </dl>
    ${modelCalls(s.modelCalls || [])}
    ${toolCalls(s.toolCalls || [])}</section>`;
}

function modelCalls(calls) {
  if (!calls.length) return "";
  return html`<h3>Model calls</h3><table class="model-calls" aria-label="Model calls">
    <thead><tr><th class="num">Turn</th><th>Output</th><th>Tokens</th><th class="num">Cost</th></tr></thead><tbody>
    ${calls.map((m) => html`<tr><td class="num">${m.turn}</td>
      <td>${m.output || ""}${(m.toolCalls || []).map((t) => html`<div class="mono">→ ${t}</div>`)}
        ${m.state !== "completed" ? html` ${status(m.state)}` : ""}</td>
      <td class="t">${tokens(m.usage)}</td><td class="num">${money(m.usage)}</td></tr>`)}
    </tbody></table>`;
}

function toolCalls(calls) {
  if (!calls.length) return "";
  return html`<h3>Tool calls</h3><table class="tool-calls" aria-label="Tool calls">
    <thead><tr><th class="num">Turn</th><th>Tool</th><th>Arguments</th><th>Outcome</th><th>Result</th></tr></thead><tbody>
    ${calls.map((t) => html`<tr><td class="num">${t.turn || ""}</td><td>${t.name}</td><td class="mono">${t.arguments || ""}</td>
      <td>${outcome(t)}</td><td class="mono">${t.result || ""}</td></tr>`)}
    </tbody></table>`;
}

// outcome says how a tool call ended: result, error, answered from the
// ledger (by which run), held, in doubt, pending (and why).
function outcome(t) {
  const tone = { result: "ok", error: "bad", held: "warn", "in doubt": "warn" }[t.outcome] || "";
  let from = "";
  if (t.from) {
    const i = t.from.lastIndexOf("/");
    const [wf, run] = i > 0 ? [t.from.slice(0, i), t.from.slice(i + 1)] : [null, t.from];
    from = wf ? html` by ${runLink(wf, run, wf + "/" + short(run))}` : html` by run <span class="mono">${short(run)}</span>`;
  }
  const state = t.outcome === "pending" && t.state ? `: ${t.state.replace(/_/g, " ")}` : "";
  return html`<span class="pill ${tone}">${t.outcome}${state}</span>${from}`;
}
