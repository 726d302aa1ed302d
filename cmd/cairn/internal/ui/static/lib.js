// What the pages share: HTML built safely, talking to the server,
// formatting, live updates, dialogs and navigation. It imports nothing, so
// that app.js (the router, which imports the pages) and the pages (which
// import this) do not import each other in a circle.

// ---- HTML built safely: every interpolated value is escaped unless raw().
class Raw { constructor(s) { this.s = s; } toString() { return this.s; } }
export const raw = (s) => new Raw(String(s));
const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
function part(v) {
  if (v == null || v === false) return "";
  if (v instanceof Raw) return v.s;
  if (Array.isArray(v)) return v.map(part).join("");
  return esc(v);
}
export function html(strings, ...vals) {
  let out = strings[0];
  vals.forEach((v, i) => { out += part(v) + strings[i + 1]; });
  return new Raw(out);
}

// parseJSON parses the server's JSON, keeping the integers a JavaScript
// number cannot hold exactly (an int64 id, a time in nanoseconds) as they
// were written: JSON.stringify writes them back unchanged, so a payload
// shown can be pasted back as the same value (JSON.parse alone would show
// 9007199254740993 as 9007199254740992). Where the browser cannot (no
// JSON.rawJSON), it is JSON.parse.
const exactInt = /^-?\d+$/;
export function parseJSON(text) {
  if (typeof JSON.rawJSON !== "function") return JSON.parse(text);
  return JSON.parse(text, (_k, v, ctx) =>
    typeof v === "number" && !Number.isSafeInteger(v) && ctx?.source && exactInt.test(ctx.source) ? JSON.rawJSON(ctx.source) : v);
}

// ---- Talking to the server.
let csrf = "";
// setCSRF keeps the X-Cairn-CSRF token of actions (app.js reads it from /api/session).
export function setCSRF(token) { csrf = token; }
export class APIError extends Error {
  constructor(code, message, status) { super(message); this.code = code; this.status = status; }
}
async function answer(resp) {
  const text = await resp.text();
  let body = null;
  try { body = text ? parseJSON(text) : null; } catch { /* not JSON */ }
  if (resp.status === 401) { location.href = "/login?next=" + encodeURIComponent(location.pathname + location.search); }
  if (!resp.ok) throw new APIError(body?.code || "internal", body?.message || text || resp.statusText, resp.status);
  return body;
}
// send is fetch, with a server that does not answer as an APIError
// ("unavailable") like any other failure.
async function send(path, opts) {
  try {
    return await fetch(path, opts);
  } catch {
    throw new APIError("unavailable", "the server does not answer", 0);
  }
}
export async function get(path, params = {}) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v != null) q.set(k, v);
  const s = q.toString();
  return answer(await send(path + (s ? "?" + s : ""), { headers: { Accept: "application/json" } }));
}
export async function post(path, body) {
  const out = await answer(await send(path, {
    method: "POST", headers: { "Content-Type": "application/json", "X-Cairn-CSRF": csrf }, body: JSON.stringify(body),
  }));
  refreshPausedCount().catch(() => {}); // an action may have resolved (or ended) a paused run
  return out;
}

// ---- Formatting.
export function ago(t, now = Date.now()) {
  if (!t) return "–";
  const d = now - new Date(t).getTime();
  const s = Math.abs(d) / 1000;
  let txt; // each unit counted down (floor), so that it never reads 60
  if (s < 1) txt = Math.floor(Math.abs(d)) + "ms";
  else if (s < 10) txt = (Math.floor(s * 10) / 10).toFixed(1) + "s";
  else if (s < 60) txt = Math.floor(s) + "s";
  else if (s < 3600) txt = Math.floor(s / 60) + "m" + (s < 600 ? " " + Math.floor(s % 60) + "s" : "");
  else if (s < 172800) txt = Math.floor(s / 3600) + "h " + Math.floor((s % 3600) / 60) + "m";
  else txt = Math.floor(s / 86400) + "d";
  return d >= 0 ? txt + " ago" : "in " + txt;
}
export function when(t) {
  if (!t) return html`<span class="muted">–</span>`;
  const d = new Date(t);
  return html`<time datetime="${t}" data-ago title="${d.toLocaleString()} (${t})">${ago(t)}</time>`;
}
// dur parses a Go duration ("1m30.5s", "250ms") to milliseconds.
export function durMs(s) {
  if (!s) return 0;
  let ms = 0;
  for (const [, n, u] of s.matchAll(/([\d.]+)(ns|µs|us|ms|s|m|h)/g)) {
    ms += parseFloat(n) * { ns: 1e-6, "µs": 1e-3, us: 1e-3, ms: 1, s: 1e3, m: 6e4, h: 3.6e6 }[u];
  }
  return ms;
}
// fmtMs writes a duration in milliseconds in its largest units: "250ms",
// "1.23s", "12.5s", "11m 59s", "2h 5m". It rounds the duration to the
// smallest unit it shows before splitting it, so that a unit never reads
// 60 ("12m 0s", not "11m 60s"); a value that rounds up into the next
// unit is written in it.
export function fmtMs(ms) {
  if (ms < 1) return ms > 0 ? "<1ms" : "0";
  if (Math.round(ms) < 1000) return Math.round(ms) + "ms";
  if (Math.round(ms / 10) < 1000) return (Math.round(ms / 10) / 100).toFixed(2) + "s";
  if (Math.round(ms / 100) < 600) return (Math.round(ms / 100) / 10).toFixed(1) + "s";
  const s = Math.round(ms / 1000);
  if (s < 3600) return Math.floor(s / 60) + "m " + (s % 60) + "s";
  const m = Math.round(ms / 60000);
  return Math.floor(m / 60) + "h " + (m % 60) + "m";
}
export const status = (s) => html`<span class="pill ${s}">${(s || "").replace(/_/g, " ")}</span>`;
// runStatus is a run's status badge: "quarantined" for a run whose stored
// data is damaged (r.corrupt: every write to it is refused, whatever status
// it had when the damage was found), else its status.
export const runStatus = (r) => r.corrupt
  ? html`<span class="pill corrupt" title="${"stored data damaged; recorded status " + (r.status || "").replace(/_/g, " ") + ": " + r.corrupt}">quarantined</span>`
  : status(r.status);
export const short = (id) => (id || "").slice(0, 12);
// payload renders a payload ({"encoding", "json"|"base64"}) pretty-printed.
export function payload(p) {
  if (!p) return html`<span class="muted">none</span>`;
  if ("json" in p) return html`<pre class="payload">${JSON.stringify(p.json, null, 2)}</pre>`;
  return html`<pre class="payload muted">${p.base64 ? atob(p.base64).length : 0} bytes of ${p.encoding} (not JSON)</pre>`;
}
export function payloadText(p) {
  if (!p) return "";
  return "json" in p ? JSON.stringify(p.json) : `<${p.encoding}>`;
}
export function runLink(id, runId, text) {
  const href = "/runs/" + encodeURIComponent(id) + (runId ? "/" + encodeURIComponent(runId) : "");
  return html`<a href="${href}">${text ?? id}</a>`;
}
export function toast(msg) {
  const t = document.getElementById("toast");
  t.textContent = msg;
  t.classList.add("show");
  clearTimeout(toast.timer);
  toast.timer = setTimeout(() => t.classList.remove("show"), 3500);
}
export function errorBox(err) {
  return html`<div class="callout bad" role="alert"><strong>${err.code || "error"}</strong>: ${err.message}</div>`;
}
// who is the name a person gives for the actions they take.
export const who = {
  get: () => localStorage.getItem("cairn.who") || "",
  set: (v) => localStorage.setItem("cairn.who", v.trim()),
};

// ---- Live updates: pages poll through every(); the indicator shows health,
// and a banner says so when the server stops answering.
export function setLive(ok) {
  const el = document.getElementById("live");
  el.className = "live " + (ok ? "on" : "off");
  el.title = ok ? "Live: updating" : "Not updating: the server does not answer";
  const banner = document.getElementById("offline");
  if (banner) banner.hidden = ok;
}
// every calls fn now and every ms while the tab is visible; it returns a stop function.
export function every(ms, fn) {
  let stopped = false, timer = null;
  const tick = async () => {
    if (stopped) return;
    if (document.visibilityState === "visible") {
      try { await fn(); setLive(true); } catch (e) { setLive(false); if (!(e instanceof APIError)) console.error(e); }
    }
    if (!stopped) timer = setTimeout(tick, ms);
  };
  tick();
  return () => { stopped = true; clearTimeout(timer); };
}

// ---- Confirmation dialogs.
export function confirmDialog({ title, body, confirm, danger, fields = [] }) {
  return new Promise((resolve) => {
    const d = document.createElement("dialog");
    d.innerHTML = html`<form method="dialog">
      <h2>${title}</h2>
      <div>${body}</div>
      ${fields.map((f) => html`<div class="field"><label for="f-${f.name}">${f.label}</label>
        ${f.textarea ? html`<textarea id="f-${f.name}" name="${f.name}" placeholder="${f.placeholder || ""}"></textarea>`
                     : html`<input id="f-${f.name}" name="${f.name}" value="${f.value || ""}" placeholder="${f.placeholder || ""}" ${f.required ? raw("required") : ""}>`}</div>`)}
      <div class="buttons"><button value="cancel" formnovalidate>Cancel</button>
      <button value="ok" class="${danger ? "danger" : "primary"}" id="confirm-ok">${confirm}</button></div></form>`.s;
    document.body.append(d);
    d.addEventListener("close", () => {
      const ok = d.returnValue === "ok";
      const values = {};
      for (const f of fields) values[f.name] = d.querySelector(`[name="${f.name}"]`).value;
      d.remove();
      resolve(ok ? values : null);
    });
    d.showModal();
    (d.querySelector("input,textarea") || d.querySelector("#confirm-ok")).focus();
  });
}

// ---- Keyboard navigation of tables: rowKeys makes one focusable (app.js
// moves through its rows with j/k and opens one with Enter).
export function rowKeys(table) {
  if (!table) return;
  table.tabIndex = 0;
  table.setAttribute("aria-label", table.getAttribute("aria-label") || "rows: j and k move, Enter opens");
}

// ---- Navigation: go changes the URL and asks the router (app.js) to show
// the page, by an event, without importing it.
export const NAVIGATE = "cairn:navigate";
export function go(href, replace = false) {
  if (replace) history.replaceState(null, "", href); else history.pushState(null, "", href);
  window.dispatchEvent(new Event(NAVIGATE));
}

// refreshPausedCount updates the header's counts of the runs waiting for
// a person — all of them, and those awaiting an approval — (every 5 s, and
// at once after an action that may change them).
export async function refreshPausedCount() {
  const p = await get("/api/runs", { status: "paused", size: 500 });
  const runs = p.workflows || [];
  const more = p.next ? "+" : "";
  const el = document.getElementById("paused-count");
  el.hidden = runs.length === 0;
  el.textContent = runs.length + more;
  el.setAttribute("aria-label", `${el.textContent} waiting for a person`);
  el.title = `${el.textContent} run(s) waiting for a person`;
  const n = runs.filter((w) => w.pause?.kind === "approval").length;
  const ap = document.getElementById("approval-count");
  ap.hidden = n === 0;
  ap.textContent = `${n}${more} to approve`;
  ap.setAttribute("aria-label", `${n}${more} awaiting approval`);
}
