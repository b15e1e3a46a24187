// What every screen shares: the session, API calls, building elements, time formatting
// and run-state tags. It imports nothing, so app.js (the shell), views.js and charts.js
// all import from here and none imports another's module back (no import cycle).
// Plain ES modules, no build step; every text is set as text (never parsed as HTML).
export const session = { name: "", scopes: [], csrf: "", auth: true };

export function canWrite() {
  return session.scopes.includes("write") || session.scopes.includes("admin");
}

// h("a", {href: "#/"}, "text", child…): an element; strings become text nodes, and
// arrays of children are spread at any depth (a row of [link, " "] pairs is children,
// never "[object HTMLElement]" as text).
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.className = v;
    else el.setAttribute(k, v === true ? "" : String(v));
  }
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export function svg(tag, attrs, ...children) {
  const el = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [k, v] of Object.entries(attrs || {})) el.setAttribute(k, String(v));
  for (const c of children.flat(Infinity)) {
    if (c === null || c === undefined) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

export class ApiError extends Error {
  constructor(status, body) {
    super(body?.error?.message || `HTTP ${status}`);
    this.status = status;
    this.body = body;
  }
}

export async function api(method, path, body) {
  const headers = { accept: "application/json" };
  if (body !== undefined) headers["content-type"] = "application/json";
  if (method !== "GET") headers["x-csrf-token"] = session.csrf;
  const resp = await fetch(path, {
    method,
    headers,
    credentials: "same-origin",
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
  for (const [k, v] of Object.entries(params))
    if (v !== null && v !== undefined && v !== "") q.set(k, v);
  const s = q.toString();
  return s ? `?${s}` : "";
}

export function toast(text) {
  const box = document.getElementById("toast");
  const item = h("div", {}, text);
  box.append(item);
  setTimeout(() => item.remove(), 6000);
}

// Times: in the browser's zone with its name, or in UTC (the header's toggle).
export function utcMode() {
  return localStorage.getItem("shardsched.utc") === "1";
}
export function zoneName() {
  return utcMode() ? "UTC" : Intl.DateTimeFormat().resolvedOptions().timeZone;
}
export function when(iso, zone) {
  if (!iso) return "—";
  const d = new Date(iso);
  const tz = zone || (utcMode() ? "UTC" : undefined);
  // sv-SE writes ISO-like dates; the zone's short name says which clock it is
  return d.toLocaleString("sv-SE", {
    timeZone: tz,
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
    timeZoneName: "short",
  });
}
// A duration as the CLI writes it (core/durations.py): 45s, 20m, 1h30m, 1d, 0.5s.
export function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60 && seconds !== Math.floor(seconds)) return `${seconds}s`;
  let rest = Math.floor(seconds);
  let out = "";
  for (const [unit, size] of [
    ["d", 86400],
    ["h", 3600],
    ["m", 60],
    ["s", 1],
  ]) {
    if (rest >= size) {
      out += `${Math.floor(rest / size)}${unit}`;
      rest %= size;
    }
  }
  return out || "0s";
}

// How long something took, from its start to its end (or now, with "…": still going).
export function took(start, end) {
  if (!start) return "";
  const s = ((end ? Date.parse(end) : Date.now()) - Date.parse(start)) / 1000;
  const text = s < 60 ? `${s.toFixed(1)}s` : duration(Math.round(s));
  return end ? text : `${text}…`;
}

export function ago(iso) {
  if (!iso) return "";
  const s = Math.round((Date.now() - new Date(iso).getTime()) / 1000);
  const a = Math.abs(s);
  const t =
    a < 60
      ? `${a}s`
      : a < 3600
        ? `${Math.round(a / 60)}m`
        : a < 86400
          ? `${Math.round(a / 3600)}h`
          : `${Math.round(a / 86400)}d`;
  return s >= 0 ? `${t} ago` : `in ${t}`;
}
export function time(iso) {
  return h(
    "time",
    { datetime: iso || "", title: iso ? `${new Date(iso).toISOString()} (${ago(iso)})` : "" },
    when(iso),
  );
}

// A run's or tick's state: a shape and the word, never only a colour. Every shape is in
// DejaVu Sans, the font a bare Debian desktop has (tests/router/test_console_glyphs.py).
export const SHAPES = {
  succeeded: "✓",
  fired: "✓",
  failed: "✗",
  dead_letter: "☠",
  cancelled: "⊘",
  skipped: "↷",
  running: "●",
  claimed: "●",
  scheduled: "○",
  queued: "○",
  waiting: "◔",
  retrying: "↻",
  pending: "…",
  missing: "?",
  duplicated: "‼",
  late: "◷",
  paused: "‖",
  active: "▶",
  deleted: "⌫",
};
export function shape(state) {
  return SHAPES[state] || "·";
}
export function stateTag(state, title) {
  return h(
    "span",
    { class: `state s-${state}`, title: title || state },
    `${shape(state)} ${state}`,
  );
}
