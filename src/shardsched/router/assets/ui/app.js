// The console's shell: the session, API calls, the hash router, time formatting and the
// one event stream per tab that keeps the screen live. Screens are in views.js.
// Plain ES modules, no build step; every text is set as text (never parsed as HTML).
import { screens } from "./views.js";

export const session = { name: "", scopes: [], csrf: "", auth: true };

export function canWrite() {
  return session.scopes.includes("write") || session.scopes.includes("admin");
}

// h("a", {href: "#/"}, "text", child…): an element; strings become text nodes.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children.flat()) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export class ApiError extends Error {
  constructor(status, body) {
    super((body && body.error && body.error.message) || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export async function api(method, path, body) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET") headers["x-csrf-token"] = session.csrf;
  const resp = await fetch(path, {
    method, headers, credentials: "same-origin",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (resp.status === 401 && session.auth) {
    location.assign("/ui/login");
    throw new ApiError(401, null);
  }
  const text = await resp.text();
  const data = text ? JSON.parse(text) : null;
  if (!resp.ok) throw new ApiError(resp.status, data);
  return data;
}

export function query(params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}

export function toast(text) {
  const box = document.getElementById("toast");
  const item = h("div", {}, text);
  box.append(item);
  setTimeout(() => item.remove(), 6000);
}

// Times: in the browser's zone with its name, or in UTC (the header's toggle).
export function utcMode() { return localStorage.getItem("shardsched.utc") === "1"; }
export function zoneName() { return utcMode() ? "UTC" : Intl.DateTimeFormat().resolvedOptions().timeZone; }
export function when(iso, zone) {
  if (!iso) return "—";
  const d = new Date(iso);
  const tz = zone || (utcMode() ? "UTC" : undefined);
  // sv-SE writes ISO-like dates; the zone's short name says which clock it is
  return d.toLocaleString("sv-SE", { timeZone: tz, hourCycle: "h23", year: "numeric", month: "2-digit",
    day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", timeZoneName: "short" });
}
export function ago(iso) {
  if (!iso) return "";
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  const a = Math.abs(s);
  const t = a < 60 ? `${a}s` : a < 3600 ? `${Math.round(a / 60)}m` : a < 86400 ? `${Math.round(a / 3600)}h` : `${Math.round(a / 86400)}d`;
  return s >= 0 ? `${t} ago` : `in ${t}`;
}
export function time(iso) {
  return h("time", { datetime: iso || "", title: iso ? `${new Date(iso).toISOString()} (${ago(iso)})` : "" }, when(iso));
}

// A run's or tick's state: a shape and the word, never only a colour.
const SHAPES = { succeeded: "✓", fired: "✓", failed: "✗", dead_letter: "☠", cancelled: "⊘",
  skipped: "↷", running: "●", claimed: "●", scheduled: "○", queued: "○", waiting: "⧗",
  retrying: "↻", pending: "…", missing: "?", duplicated: "‼", late: "⏰", paused: "⏸", active: "▶", deleted: "⌫" };
export function shape(state) { return SHAPES[state] || "·"; }
export function stateTag(state, title) {
  return h("span", { class: `state s-${state}`, title: title || state }, `${shape(state)} ${state}`);
}

// One EventSource per tab: each transition is offered to the current screen, which
// decides whether to redraw (a screen redraws at most every 500 ms).
let current = null;
let pending = null;
export function onTransition(event) {
  if (!current || !current.wants || !current.wants(event)) return;
  if (pending) return;
  // a screen redraws at most every `every` ms (the overview's status read costs a call per
  // shard: at most every 5 s), so a burst of transitions costs a few reads, not thousands
  const gap = current.every || 500;
  pending = setTimeout(() => { pending = null; if (current && current.refresh) current.refresh(); }, gap);
}

function connectEvents() {
  const live = document.getElementById("live");
  const es = new EventSource("/api/v1/events/stream");
  es.addEventListener("open", () => { live.textContent = "● live"; live.classList.add("on"); });
  es.addEventListener("error", () => { live.textContent = "○ reconnecting"; live.classList.remove("on"); });
  es.addEventListener("transition", (m) => { try { onTransition(JSON.parse(m.data)); } catch (e) { /* ignore */ } });
  return es;
}

async function route() {
  const main = document.getElementById("main");
  const hash = location.hash.replace(/^#/, "") || "/";
  const [path, qs] = hash.split("?");
  const params = Object.fromEntries(new URLSearchParams(qs || ""));
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const a of document.querySelectorAll("nav a")) {
    const target = a.getAttribute("href").replace(/^#/, "");
    a.classList.toggle("current", target === "/" + (parts[0] || "") || (target === "/" && !parts.length));
  }
  if (current && current.leave) current.leave();
  const screen = screens(parts, params);
  current = screen;
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    const node = await screen.render();
    if (current === screen) main.replaceChildren(node);
  } catch (err) {
    if (current === screen) main.replaceChildren(h("h1", {}, "Error"), h("p", { class: "error", role: "alert" }, err.message));
  }
  screen.refresh = async () => {
    if (current !== screen) return;
    try {
      const node = await screen.render();
      if (current === screen) main.replaceChildren(node);
    } catch (err) { /* keep what is shown; the next event tries again */ }
  };
}

async function start() {
  try {
    Object.assign(session, await api("GET", "/ui/session"));
  } catch (err) { return; }
  document.getElementById("whoami").textContent = `${session.name} (${session.scopes.join(", ")})`;
  document.getElementById("logout-csrf").value = session.csrf;
  if (!session.auth) document.getElementById("logout").hidden = true;
  const utc = document.getElementById("utc");
  utc.checked = utcMode();
  utc.addEventListener("change", () => { localStorage.setItem("shardsched.utc", utc.checked ? "1" : "0"); route(); });
  window.addEventListener("hashchange", route);
  connectEvents();
  route();
}

start();
