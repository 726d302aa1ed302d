// The forms of a run waiting for a person: resolve a paused effect —
// happened (with its result), did not happen (retried with the same key),
// or fail —, raise or stop a budget, approve or reject an agent's tool
// call; each with a reason and the name of who decided, recorded in the
// run's history.
import { html, post, who, toast, errorBox, confirmDialog } from "../lib.js";

export function resolveForm(run, pause) {
  const k = `${run.workflowId}-${pause.scheduledEventId}`.replace(/[^\w-]/g, "_");
  // A fork holds an action its base never completed: perform it for real,
  // give the result to use instead, or fail it.
  const held = pause.kind === "effect_held";
  const legend = held ? `This fork holds ${pause.activityType}: it was never performed by the base run. Perform it for real, or give its result?`
    : `Did ${pause.activityType} take effect? Check the downstream system, then say.`;
  const choices = held ? html`
        <label><input type="radio" name="resolution" value="perform" required> Perform it for real (this fork's own key)</label>
        <label><input type="radio" name="resolution" value="happened"> Use this result instead</label>
        <label><input type="radio" name="resolution" value="failed"> Fail the activity</label>` : html`
        <label><input type="radio" name="resolution" value="happened" required> It happened</label>
        <label><input type="radio" name="resolution" value="not_happened"> It did not happen (retry with the same key)</label>
        <label><input type="radio" name="resolution" value="failed"> Fail the activity</label>`;
  return html`
  <form class="resolve" data-resolve="${run.workflowId}" data-run="${run.runId}" data-event="${pause.scheduledEventId}">
    <fieldset><legend>${legend}</legend>
      <div class="choices" role="radiogroup">${choices}
      </div>
      <div class="result-field" hidden><label for="res-${k}">Its result, as JSON (what the workflow gets)</label>
        <textarea id="res-${k}" name="result" placeholder='{"PaymentID": "pay_001"}'></textarea></div>
      <div class="row">
        <div class="wide"><label for="why-${k}">Why (recorded)</label><input id="why-${k}" name="reason" required placeholder="payment pay_001 found at the provider"></div>
        <div><label for="who-${k}">Your name (recorded)</label><input id="who-${k}" name="by" required value="${who.get()}" autocomplete="name"></div>
        <div class="grow0"><button type="submit" class="primary">Resolve</button></div>
      </div>
      <div class="outcome" aria-live="polite"></div>
    </fieldset>
  </form>`;
}

// wireResolve makes the resolve forms under root work; onDone runs after a
// resolution was recorded.
export function wireResolve(root, onDone) {
  for (const form of root.querySelectorAll("form[data-resolve]")) {
    if (form.dataset.wired) continue;
    form.dataset.wired = "1";
    const resultField = form.querySelector(".result-field");
    form.addEventListener("change", () => {
      resultField.hidden = form.resolution.value !== "happened";
    });
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const out = form.querySelector(".outcome");
      const btn = form.querySelector("button[type=submit]");
      btn.disabled = true;
      who.set(form.by.value);
      try {
        await post("/api/resolve", {
          workflowId: form.dataset.resolve, runId: form.dataset.run, scheduledEventId: Number(form.dataset.event),
          resolution: form.resolution.value, result: form.resolution.value === "happened" ? form.result.value : "",
          reason: form.reason.value, by: form.by.value,
        });
        out.innerHTML = html`<div class="callout ok">Resolved: ${form.resolution.value.replace("_", " ")}. The run goes on.</div>`.s;
        form.querySelectorAll("input,textarea,button").forEach((el) => { el.disabled = true; });
        toast(`Resolved ${form.dataset.resolve}`);
        if (onDone) onDone(form.dataset.resolve, form.dataset.run);
      } catch (err) {
        out.innerHTML = errorBox(err).s;
        btn.disabled = false;
      }
    });
  }
}

// budgetForm raises a paused run's budget (its held model call goes on) or
// stops it (the call fails with BudgetExceeded), with a reason and a name.
// It shows the run's current limits (budget: the run's BudgetStatus) and
// what it used.
export function budgetForm(run, pause, budget) {
  const k = `${run.workflowId}-budget`.replace(/[^\w-]/g, "_");
  const lim = budget?.budget || {}, used = budget?.used || {};
  const field = (name, label, id, step, show) => html`<div><label for="${id}">${label}
      <span class="muted" data-current="${name}">(now: ${lim[name] ? show(lim[name]) : "no limit"})</span></label>
    <input id="${id}" name="${name}" type="number" min="0" step="${step}" placeholder="${lim[name] ? String(lim[name]) : "no limit"}"></div>`;
  return html`
  <form class="resolve" data-budget="${run.workflowId}" data-run="${run.runId}">
    <fieldset><legend>The run used up its budget: raise it, or stop. A limit left empty stays as it is; 0 removes it.</legend>
      <div class="row">
        ${field("maxTokens", "Max tokens", `bt-${k}`, "1", (n) => `${n}`)}
        ${field("maxCostUSD", "Max cost (USD)", `bc-${k}`, "0.01", (n) => `$${n}`)}
        ${field("maxTurns", "Max model calls", `bn-${k}`, "1", (n) => `${n}`)}
      </div>
      ${budget ? html`<p class="muted" data-used>Used so far: ${(used.promptTokens || 0) + (used.completionTokens || 0)} tokens,
        $${(used.costUSD || 0).toFixed(used.costUSD < 0.01 ? 5 : 2)}, ${budget.turns || 0} model call(s) (a held one counted).</p>` : ""}
      <div class="row">
        <div class="wide"><label for="bw-${k}">Why (recorded)</label><input id="bw-${k}" name="reason" required placeholder="worth finishing"></div>
        <div><label for="bb-${k}">Your name (recorded)</label><input id="bb-${k}" name="by" required value="${who.get()}" autocomplete="name"></div>
        <div class="grow0"><button type="submit" class="primary" name="raise">Raise</button> <button type="submit" class="danger" name="stop" formnovalidate>Stop</button></div>
      </div>
      <p class="muted">${pause.reason}</p>
      <div class="outcome" aria-live="polite"></div>
    </fieldset>
  </form>`;
}

const limit = (v) => (v === "" ? null : Number(v));

export function wireBudget(root, onDone) {
  for (const form of root.querySelectorAll("form[data-budget]")) {
    if (form.dataset.wired) continue;
    form.dataset.wired = "1";
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const stop = e.submitter?.name === "stop";
      const out = form.querySelector(".outcome");
      if (!form.reason.value || !form.by.value) { out.innerHTML = html`<p class="error">Say why and who you are: the history records both.</p>`.s; return; }
      who.set(form.by.value);
      try {
        await post("/api/budget", {
          workflowId: form.dataset.budget, runId: form.dataset.run, stop, reason: form.reason.value, by: form.by.value,
          // An empty field leaves that limit as it is; 0 removes it.
          maxTokens: limit(form.maxTokens.value), maxCostUSD: limit(form.maxCostUSD.value), maxTurns: limit(form.maxTurns.value),
        });
        out.innerHTML = html`<div class="callout ok">${stop ? "Stopped: the held call fails." : "Budget raised: the held call goes on."}</div>`.s;
        form.querySelectorAll("input,button").forEach((el) => { el.disabled = true; });
        toast(stop ? "Stopped" : "Budget raised");
        if (onDone) onDone(form.dataset.budget, form.dataset.run);
      } catch (err) {
        out.innerHTML = errorBox(err).s;
      }
    });
  }
}

// effectText names a tool's effect class, or says it is not known yet
// (no worker of the tool declared it).
export const effectText = (known, effect) => (known ? effect : "effect class not declared yet");

// approvalForm approves or rejects one tool call awaiting approval (a
// PendingApproval, or a transcript's tool call: {callId, tool, effect,
// effectKnown}), with who decides and why (required to reject: the model
// is told). It asks for a confirmation before sending.
export function approvalForm(run, a) {
  const k = `${run.workflowId}-${a.callId}`.replace(/[^\w-]/g, "_");
  return html`
  <form class="resolve approval" data-approve="${run.workflowId}" data-run="${run.runId}" data-call="${a.callId}" data-tool="${a.tool || "the tool"}">
    <fieldset><legend><strong>${a.tool || "A tool call"}</strong> (${effectText(a.effectKnown, a.effect)}, call <span class="mono">${a.callId}</span>) waits for your approval: it runs only if you approve it.</legend>
      <div class="row">
        <div class="wide"><label for="aw-${k}">Why (recorded; the model is told it if you reject)</label><input id="aw-${k}" name="reason" placeholder="INV-9 matches the purchase order"></div>
        <div><label for="ab-${k}">Your name (recorded)</label><input id="ab-${k}" name="by" required value="${who.get()}" autocomplete="name"></div>
        <div class="grow0"><button type="submit" class="primary" name="approve">Approve…</button> <button type="submit" class="danger" name="reject">Reject…</button></div>
      </div>
      <div class="outcome" aria-live="polite"></div>
    </fieldset>
  </form>`;
}

// wireApprovals makes the approval forms under root work; onDone(workflow
// id, run id, what was said) runs after a decision was sent (the form may
// be gone by then: the run moved on).
export function wireApprovals(root, onDone) {
  for (const form of root.querySelectorAll("form[data-approve]")) {
    if (form.dataset.wired) continue;
    form.dataset.wired = "1";
    form.addEventListener("submit", async (e) => {
      e.preventDefault();
      const approved = e.submitter?.name !== "reject";
      const out = form.querySelector(".outcome");
      const { approve: id, run, call, tool } = form.dataset;
      if (!form.by.value.trim()) { out.innerHTML = html`<p class="error">Say who you are: the history records who decided.</p>`.s; return; }
      if (!approved && !form.reason.value.trim()) { out.innerHTML = html`<p class="error">Say why you reject it: the model is told.</p>`.s; return; }
      const ok = await confirmDialog({
        title: approved ? `Approve ${tool}?` : `Reject ${tool}?`, danger: !approved,
        body: approved ? html`Call <span class="mono">${call}</span> of ${id} <strong>runs</strong> once you approve it.`
          : html`Call <span class="mono">${call}</span> of ${id} does not run; the model is told: <em>${form.reason.value}</em>.`,
        confirm: approved ? "Approve" : "Reject",
      });
      if (!ok) return;
      who.set(form.by.value);
      const buttons = form.querySelectorAll("button");
      buttons.forEach((b) => { b.disabled = true; });
      try {
        await post("/api/approve", { workflowId: id, runId: run, callId: call, approved, by: form.by.value, reason: form.reason.value });
        const said = approved ? `Approved ${tool}: the agent goes on and the tool runs.` : `Rejected ${tool}: the tool does not run; the model is told why.`;
        out.innerHTML = html`<div class="callout ok" data-decided="${approved ? "approved" : "rejected"}">${said}</div>`.s;
        form.querySelectorAll("input").forEach((el) => { el.disabled = true; });
        toast(`${approved ? "Approved" : "Rejected"} ${tool} of ${id}`);
        if (onDone) onDone(id, run, said);
      } catch (err) {
        out.innerHTML = errorBox(err).s;
        buttons.forEach((b) => { b.disabled = false; });
      }
    });
  }
}
