// The form that resolves a paused effect: happened (with its result), did
// not happen (retried with the same key), or fail — with a reason and the
// name of who decided, both recorded in the run's history.
import { html, post, who, toast, errorBox } from "../app.js";

export function resolveForm(run, pause) {
  const k = `${run.workflowId}-${pause.scheduledEventId}`.replace(/[^\w-]/g, "_");
  return html`
  <form class="resolve" data-resolve="${run.workflowId}" data-run="${run.runId}" data-event="${pause.scheduledEventId}">
    <fieldset><legend>Did ${pause.activityType} take effect? Check the downstream system, then say.</legend>
      <div class="choices" role="radiogroup">
        <label><input type="radio" name="resolution" value="happened" required> It happened</label>
        <label><input type="radio" name="resolution" value="not_happened"> It did not happen (retry with the same key)</label>
        <label><input type="radio" name="resolution" value="failed"> Fail the activity</label>
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
