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
      if (current === screen) main.replaceChildren(node);
    } catch (_err) {
      /* keep what is shown; the next event tries again */
    }
  };
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
  window.addEventListener("hashchange", route);
  connectEvents();
  route();
}

start();
