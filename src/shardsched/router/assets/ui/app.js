// The console's shell: the hash router and the one event stream per tab that keeps the
// screen live. Screens are in views.js, what they share in lib.js.
// Plain ES modules, no build step; every text is set as text (never parsed as HTML).
import { api, h, session, utcMode } from "./lib.js";
import { screens } from "./views.js";

// One EventSource per tab: each transition is offered to the current screen, which
// decides whether to redraw (a screen redraws at most every 500 ms).
let current = null;
let pending = null;
export function onTransition(event) {
  if (!current?.wants?.(event)) return;
  if (pending) return;
  // a screen redraws at most every `every` ms (the overview's status read costs a call per
  // shard: at most every 5 s), so a burst of transitions costs a few reads, not thousands
  const gap = current.every || 500;
  pending = setTimeout(() => {
    pending = null;
    if (current?.refresh) current.refresh();
  }, gap);
}

function connectEvents() {
  const live = document.getElementById("live");
  const es = new EventSource("/api/v1/events/stream");
  es.addEventListener("open", () => {
    live.textContent = "● live";
    live.classList.add("on");
  });
  es.addEventListener("error", () => {
    live.textContent = "○ reconnecting";
    live.classList.remove("on");
  });
  es.addEventListener("transition", (m) => {
    try {
      onTransition(JSON.parse(m.data));
    } catch (_e) {
      /* ignore */
    }
  });
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
    a.classList.toggle(
      "current",
      target === `/${parts[0] || ""}` || (target === "/" && !parts.length),
    );
  }
  if (current?.leave) current.leave();
  const screen = screens(parts, params);
  current = screen;
  main.replaceChildren(h("p", { class: "muted" }, "Loading…"));
  try {
    const node = await screen.render();
    if (current === screen) main.replaceChildren(node);
  } catch (err) {
    if (current === screen)
      main.replaceChildren(
        h("h1", {}, "Error"),
        h("p", { class: "error", role: "alert" }, err.message),
      );
  }
  screen.refresh = async () => {
    if (current !== screen) return;
    try {
      const node = await screen.render();
      if (current === screen) redraw(main, node);
    } catch (_err) {
      /* keep what is shown; the next event tries again */
    }
  };
}

// A field is known by its id (or, for a row's checkbox, its label): what the operator
// typed, ticked or picked in it is theirs until the screen is left.
const fieldKey = (el) => el.id || el.getAttribute("aria-label");
const FIELDS = "input, textarea, select";

// A live redraw replaces the screen, and carries over what the operator is doing on it:
// every field they changed keeps its value (a pause reason, args, dates, ticked rows), and
// the field they are in keeps focus and caret. Only the screen's data is new.
function redraw(main, node) {
  const active = document.activeElement;
  const carried = new Map();
  for (const el of main.querySelectorAll(FIELDS)) {
    const key = fieldKey(el);
    if (key && (el.dataset.touched || el === active)) carried.set(key, el);
  }
  let focus = null;
  for (const el of node.querySelectorAll(FIELDS)) {
    const old = carried.get(fieldKey(el));
    if (!old || old.tagName !== el.tagName || old.type !== el.type) continue;
    if (old.dataset.touched) {
      if (el.type === "checkbox" || el.type === "radio") el.checked = old.checked;
      else el.value = old.value;
      el.dataset.touched = "1";
    }
    if (old === active) focus = [el, old];
  }
  main.replaceChildren(node);
  if (focus) {
    const [el, old] = focus;
    el.focus({ preventScroll: true });
    try {
      el.setSelectionRange(old.selectionStart, old.selectionEnd, old.selectionDirection);
    } catch (_e) {
      /* a field with no caret (a date, a select) */
    }
  }
  main.dataset.draws = String(Number(main.dataset.draws || 0) + 1);
}

// A field the operator changed is marked, so the next redraw keeps it.
function markTouched(e) {
  if (e.target.matches?.(FIELDS)) e.target.dataset.touched = "1";
}

async function start() {
  try {
    Object.assign(session, await api("GET", "/ui/session"));
  } catch (_err) {
    return;
  }
  document.getElementById("whoami").textContent = `${session.name} (${session.scopes.join(", ")})`;
  document.getElementById("logout-csrf").value = session.csrf;
  if (!session.auth) document.getElementById("logout").hidden = true;
  const utc = document.getElementById("utc");
  utc.checked = utcMode();
  utc.addEventListener("change", () => {
    localStorage.setItem("shardsched.utc", utc.checked ? "1" : "0");
    route();
  });
  const main = document.getElementById("main");
  main.addEventListener("input", markTouched);
  main.addEventListener("change", markTouched);
  window.addEventListener("hashchange", route);
  connectEvents();
  route();
}

start();
