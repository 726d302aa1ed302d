// The agent's conversation, for runs made with the agent kit.
import { html, runLink } from "../app.js";

export async function render(main, [id, runId]) {
  main.innerHTML = html`<div class="head"><h1>Conversation of ${id}</h1></div>
    <div class="callout">This server has no agent transcript API yet: the run's history is on ${runLink(id, runId, "its page")}.</div>`.s;
}
