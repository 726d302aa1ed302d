// Cairn's web UI: the router over the pages in pages/, the keyboard, the
// theme and the start. Plain JavaScript modules, no build step. What the
// pages share is in lib.js: a page never imports this module.
import { html, get, errorBox, every, ago, go, NAVIGATE, setCSRF, refreshPausedCount } from "./lib.js";
import * as runs from "./pages/runs.js";
import * as run from "./pages/run.js";
import * as paused from "./pages/paused.js";
import * as effects from "./pages/effects.js";
import * as queues from "./pages/queues.js";
import * as cluster from "./pages/cluster.js";
import * as agent from "./pages/agent.js";
import * as compare from "./pages/compare.js";
import * as schedules from "./pages/schedules.js";

// Relative times ("3s ago") are kept current on every page, open runs and
// closed ones alike: each <time> made by when() is rewritten every second.
function tickTimes() {
  const now = Date.now();
  for (const t of document.querySelectorAll("time[data-ago]")) {
    const txt = ago(t.dateTime, now);
    if (t.textContent !== txt) t.textContent = txt;
  }
}
setInterval(tickTimes, 1000);

// ---- Keyboard navigation of tables (lib.js's rowKeys marks them): j/k
// move, Enter opens.
function moveSelection(delta) {
  const rows = [...document.querySelectorAll("tbody tr[data-href]")];
  if (!rows.length) return;
  let i = rows.findIndex((r) => r.classList.contains("sel"));
  rows.forEach((r) => r.classList.remove("sel"));
  i = Math.max(0, Math.min(rows.length - 1, i + delta));
  rows[i].classList.add("sel");
  rows[i].scrollIntoView({ block: "nearest" });
}

// ---- The router.
const routes = [
  [/^\/(runs)?$/, runs, "runs"],
  [/^\/runs\/([^/]+)(?:\/([^/]+))?$/, run, "runs"],
  [/^\/paused$/, paused, "paused"],
  [/^\/effects$/, effects, "effects"],
  [/^\/queues$/, queues, "queues"],
  [/^\/cluster$/, cluster, "cluster"],
  [/^\/agent\/([^/]+)(?:\/([^/]+))?$/, agent, "runs"],
  [/^\/compare$/, compare, "runs"],
  [/^\/schedules(?:\/([^/]+))?$/, schedules, "schedules"],
];
let cleanup = null;
async function route() {
  if (cleanup) { try { cleanup(); } catch (e) { console.error(e); } cleanup = null; }
  const path = location.pathname;
  const main = document.getElementById("main");
  for (const [re, page, nav] of routes) {
    const m = path.match(re);
    if (!m) continue;
    document.querySelectorAll("[data-nav]").forEach((a) => {
      if (a.dataset.nav === nav) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
    });
    const params = m.slice(1).map((s) => (s ? decodeURIComponent(s) : s));
    try {
      cleanup = (await page.render(main, params, new URLSearchParams(location.search))) || null;
    } catch (e) {
      main.innerHTML = errorBox(e).s;
    }
    return;
  }
  main.innerHTML = html`<h1>Not found</h1><p>No page at ${path}. <a href="/runs">Runs</a></p>`.s;
}

document.addEventListener("click", (e) => {
  const row = e.target.closest("tr[data-href]");
  if (row && !e.target.closest("a,button,input,select,textarea,summary,details")) {
    if (e.metaKey || e.ctrlKey) window.open(row.dataset.href); else go(row.dataset.href);
    return;
  }
  const a = e.target.closest("a[href]");
  if (!a || a.target || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey || e.button !== 0) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith("/static/") || url.pathname === "/login") return;
  e.preventDefault();
  go(url.pathname + url.search + url.hash);
});
window.addEventListener("popstate", route);
window.addEventListener(NAVIGATE, route);

// ---- Theme.
function applyTheme(t) {
  if (t) document.documentElement.dataset.theme = t; else delete document.documentElement.dataset.theme;
}
function toggleTheme() {
  const dark = document.documentElement.dataset.theme === "dark" ||
    (!document.documentElement.dataset.theme && matchMedia("(prefers-color-scheme: dark)").matches);
  // (the colours follow color-scheme: see style.css)
  const t = dark ? "light" : "dark";
  localStorage.setItem("cairn.theme", t);
  applyTheme(t);
}
applyTheme(localStorage.getItem("cairn.theme"));

// ---- Keyboard shortcuts.
let pending = "";
document.addEventListener("keydown", (e) => {
  if (e.target.closest("input,textarea,select,[contenteditable]") || e.metaKey || e.ctrlKey || e.altKey) return;
  if (document.querySelector("dialog[open]")) return;
  const k = e.key;
  if (pending === "g") {
    pending = "";
    const to = { r: "/runs", p: "/paused", e: "/effects", q: "/queues", c: "/cluster", s: "/schedules" }[k];
    if (to) { e.preventDefault(); go(to); }
    return;
  }
  if (k === "g") { pending = "g"; setTimeout(() => { pending = ""; }, 1200); return; }
  if (k === "/") { const f = document.querySelector("[data-search]"); if (f) { e.preventDefault(); f.focus(); } return; }
  if (k === "j" || k === "ArrowDown" && e.target === document.body) { e.preventDefault(); moveSelection(1); return; }
  if (k === "k" || k === "ArrowUp" && e.target === document.body) { e.preventDefault(); moveSelection(-1); return; }
  if (k === "Enter") { const r = document.querySelector("tbody tr.sel[data-href]"); if (r) { e.preventDefault(); go(r.dataset.href); } return; }
  if (k === "t") { toggleTheme(); return; }
  if (k === "?") { document.getElementById("keys").showModal(); }
});

// ---- Start.
async function start() {
  document.getElementById("theme").addEventListener("click", toggleTheme);
  document.getElementById("help").addEventListener("click", () => document.getElementById("keys").showModal());
  try {
    const s = await get("/api/session");
    setCSRF(s.csrf);
    document.getElementById("logout").hidden = !s.auth;
  } catch (e) {
    document.getElementById("main").innerHTML = errorBox(e).s;
    return;
  }
  every(5000, refreshPausedCount);
  route();
}
start();
