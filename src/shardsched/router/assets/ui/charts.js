// Small drawings, each from data the API gave: a run sparkline, the trigger-lag chart,
// a DAG run's graph and a job's tick strip. Shapes and words carry the meaning; colour
// only repeats it.
import { h, svg, shape, took, utcMode, when } from "./lib.js";

export function sparkline(runs) {
  if (!runs?.length) return h("span", { class: "muted" }, "no runs");
  const oldestFirst = [...runs].reverse();
  const label = oldestFirst.map((r) => r.state).join(", ");
  return h(
    "span",
    { class: "spark", role: "img", "aria-label": `recent runs, oldest first: ${label}` },
    oldestFirst.map((r) =>
      h(
        "span",
        { class: `s-${r.state}`, title: `${r.state} · ${when(r.scheduled_for)}` },
        shape(r.state),
      ),
    ),
  );
}

// A time of day on the chart's axis: 24-hour, in UTC when the header's toggle says so.
function clock(t) {
  return new Date(t).toLocaleTimeString("sv-SE", {
    timeZone: utcMode() ? "UTC" : undefined,
    hourCycle: "h23",
  });
}

// Samples [{t, p50, p99}] (seconds) as two lines over time.
export function lagChart(samples) {
  const W = 560,
    H = 160,
    L = 44,
    B = 22;
  if (samples.length < 2)
    return h(
      "p",
      { class: "muted" },
      "The chart fills as the nodes record their lag (a sample every 15 s).",
    );
  const t0 = samples[0].t,
    t1 = samples[samples.length - 1].t;
  const top = Math.max(0.001, ...samples.map((s) => s.p99 || 0)) * 1.15;
  const x = (t) => L + ((t - t0) / Math.max(1, t1 - t0)) * (W - L - 8);
  const y = (v) => H - B - (v / top) * (H - B - 8);
  const line = (key) =>
    samples
      .filter((s) => s[key] !== null && s[key] !== undefined)
      .map((s, i) => `${i ? "L" : "M"}${x(s.t).toFixed(1)},${y(s[key]).toFixed(1)}`)
      .join(" ");
  const ms = (v) => `${Math.round(v * 1000)} ms`;
  return svg(
    "svg",
    {
      viewBox: `0 0 ${W} ${H}`,
      width: "100%",
      role: "img",
      "aria-label": `trigger lag, last p50 ${ms(samples[samples.length - 1].p50 || 0)}, p99 ${ms(samples[samples.length - 1].p99 || 0)}`,
    },
    svg("line", { x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#8c959f" }),
    svg("line", { x1: L, y1: 4, x2: L, y2: H - B, stroke: "#8c959f" }),
    svg("text", { x: 2, y: 14 }, ms(top)),
    svg("text", { x: 2, y: H - B }, "0"),
    svg("text", { x: L, y: H - 4 }, clock(t0)),
    svg("text", { x: W - 8, y: H - 4, "text-anchor": "end" }, clock(t1)),
    svg("path", {
      d: line("p99"),
      fill: "none",
      stroke: "#cf222e",
      "stroke-width": 2,
      "stroke-dasharray": "6 3",
    }),
    svg("path", { d: line("p50"), fill: "none", stroke: "#0550ae", "stroke-width": 2 }),
    svg("text", { x: W - 150, y: 14, fill: "#cf222e" }, "- - p99"),
    svg("text", { x: W - 80, y: 14, fill: "#0550ae" }, "— p50"),
  );
}

// A DAG run drawn by layers (a task's layer: one past its deepest dependency).
export function dagGraph(dagRun, tasks) {
  const deps = Object.fromEntries(tasks.map((t) => [t.name, t.depends_on || []]));
  const depth = {};
  const level = (n, seen = new Set()) => {
    if (depth[n] !== undefined) return depth[n];
    if (seen.has(n)) return 0;
    seen.add(n);
    depth[n] = Math.max(-1, ...(deps[n] || []).map((d) => level(d, seen))) + 1;
    return depth[n];
  };
  for (const t of tasks) level(t.name);
  const layers = [];
  for (const t of tasks) {
    layers[depth[t.name]] ??= [];
    layers[depth[t.name]].push(t.name);
  }
  const BW = 150,
    BH = 44,
    GX = 60,
    GY = 18;
  const pos = {};
  layers.forEach((names, i) => {
    names.forEach((n, j) => {
      pos[n] = { x: 10 + i * (BW + GX), y: 10 + j * (BH + GY) };
    });
  });
  const W = 20 + layers.length * (BW + GX),
    H = 20 + Math.max(...layers.map((l) => l.length)) * (BH + GY);
  const state = Object.fromEntries((dagRun.tasks || []).map((t) => [t.task, t]));
  const edges = [],
    boxes = [];
  for (const t of tasks)
    for (const d of deps[t.name]) {
      if (!pos[d]) continue;
      const a = pos[d],
        b = pos[t.name];
      edges.push(
        svg("path", {
          d: `M${a.x + BW},${a.y + BH / 2} C${a.x + BW + GX / 2},${a.y + BH / 2} ${b.x - GX / 2},${b.y + BH / 2} ${b.x},${b.y + BH / 2}`,
          fill: "none",
          stroke: "#8c959f",
          "marker-end": "url(#arrow)",
        }),
      );
    }
  const fills = {
    succeeded: "#dafbe1",
    failed: "#ffebe9",
    dead_letter: "#ffebe9",
    running: "#ddf4ff",
    claimed: "#ddf4ff",
    skipped: "#eaeef2",
    cancelled: "#eaeef2",
    retrying: "#fff8c5",
    waiting: "#ffffff",
    scheduled: "#f6f8fa",
  };
  for (const t of tasks) {
    const p = pos[t.name],
      st = (state[t.name] && state[t.name].state) || "waiting";
    const runId = state[t.name] && state[t.name].run_id;
    const last = state[t.name]?.attempts?.[state[t.name].attempts.length - 1];
    const spent = last?.started_at ? took(last.started_at, last.finished_at) : "";
    const box = svg(
      "g",
      { class: "task", "data-task": t.name, "data-state": st },
      svg("rect", {
        x: p.x,
        y: p.y,
        width: BW,
        height: BH,
        rx: 6,
        fill: fills[st] || "#fff",
        stroke: "#57606a",
      }),
      svg(
        "text",
        { x: p.x + 8, y: p.y + 18 },
        t.name.length > 20 ? `${t.name.slice(0, 19)}…` : t.name,
      ),
      svg("text", { x: p.x + 8, y: p.y + 36 }, `${shape(st)} ${st}${spent ? ` · ${spent}` : ""}`),
      svg("title", {}, `${t.name}: ${st}${spent ? `, took ${spent}` : ""}`),
    );
    if (runId) {
      const link = svg("a", { href: `#/runs/${encodeURIComponent(runId)}` }, box);
      boxes.push(link);
    } else boxes.push(box);
  }
  return svg(
    "svg",
    {
      viewBox: `0 0 ${W} ${H}`,
      width: Math.min(W, 1200),
      role: "img",
      "aria-label": `DAG run graph: ${tasks.map((t) => `${t.name} ${state[t.name]?.state || "waiting"}`).join(", ")}`,
    },
    svg(
      "defs",
      {},
      svg(
        "marker",
        {
          id: "arrow",
          viewBox: "0 0 10 10",
          refX: 10,
          refY: 5,
          markerWidth: 6,
          markerHeight: 6,
          orient: "auto",
        },
        svg("path", { d: "M0,0 L10,5 L0,10 z", fill: "#8c959f" }),
      ),
    ),
    edges,
    boxes,
  );
}

// A job's ticks from /ticks, oldest first: shape per outcome, the reason on hover.
// One mark a tick, coloured by how its run ended (its last attempt), not by the
// scheduler's "fired": a tick whose every attempt failed is red. A late start or a skip
// says so; a tick with no run says why.
export function tickStrip(ticks) {
  if (!ticks.length) return h("p", { class: "muted" }, "No ticks in this window.");
  return h(
    "div",
    { class: "strip", role: "list", "aria-label": "ticks, oldest first" },
    ticks.map((t) => {
      const late =
        t.outcome === "fired" && t.lag_s !== undefined && t.lag_s !== null && t.lag_s > 60;
      const kind = t.run_state || t.outcome;
      const notes = [
        t.attempts > 1 ? `${t.attempts} attempts` : null,
        late ? "late start" : null,
        t.reason ? `(${t.reason})` : null,
        t.lag_s ? `lag ${t.lag_s.toFixed(1)} s` : null,
      ].filter(Boolean);
      const title = `${when(t.tick)}: ${kind}${notes.length ? `, ${notes.join(", ")}` : ""}`;
      const attrs = {
        class: `s-${kind}${late ? " late" : ""}`,
        title,
        role: "listitem",
        "aria-label": title,
        "data-outcome": kind,
      };
      const run = t.last_run_id || t.run_id;
      return run
        ? h("a", { ...attrs, href: `#/runs/${encodeURIComponent(run)}` }, shape(kind))
        : h("span", { ...attrs, tabindex: 0 }, shape(kind));
    }),
  );
}
