// The screens. Each is {render, wants, leave}: render() returns the screen's node from
// API calls; wants(event) says whether a transition from the event stream changes it.
import {
  api,
  ago,
  canWrite,
  duration,
  h,
  took,
  query,
  shape,
  stateTag,
  svg,
  time,
  toast,
  when,
  zoneName,
  ApiError,
} from "./lib.js";
import { dagGraph, lagChart, sparkline, tickStrip } from "./charts.js";

const enc = encodeURIComponent;
const link = (href, text) => h("a", { href }, text);
const jobLink = (id, name) => link(`#/jobs/${enc(id)}`, name || id);
const runLink = (id) => link(`#/runs/${enc(id)}`, id);
const table = (head, rows, empty) =>
  rows.length
    ? h(
        "div",
        { class: "scroll" },
        h(
          "table",
          {},
          h(
            "thead",
            {},
            h(
              "tr",
              {},
              head.map((c) => h("th", { scope: "col" }, c)),
            ),
          ),
          h(
            "tbody",
            {},
            rows.map((r) =>
              h(
                "tr",
                {},
                r.map((c) => h("td", {}, c)),
              ),
            ),
          ),
        ),
      )
    : h("p", { class: "muted" }, empty || "None.");
const field = (id, label, input, help) =>
  h(
    "div",
    {},
    h("label", { for: id }, label),
    input,
    help ? h("span", { class: "help" }, help) : null,
  );

// The element with this id on the screen now, else `fallback`: an answer that arrives
// after a live redraw goes to the screen shown, not to the one it replaced.
const live = (id, fallback) => document.getElementById(id) || fallback;

// A list's filters: submitted, the screen's address says the fields filled in.
const searchForm = (route, ...fields) =>
  h(
    "form",
    {
      class: "filters",
      role: "search",
      onsubmit: (e) => {
        e.preventDefault();
        const f = new FormData(e.target);
        location.hash = `${route}${query(Object.fromEntries([...f.entries()].filter(([, v]) => v)))}`;
      },
    },
    ...fields,
  );

// A button that calls the API and reports; hidden from read-only tokens.
function action(label, run, opts = {}) {
  if (!canWrite()) return null;
  return h(
    "button",
    {
      type: "button",
      class: opts.danger ? "danger" : "",
      onclick: async (e) => {
        const b = e.currentTarget;
        if (opts.confirm && !confirm(opts.confirm)) return;
        b.disabled = true;
        try {
          const out = await run();
          // what was typed for this action is spent: the next redraw shows the fields empty
          for (const f of b.closest(".actions")?.querySelectorAll("input, textarea") || []) {
            f.value = f.defaultValue;
            delete f.dataset.touched;
          }
          toast(opts.done ? opts.done(out) : `${label}: done`);
          if (opts.after) opts.after(out);
        } catch (err) {
          toast(`${label}: ${err.message}`);
        } finally {
          b.disabled = false;
        }
      },
    },
    label,
  );
}

function runsTable(runs, withJob) {
  return table(
    [
      "Run",
      withJob ? "Job" : null,
      "State",
      "Scheduled for",
      "Started",
      "Finished",
      "Took",
      "Worker",
      "Reason",
    ].filter(Boolean),
    runs.map((r) =>
      [
        runLink(r.run_id),
        withJob ? jobLink(r.job_id) : null,
        stateTag(r.state),
        time(r.scheduled_for),
        time(r.started_at),
        time(r.finished_at),
        took(r.started_at, r.finished_at),
        r.claimed_by || "—",
        r.reason || "",
      ].filter((c) => c !== null),
    ),
    "No runs.",
  );
}

// --- overview -----------------------------------------------------------------------
// The nodes' lag samples (GET /api/v1/status/lag: every 15 s, kept a day), fetched from
// the last one on: the chart starts with the last hour, whenever the page was opened.
const lagPoints = [];
async function lagSamples() {
  const last = lagPoints.length ? lagPoints[lagPoints.length - 1].at : null;
  const since = last ? new Date(Date.parse(last) + 1).toISOString() : undefined;
  const out = await api("GET", `/api/v1/status/lag${query({ since })}`).catch(() => ({
    points: [],
  }));
  lagPoints.push(...out.points);
  const hourAgo = Date.now() - 3600e3;
  while (lagPoints.length && Date.parse(lagPoints[0].at) < hourAgo) lagPoints.shift();
  // one bucket per sampling period (15 s; the median gap between a node's samples), each
  // the worst node's
  const lastOf = new Map(),
    gaps = [];
  for (const p of lagPoints) {
    const t = Date.parse(p.at);
    if (lastOf.has(p.node_id)) gaps.push(t - lastOf.get(p.node_id));
    lastOf.set(p.node_id, t);
  }
  gaps.sort((a, b) => a - b);
  const width = Math.max(100, gaps.length ? gaps[Math.floor(gaps.length / 2)] : 15e3);
  const buckets = new Map();
  for (const p of lagPoints) {
    const t = Math.floor(Date.parse(p.at) / width) * width;
    const b = buckets.get(t) || { t, p50: null, p99: null };
    if (p.p50_s !== null) b.p50 = Math.max(b.p50 ?? 0, p.p50_s);
    if (p.p99_s !== null) b.p99 = Math.max(b.p99 ?? 0, p.p99_s);
    buckets.set(t, b);
  }
  return [...buckets.values()];
}
// Shards in one line when one node owns them all and every lease is live; else the
// table, the unowned first. The full table stays one click away.
function shardsView(shards) {
  const owners = new Set(shards.map((x) => x.owner));
  const rows = [...shards]
    .sort((a, b) => (a.owner ? 1 : 0) - (b.owner ? 1 : 0) || a.shard - b.shard)
    .map((x) => [String(x.shard), x.owner || "⚠ none", String(x.epoch), time(x.lease_expires_at)]);
  const full = table(["Shard", "Owner", "Epoch", "Lease until"], rows);
  if (owners.size === 1 && !owners.has(null) && !owners.has(undefined) && !owners.has("")) {
    const [owner] = owners;
    return h(
      "details",
      { id: "shards" },
      h("summary", {}, `All ${shards.length} shards owned by ${owner}`),
      full,
    );
  }
  return h("div", { id: "shards" }, full);
}

// The Overview is a triage page: what needs a person first (alarms that are not zero,
// the latest failures, runs waiting on a key, runs stranded), then the fleet's shape.
function overview() {
  return {
    wants: () => true,
    every: 5000,
    async render() {
      const [st, cl, samples, failed, waiting] = await Promise.all([
        api("GET", "/api/v1/status"),
        api("GET", "/api/v1/cluster"),
        lagSamples(),
        api("GET", "/api/v1/runs?limit=5").catch(() => ({ runs: [] })),
        api("GET", "/api/v1/runs?state=waiting&limit=5").catch(() => ({ runs: [] })),
      ]);
      const card = (n, label, href, alarm) =>
        h(
          "div",
          { class: `card${alarm && Number(n) > 0 ? " alarm" : ""}`, "data-label": label },
          h(
            "a",
            { href },
            h("div", { class: "n" }, alarm && Number(n) > 0 ? `⚠ ${n}` : String(n)),
            h("div", {}, label),
          ),
        );
      const alarms = [
        [st.missed, "missed", "#/jobs?health=late"],
        [st.failed_1h, "failed in 1 h", "#/failures"],
        [st.dead_letter, "dead-lettered", "#/dead-letter"],
        [st.overrunning, "overrunning", "#/runs?state=running"],
        [st.stranded, "stranded (no worker took them)", "#/runs?state=queued"],
        [st.quarantined, "quarantined", "#/jobs?status=paused"],
        [st.unowned.length, "unowned shards", "#/fleet"],
        [(st.queues || []).filter((q) => q.unserved).length, "queues no worker serves", "#/fleet"],
      ];
      const raised = alarms.filter(([n]) => Number(n) > 0);
      return h(
        "section",
        {},
        h("h1", {}, "Overview"),
        h(
          "p",
          { class: raised.length ? "error" : "ok-line", role: "status", id: "triage" },
          raised.length
            ? `Needs attention: ${raised.map(([n, label]) => `${n} ${label}`).join(", ")}`
            : "✓ Nothing needs attention: nothing missed, failed, dead-lettered or stranded.",
        ),
        h(
          "div",
          { class: "cards" },
          alarms.map(([n, label, href]) => card(n, label, href, true)),
        ),
        h(
          "div",
          { class: "cards quiet" },
          card(st.nodes.length, "nodes", "#/fleet"),
          card(st.workers.length, "workers", "#/fleet"),
          card(`${st.slots_free}/${st.slots}`, "free slots", "#/fleet"),
          card(st.ready, "runs ready", "#/runs?state=queued"),
          card(st.pending, "runs running", "#/runs?state=running"),
          card(st.fired_1m, "fired in 1 min", "#/jobs"),
        ),
        h("h2", {}, "Latest failures"),
        table(
          ["Run", "Job", "State", "Reason", "Ended"],
          failed.runs.map((r) => [
            runLink(r.run_id),
            jobLink(r.job_id, r.job_name || r.job_id),
            stateTag(r.state),
            r.reason || (r.exit_code != null ? `exit ${r.exit_code}` : "—"),
            time(r.finished_at),
          ]),
          "No failures.",
        ),
        waiting.runs.length
          ? [
              h("h2", {}, "Waiting on a concurrency key"),
              table(
                ["Run", "Job", "Key", "Since"],
                waiting.runs.map((r) => [
                  runLink(r.run_id),
                  jobLink(r.job_id, r.job_name || r.job_id),
                  r.concurrency_key || "—",
                  time(r.created_at),
                ]),
              ),
            ]
          : null,
        h("h2", {}, "Trigger lag, last hour (worst node; p99 and p50 of each minute, every 15 s)"),
        lagChart(samples),
        h("h2", {}, "Queues"),
        table(
          ["Queue", "Ready", "Running", "Workers", "Free slots"],
          (st.queues || []).map((q) => [
            q.queue + (q.unserved ? " ⚠ UNSERVED" : ""),
            q.ready,
            q.running,
            q.workers,
            q.slots_free,
          ]),
        ),
        h("h2", {}, "Shards"),
        shardsView(cl.shards),
      );
    },
  };
}

// --- jobs ---------------------------------------------------------------------------
function jobs(params) {
  const shown = new Set();
  return {
    wants: (e) => shown.has(e.job_id),
    async render() {
      const q = {
        limit: 50,
        recent: 12,
        name_prefix: params.q,
        status: params.status,
        health: params.health,
        label: apiLabels(params.label),
        queue: params.queue,
        cursor: params.cursor,
      };
      const page = await api("GET", `/api/v1/jobs${query(q)}`);
      shown.clear();
      for (const j of page.jobs) shown.add(j.job_id);
      const form = searchForm(
        "#/jobs",
        field(
          "f-q",
          "Name starts with",
          h("input", { id: "f-q", name: "q", value: params.q || "" }),
        ),
        field(
          "f-status",
          "Status",
          h(
            "select",
            { id: "f-status", name: "status" },
            ["", "active", "paused", "deleted"].map((s) =>
              h("option", { value: s, selected: s === (params.status || "") }, s || "any"),
            ),
          ),
        ),
        field(
          "f-health",
          "Health",
          h(
            "select",
            { id: "f-health", name: "health" },
            ["", "failing", "late"].map((s) =>
              h("option", { value: s, selected: s === (params.health || "") }, s || "any"),
            ),
          ),
        ),
        field(
          "f-label",
          "Label",
          h("input", {
            id: "f-label",
            name: "label",
            placeholder: "team=payments",
            value: params.label || "",
          }),
        ),
        field(
          "f-queue",
          "Queue",
          h("input", { id: "f-queue", name: "queue", value: params.queue || "" }),
        ),
        h("div", {}, h("button", { type: "submit" }, "Filter")),
      );
      const rows = page.jobs.map((j) => {
        const last = (j.recent_runs || [])[0];
        const tz = j.schedule.timezone || "UTC";
        return [
          jobLink(j.job_id, j.name),
          h("code", {}, j.job_id),
          h(
            "span",
            { title: scheduleLine(j.schedule) },
            j.schedule_words || scheduleText(j.schedule),
          ),
          stateTag(j.status),
          h(
            "span",
            {},
            time(j.next_run_at),
            j.next_run_at && tz !== "UTC"
              ? h("div", { class: "muted" }, when(j.next_run_at, tz))
              : null,
          ),
          last ? stateTag(last.state) : h("span", { class: "muted" }, "—"),
          sparkline(j.recent_runs),
        ];
      });
      const more = page.next_cursor
        ? link(`#/jobs${query({ ...params, cursor: page.next_cursor })}`, "Next page →")
        : null;
      return h(
        "section",
        {},
        h("h1", {}, "Jobs"),
        canWrite() ? h("p", {}, link("#/new-job", "+ New job")) : null,
        form,
        h("p", { class: "muted" }, `Times in ${zoneName()}; a job's own zone below it.`),
        table(
          ["Name", "Id", "Schedule", "Status", "Next fire", "Last", "Recent runs"],
          rows,
          "No jobs match.",
        ),
        more,
      );
    },
  };
}

// A label filter as the CLI writes it (team=data, several comma-separated), or as the
// API does (team:data): the API's form either way.
function apiLabels(text) {
  if (!text) return text;
  return text
    .split(",")
    .map((pair) => pair.trim().replace(/^([^=:]+)=/, "$1:"))
    .join(",");
}

function scheduleText(s) {
  if (!s) return "—";
  if (s.type === "cron")
    return h(
      "code",
      {},
      s.expression + (s.timezone && s.timezone !== "UTC" ? ` (${s.timezone})` : ""),
    );
  if (s.type === "interval") return `every ${duration(s.every_s)}`;
  if (s.type === "once") return `once at ${when(s.at)}`;
  if (s.type === "multi")
    return h(
      "span",
      {},
      "any of: ",
      ...s.schedules.map((one, i) => h("span", {}, i ? "; " : "", scheduleText(one))),
    );
  if (s.type === "window")
    return h(
      "code",
      {},
      `${s.cron} + ${duration(s.duration_s)}` +
        (s.timezone && s.timezone !== "UTC" ? ` (${s.timezone})` : ""),
    );
  return JSON.stringify(s);
}

// --- a new job (the create form) -----------------------------------------------------
function newJob() {
  return {
    async render() {
      const form = h(
        "form",
        {
          class: "filters",
          onsubmit: async (e) => {
            e.preventDefault();
            const f = Object.fromEntries(new FormData(e.target).entries());
            const schedule =
              f.kind === "cron"
                ? { type: "cron", expression: f.expr, timezone: f.tz || "UTC" }
                : f.kind === "interval"
                  ? { type: "interval", every_s: Number(f.expr) }
                  : { type: "once", at: f.expr };
            try {
              const made = await api("POST", "/api/v1/jobs", {
                name: f.name,
                command: f.command,
                schedule,
              });
              location.hash = `#/jobs/${enc(made.job_id)}`;
            } catch (err) {
              const out = document.getElementById("create-error");
              out.textContent = err.body?.error
                ? `${err.message} ${JSON.stringify(err.body.error.details || "")}`
                : err.message;
            }
          },
        },
        field("n-name", "Name", h("input", { id: "n-name", name: "name", required: true })),
        field(
          "n-command",
          "Command",
          h("input", { id: "n-command", name: "command", required: true, size: 40 }),
        ),
        field(
          "n-kind",
          "Schedule",
          h(
            "select",
            { id: "n-kind", name: "kind" },
            ["cron", "interval", "once"].map((k) => h("option", { value: k }, k)),
          ),
        ),
        field(
          "n-expr",
          "Cron, seconds or time",
          h("input", { id: "n-expr", name: "expr", required: true, placeholder: "*/5 * * * *" }),
        ),
        field("n-tz", "Zone", h("input", { id: "n-tz", name: "tz", value: "UTC" })),
        h("div", {}, h("button", { type: "submit" }, "Create")),
      );
      return h(
        "section",
        {},
        h("h1", {}, "New job"),
        form,
        h("p", { id: "create-error", class: "error", role: "alert" }),
      );
    },
  };
}

// --- one job ------------------------------------------------------------------------
const STOPS = {
  paused: "Paused: none until it is resumed",
  deleted: "Deleted: it fires no more",
  max_fires: "It has fired all its max_fires",
  window_ended: "Past its ends_at",
  exhausted: "Its schedule fires no more",
  calendar: "No day its calendars allow within reach",
  not_planned: "Not planned yet",
};
function retriesText(p) {
  if (!p || p.max_attempts <= 1) return "none: one attempt";
  const range =
    p.max_s > p.base_s ? `${duration(p.base_s)} to ${duration(p.max_s)}` : duration(p.base_s);
  return `up to ${p.max_attempts} attempts, ${p.backoff} backoff ${range}${p.jitter ? " with jitter" : ""}`;
}
function overlapText(o) {
  if (!o) return "—";
  if (typeof o === "string") return o;
  return Object.entries(o)
    .filter(([, v]) => v !== null && v !== undefined)
    .map(([k, v]) => `${k} ${v}`)
    .join(", ");
}
function lineDiff(a, b) {
  const x = a.split("\n"),
    y = b.split("\n");
  const out = [];
  for (const l of x) if (!y.includes(l)) out.push(h("span", { class: "del" }, `- ${l}`));
  for (const l of y) if (!x.includes(l)) out.push(h("span", { class: "add" }, `+ ${l}`));
  return out.length
    ? h("pre", { class: "diff" }, out)
    : h("p", { class: "muted" }, "(status change only)");
}

const RUN_STATES = [
  "",
  "succeeded",
  "failed",
  "dead_letter",
  "running",
  "scheduled",
  "retrying",
  "waiting",
  "skipped",
  "cancelled",
];

// A job's runs: filtered by state, 25 a page, each page by the API's cursor.
function jobRuns(id, params, runs) {
  const pick = h(
    "select",
    {
      id: "r-state",
      "aria-label": "runs in state",
      onchange: (e) => {
        location.hash = `#/jobs/${enc(id)}${query({ state: e.target.value })}`;
      },
    },
    RUN_STATES.map((st) =>
      h("option", { value: st, selected: st === (params.state || "") }, st || "any state"),
    ),
  );
  return h(
    "div",
    {},
    h("div", { class: "filters" }, field("r-state", "Runs in state", pick)),
    runsTable(runs.runs, false),
    h(
      "p",
      {},
      params.cursor ? link(`#/jobs/${enc(id)}${query({ state: params.state })}`, "← Newest") : null,
      params.cursor && runs.next_cursor ? " · " : null,
      runs.next_cursor
        ? link(
            `#/jobs/${enc(id)}${query({ state: params.state, cursor: runs.next_cursor })}`,
            "Older →",
          )
        : null,
    ),
  );
}

function job(id, params = {}) {
  return {
    wants: (e) => e.job_id === id,
    async render() {
      const j = await api("GET", `/api/v1/jobs/${enc(id)}`);
      const since = new Date(Date.now() - 24 * 3600e3).toISOString();
      const [runs, versions, ticks, preview] = await Promise.all([
        api(
          "GET",
          `/api/v1/jobs/${enc(id)}/runs` +
            query({ limit: 25, state: params.state, cursor: params.cursor }),
        ),
        api("GET", `/api/v1/jobs/${enc(id)}/versions`).catch(() => ({ versions: [] })),
        api(
          "GET",
          `/api/v1/jobs/${enc(id)}/ticks` +
            query({ since, until: new Date().toISOString(), limit: 500 }),
        ).catch(() => ({ ticks: [] })),
        api("GET", `/api/v1/jobs/${enc(id)}/upcoming?count=10`).catch(() => ({
          fire_times: [],
          suppressed: [],
        })),
      ]);
      const reload = () => this.refresh?.();
      const args = h("input", { id: "t-args", placeholder: '{"date": "2026-01-01"}', size: 28 });
      const reason = h("input", { id: "p-reason", placeholder: "why" });
      const until = h("input", { id: "p-until", type: "datetime-local" });
      const bfSince = h("input", { id: "b-since", type: "datetime-local" });
      const bfUntil = h("input", { id: "b-until", type: "datetime-local" });
      const bfOut = h("p", { role: "status", id: "backfill-report" });
      const iso = (v) => (v ? new Date(v).toISOString() : undefined);
      const actions =
        canWrite() && j.status === "deleted"
          ? h(
              "div",
              { class: "actions" },
              action("Restore", () => api("POST", `/api/v1/jobs/${enc(id)}/restore`), {
                confirm: `Bring ${j.name} back as a new incarnation?`,
                done: (o) => `Restored: incarnation ${o.incarnation}`,
                after: reload,
              }),
            )
          : canWrite()
            ? h(
                "div",
                { class: "actions" },
                field("t-args", "Args (JSON)", args),
                action(
                  "Trigger",
                  () =>
                    api(
                      "POST",
                      `/api/v1/jobs/${enc(id)}/trigger`,
                      args.value ? { args: JSON.parse(args.value) } : undefined,
                    ),
                  {
                    done: (o) => `Triggered ${o.run_id}`,
                    after: (o) => {
                      location.hash = `#/runs/${enc(o.run_id)}`;
                    },
                  },
                ),
                field("p-reason", "Pause reason", reason),
                field("p-until", "until", until),
                j.status === "active"
                  ? action(
                      "Pause",
                      () =>
                        api("PATCH", `/api/v1/jobs/${enc(id)}`, {
                          status: "paused",
                          pause_reason: reason.value || undefined,
                          paused_until: iso(until.value),
                        }),
                      { after: reload },
                    )
                  : action(
                      "Resume",
                      () => api("PATCH", `/api/v1/jobs/${enc(id)}`, { status: "active" }),
                      { after: reload },
                    ),
                action("Delete", () => api("DELETE", `/api/v1/jobs/${enc(id)}`), {
                  danger: true,
                  confirm: `Delete ${j.name}? Its history stays.`,
                  after: reload,
                }),
              )
            : null;
      const backfill = canWrite()
        ? h(
            "div",
            { class: "actions" },
            field("b-since", "Backfill since", bfSince),
            field("b-until", "until", bfUntil),
            h(
              "button",
              {
                type: "button",
                onclick: async () => {
                  const t = await api(
                    "GET",
                    `/api/v1/jobs/${enc(id)}/ticks` +
                      query({ since: iso(bfSince.value), until: iso(bfUntil.value), limit: 10000 }),
                  );
                  const missing = t.ticks.filter(
                    (x) => x.outcome === "missing" || x.outcome === "skipped",
                  ).length;
                  live("backfill-report", bfOut).textContent =
                    `Dry run: ${t.ticks.length} ticks in the window, ${missing} without a run would run.`;
                },
              },
              "Dry run",
            ),
            action(
              "Backfill",
              () =>
                api("POST", `/api/v1/jobs/${enc(id)}/backfill`, {
                  since: iso(bfSince.value),
                  until: iso(bfUntil.value),
                }),
              { done: (o) => `${o.ticks} ticks: ${o.queued} queued, ${o.already} had a run` },
            ),
            bfOut,
          )
        : null;
      const vers = versions.versions || [];
      return h(
        "section",
        {},
        h("h1", {}, j.name, " ", stateTag(j.status)),
        j.pause_reason
          ? h(
              "p",
              {},
              `Paused: ${j.pause_reason}`,
              j.paused_until ? ` (until ${when(j.paused_until)})` : "",
            )
          : null,
        actions,
        h("h2", {}, "Definition"),
        h(
          "dl",
          { class: "kv" },
          h("dt", {}, "Id"),
          h("dd", {}, h("code", {}, j.job_id)),
          h("dt", {}, "Schedule"),
          h(
            "dd",
            {},
            preview.schedule_words || scheduleText(j.schedule),
            preview.schedule_words && preview.schedule_words !== scheduleLine(j.schedule)
              ? h("span", { class: "muted" }, " · ", scheduleText(j.schedule))
              : null,
          ),
          h("dt", {}, "Command"),
          h("dd", {}, h("code", {}, j.command)),
          h("dt", {}, "Next fire"),
          h(
            "dd",
            {},
            preview.fire_times.length
              ? time(preview.fire_times[0].planned || preview.fire_times[0].at)
              : STOPS[preview.stops] || time(j.next_run_at),
          ),
          h("dt", {}, "Queue"),
          h("dd", {}, j.queue, j.priority !== "normal" ? ` (priority ${j.priority})` : ""),
          h("dt", {}, "Retries"),
          h("dd", {}, retriesText(j.retry_policy)),
          h("dt", {}, "Timeout"),
          h("dd", {}, duration(j.timeout_s)),
          h("dt", {}, "Overlap"),
          h("dd", {}, overlapText(j.overlap)),
          h("dt", {}, "Concurrency key"),
          h(
            "dd",
            {},
            j.concurrency_key
              ? h(
                  "a",
                  { href: `#/runs?state=waiting` },
                  j.concurrency_key,
                  j.concurrency_limit ? ` (limit ${j.concurrency_limit})` : "",
                )
              : "—",
          ),
          h("dt", {}, "Labels"),
          h(
            "dd",
            {},
            Object.keys(j.labels || {}).length
              ? Object.entries(j.labels).map(([k, v]) =>
                  h("a", { class: "label", href: `#/jobs?label=${enc(`${k}=${v}`)}` }, `${k}=${v}`),
                )
              : "—",
          ),
          h("dt", {}, "Version"),
          h("dd", {}, String(j.version)),
          ...(j.incarnation > 1
            ? [
                h("dt", {}, "Incarnation"),
                h("dd", {}, `${j.incarnation}, since ${when(j.incarnation_started_at)}`),
              ]
            : []),
        ),
        h("h2", {}, "Next fires"),
        preview.resumes_at
          ? h(
              "p",
              { class: "muted" },
              `Paused until ${when(preview.resumes_at)}: fires from then on.`,
            )
          : null,
        table(
          ["UTC", "On the schedule's clock", "DST"],
          preview.fire_times.map((f) => [
            when(f.at, "UTC"),
            f.local.replace("T", " ").replace(/\.\d+/, ""),
            f.dst ? `⚠ ${f.dst}` : "",
          ]),
          STOPS[preview.stops] || "None.",
        ),
        preview.fire_times.length && preview.stops
          ? h("p", { class: "muted" }, `Then no more: ${STOPS[preview.stops] || preview.stops}.`)
          : null,
        preview.suppressed.length
          ? h(
              "p",
              { class: "muted" },
              "Not fired: " +
                preview.suppressed.map((s) => `${s.wall_time} (${s.reason})`).join(", "),
            )
          : null,
        h("h2", {}, "Ticks, last 24 hours"),
        tickStrip(ticks.ticks || []),
        h(
          "p",
          { class: "help" },
          "Each tick by how its run ended: ✓ succeeded · ✗ failed · ☠ dead-lettered · ● running · ○ queued · ↻ retrying · ↷ skipped (reason on hover) · ? missing · … pending; underlined: started over a minute late.",
        ),
        backfill,
        h("h2", {}, "Runs"),
        jobRuns(id, params, runs),
        h("h2", {}, "Versions"),
        vers.length
          ? h(
              "div",
              {},
              [...vers]
                .reverse()
                .map((v, i, all) =>
                  h(
                    "details",
                    {},
                    h(
                      "summary",
                      {},
                      `v${v.version} · ${v.status} · from ${when(v.valid_from)} · by ${v.changed_by || "?"}`,
                    ),
                    i + 1 < all.length
                      ? lineDiff(
                          JSON.stringify(all[i + 1].spec, null, 2),
                          JSON.stringify(v.spec, null, 2),
                        )
                      : h("pre", {}, JSON.stringify(v.spec, null, 2)),
                  ),
                ),
            )
          : h("p", { class: "muted" }, "—"),
      );
    },
  };
}

// --- one run ------------------------------------------------------------------------
function run(id) {
  let stream = null;
  const screen = {
    wants: (e) => e.run_id === id,
    leave: () => {
      if (stream) stream.close();
    },
    async render() {
      const r = await api("GET", `/api/v1/runs/${enc(id)}`);
      const since = new Date(Date.parse(r.created_at) - 1000).toISOString();
      const events = await api(
        "GET",
        `/api/v1/events${query({ run_id: id, since, limit: 100 })}`,
      ).catch(() => ({ events: [] }));
      const out = h("pre", { id: "output", "aria-live": "polite", "aria-label": "output" });
      if (stream) stream.close();
      stream = new EventSource(`/api/v1/runs/${enc(id)}/output/stream`);
      stream.addEventListener("output", (m) => {
        const d = JSON.parse(m.data);
        if (d.text) out.append(document.createTextNode(d.text));
      });
      stream.addEventListener("end", () => {
        stream.close();
      });
      const live = ["scheduled", "claimed", "running", "waiting", "retrying"].includes(r.state);
      return h(
        "section",
        {},
        h("h1", {}, "Run ", h("code", {}, r.run_id)),
        h("p", {}, stateTag(r.state), " of ", jobLink(r.job_id)),
        h(
          "div",
          { class: "actions" },
          live
            ? action(
                "Cancel",
                () => api("POST", `/api/v1/runs/${enc(id)}/cancel`, { reason: "from the console" }),
                { danger: true, confirm: "Cancel this run?", after: () => screen.refresh() },
              )
            : null,
          r.state === "dead_letter"
            ? action("Retry", () => api("POST", `/api/v1/runs/${enc(id)}/retry`), {
                after: (o) => {
                  location.hash = `#/runs/${enc(o.run_id)}`;
                },
              })
            : null,
        ),
        h(
          "dl",
          { class: "kv" },
          ...[
            ["Scheduled for", time(r.scheduled_for)],
            ["Created", time(r.created_at)],
            ["Started", time(r.started_at)],
            ["Finished", time(r.finished_at)],
            ["Attempt", String(r.attempt)],
            ["Worker", r.claimed_by || "—"],
            ["Lease until", time(r.lease_expires_at)],
            ["Exit code", r.exit_code ?? "—"],
            ["Reason", r.reason || "—"],
            ["Cancelled by", r.cancelled_by || "—"],
            ["Queue", r.queue],
            ["DAG run", r.dag_run_id ? link(`#/dag-runs/${enc(r.dag_run_id)}`, r.dag_run_id) : "—"],
            ["Next attempt", r.next_run_id ? runLink(r.next_run_id) : "—"],
            ["Cause", causeLink(r.cause)],
            [
              "Stands for",
              r.stands_for?.length
                ? `${r.stands_for_count || r.stands_for.length} later ticks (coalesced): ${r.stands_for.slice(0, 5).map(time).join(", ")}`
                : "—",
            ],
            [
              "Deadline missed",
              r.deadline_missed ? h("span", { class: "tag failed" }, r.deadline_missed) : "—",
            ],
            [
              "Trace",
              r.trace_url
                ? h("a", { href: r.trace_url, rel: "noopener", target: "_blank" }, r.trace_id)
                : h("code", {}, r.trace_id || "—"),
            ],
          ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
        ),
        h("h2", {}, "History"),
        events.events.length
          ? table(
              ["When", "From", "To", "Worker", "Detail"],
              events.events.map((e) => [
                time(e.at),
                e.old || "—",
                stateTag(e.new),
                e.worker || "—",
                e.detail || "",
              ]),
            )
          : h("p", { class: "muted" }, "No events kept for this run (the event stream is capped)."),
        h("h2", {}, "Output"),
        out,
      );
    },
  };
  return screen;
}

// What made a run or a DAG run, if not its clock or a hand: an event (its page), or an
// upstream's outcome (that run, or DAG run).
function causeLink(cause) {
  if (!cause) return "—";
  const [kind, ...rest] = cause.split(":");
  const what = rest.join(":");
  if (kind === "event") return h("span", {}, "event ", link(`#/events/${enc(what)}`, what));
  if (kind === "after") {
    const target = what.split(":").length === 2 ? `#/dag-runs/${enc(what)}` : `#/runs/${enc(what)}`;
    return h("span", {}, "after ", link(target, what));
  }
  return cause;
}

// --- events received: each with its one outcome -----------------------------------------
const OUTCOMES = ["runs", "held", "deduplicated", "dropped", "refused"];

function eventsList(params) {
  return {
    async render() {
      const q = { limit: 100, name: params.name || undefined, before: params.before || undefined };
      const page = await api("GET", `/api/v1/events/received${query(q)}`);
      const shown = params.outcome
        ? page.events.filter((e) => (e.outcome?.outcome || "pending") === params.outcome)
        : page.events;
      return h(
        "section",
        {},
        h("h1", {}, "Events"),
        h(
          "p",
          { class: "muted" },
          "Events emitted and received by signed hooks, newest first: each ends in one outcome.",
        ),
        searchForm(
          "#/events",
          field(
            "ev-name",
            "Event",
            h("input", { id: "ev-name", name: "name", value: params.name || "" }),
          ),
          field(
            "ev-outcome",
            "Outcome",
            h(
              "select",
              { id: "ev-outcome", name: "outcome" },
              h("option", { value: "" }, "any"),
              [...OUTCOMES, "pending"].map((o) =>
                h("option", { value: o, selected: params.outcome === o ? "" : undefined }, o),
              ),
            ),
          ),
          h("button", { type: "submit" }, "Filter"),
        ),
        table(
          ["Received", "Event", "Name", "Source", "Outcome", "Jobs"],
          shown.map((e) => [
            time(e.received_at),
            link(`#/events/${enc(e.event_id)}`, e.event_id),
            e.name,
            e.source,
            outcomeTag(e.outcome),
            String(e.outcome?.deliveries?.length ?? 0),
          ]),
          "No events received.",
        ),
        page.next_cursor
          ? link(`#/events${query({ ...params, before: page.next_cursor })}`, "Older")
          : null,
      );
    },
  };
}

// An event's outcome as a state is shown: a shape and the word (never only a colour).
const OUTCOME_LOOK = {
  runs: "succeeded",
  held: "scheduled",
  deduplicated: "skipped",
  dropped: "failed",
  refused: "failed",
};

function outcomeTag(o) {
  const word = o?.outcome || "pending";
  const look = OUTCOME_LOOK[word] || "missing";
  return h("span", { class: `state s-${look}`, title: word }, `${shape(look)} ${word}`);
}

function eventView(id) {
  return {
    async render() {
      const e = await api("GET", `/api/v1/events/${enc(id)}`);
      const o = e.outcome;
      const target = (d) =>
        d.job_id.startsWith("dag_") && !d.job_id.includes(".")
          ? link(`#/dags/${enc(d.job_id)}`, d.job_id)
          : jobLink(d.job_id);
      const made = (d) =>
        !d.run_id
          ? "—"
          : d.job_id.startsWith("dag_") && !d.job_id.includes(".")
            ? link(`#/dag-runs/${enc(d.run_id)}`, d.run_id)
            : runLink(d.run_id);
      return h(
        "section",
        {},
        h("h1", {}, "Event ", h("code", {}, e.event_id)),
        h("p", {}, outcomeTag(o), " ", o?.reason ? h("span", { class: "muted" }, o.reason) : null),
        h(
          "dl",
          { class: "kv" },
          ...[
            ["Name", e.name],
            ["Source", e.source],
            ["Received", time(e.received_at)],
            ["Settled", o ? time(o.settled_at) : "not yet"],
            ["Idempotency key", e.idempotency_key || "—"],
          ].flatMap(([k, v]) => [h("dt", {}, k), h("dd", {}, v)]),
        ),
        h("h2", {}, "Deliveries"),
        table(
          ["Job", "Result", "Run", "Reason", "First event", "Later"],
          (o?.deliveries || []).map((d) => [
            target(d),
            d.result,
            made(d),
            d.reason || "",
            d.first_event_id ? link(`#/events/${enc(d.first_event_id)}`, d.first_event_id) : "",
            e.later?.[d.job_id] || "",
          ]),
          o ? "No job listens to it." : "Not delivered yet.",
        ),
        h("h2", {}, "Payload"),
        h("pre", { "aria-label": "payload" }, JSON.stringify(e.payload, null, 2)),
      );
    },
  };
}

// --- runs under way, failures, dead letter ----------------------------------------------
function runsNow(params) {
  const state = params.state || "running";
  return {
    wants: () => true,
    async render() {
      const page = await api(
        "GET",
        "/api/v1/runs" +
          query({ state, limit: 100, job: params.job, queue: params.queue, worker: params.worker }),
      );
      const tabs = h(
        "p",
        {},
        ["running", "queued", "waiting", "retrying"].map((s) => [
          s === state ? h("strong", {}, s) : link(`#/runs?state=${s}`, s),
          " ",
        ]),
      );
      const rows = page.runs.map((r) => [
        runLink(r.run_id),
        jobLink(r.job_id, r.job_name || r.job_id),
        stateTag(r.state),
        time(r.started_at || r.scheduled_for),
        took(r.started_at || r.created_at, null),
        r.claimed_by || "—",
        r.queue,
        action(
          "Cancel",
          () => api("POST", `/api/v1/runs/${enc(r.run_id)}/cancel`, { reason: "from the console" }),
          { danger: true, confirm: `Cancel ${r.run_id}?` },
        ),
      ]);
      return h(
        "section",
        {},
        h("h1", {}, "Runs under way"),
        tabs,
        table(
          ["Run", "Job", "State", "Since", "For", "Worker", "Queue", ""],
          rows,
          `Nothing ${state}.`,
        ),
        page.next_cursor
          ? h("p", { class: "muted" }, "More: use the API's cursor or the CLI.")
          : null,
      );
    },
  };
}

function failures(params) {
  return {
    wants: (e) => e.new === "failed" || e.new === "dead_letter",
    every: 2000,
    async render() {
      const since = { "1h": 3600e3, "24h": 86400e3, "7d": 7 * 86400e3 }[params.within];
      const page = await api(
        "GET",
        "/api/v1/runs" +
          query({
            limit: 50,
            state: params.state,
            name_prefix: params.q,
            since: since ? new Date(Date.now() - since).toISOString() : undefined,
            cursor: params.cursor,
          }),
      );
      const folded = new Map(); // the attempts of one tick: one row, its latest attempt
      for (const r of page.runs) {
        const tick = r.run_id.replace(/:\d+$/, "");
        if (!folded.has(tick)) folded.set(tick, { run: r, attempts: 0 });
        folded.get(tick).attempts += 1;
      }
      const rows = [...folded.values()].map(({ run: r, attempts }) => [
        runLink(r.run_id),
        jobLink(r.job_id, r.job_name || r.job_id),
        stateTag(r.state),
        `${r.attempt}${attempts > 1 ? ` (${attempts} listed)` : ""}`,
        r.reason ||
          (r.exit_code !== null && r.exit_code !== undefined ? `exit ${r.exit_code}` : "—"),
        r.output_tail
          ? h("pre", { class: "tail" }, r.output_tail.trimEnd().split("\n").slice(-3).join("\n"))
          : "",
        time(r.finished_at),
        took(r.started_at, r.finished_at),
        r.state === "dead_letter" && !r.next_run_id
          ? action("Retry", () => api("POST", `/api/v1/runs/${enc(r.run_id)}/retry`), {
              done: (o) => `Retried as ${o.run_id}`,
            })
          : r.next_run_id
            ? h("span", { class: "muted" }, "retried")
            : "",
      ]);
      const filters = searchForm(
        "#/failures",
        field(
          "fl-state",
          "State",
          h(
            "select",
            { id: "fl-state", name: "state" },
            ["", "failed", "dead_letter"].map((v) =>
              h("option", { value: v, selected: v === (params.state || "") }, v || "both"),
            ),
          ),
        ),
        field(
          "fl-q",
          "Job name starts with",
          h("input", { id: "fl-q", name: "q", value: params.q || "" }),
        ),
        field(
          "fl-within",
          "Ended within",
          h(
            "select",
            { id: "fl-within", name: "within" },
            ["", "1h", "24h", "7d"].map((v) =>
              h("option", { value: v, selected: v === (params.within || "") }, v || "any time"),
            ),
          ),
        ),
        h("div", {}, h("button", { type: "submit" }, "Filter")),
      );
      return h(
        "section",
        {},
        h("h1", {}, "Failures"),
        h(
          "p",
          { class: "muted" },
          "Failed and dead-lettered runs of every job, latest first; the attempts of one tick fold into one row.",
        ),
        filters,
        table(
          ["Run", "Job", "State", "Attempt", "Reason", "Output (tail)", "Ended", "Took", ""],
          rows,
          "No failures.",
        ),
        page.next_cursor
          ? link(`#/failures${query({ ...params, cursor: page.next_cursor })}`, "Older →")
          : null,
      );
    },
  };
}

let lastRetryReport = null;
function deadLetter() {
  return {
    wants: (e) => e.new === "dead_letter",
    async render() {
      const page = await api("GET", "/api/v1/dead-letter?limit=100");
      const boxes = [];
      // the last answer outlives a redraw (a retried run failing again redraws the list)
      const report = h(
        "div",
        { role: "status", id: "retry-report" },
        lastRetryReport ? h("pre", {}, lastRetryReport) : null,
      );
      const show = (out) => {
        const lines = [
          ...out.would_retry.map((r) => `would retry ${r}`),
          ...out.retried.map((r) => `retried as ${r.run_id}`),
          ...out.refused.map((x) => `refused ${x.run_id}: ${x.reason}`),
        ];
        lastRetryReport = lines.join("\n") || "nothing selected";
        live("retry-report", report).replaceChildren(h("pre", {}, lastRetryReport));
        return `${out.dry_run ? "would retry" : "retried"} ${out.dry_run ? out.would_retry.length : out.retried.length}, refused ${out.refused.length}`;
      };
      const picked = () => boxes.filter((b) => b.checked).map((b) => b.value);
      const rows = page.runs.map((r) => {
        const box = h("input", {
          type: "checkbox",
          value: r.run_id,
          "aria-label": `select ${r.run_id}`,
        });
        boxes.push(box);
        return [
          box,
          runLink(r.run_id),
          jobLink(r.job_id, r.job_name || r.job_id),
          r.reason || "",
          time(r.finished_at),
          took(r.started_at, r.finished_at),
          action("Retry", () => api("POST", `/api/v1/runs/${enc(r.run_id)}/retry`), {
            done: (o) => `Retried as ${o.run_id}`,
          }),
        ];
      });
      const bulk = canWrite()
        ? h(
            "div",
            { class: "actions" },
            action(
              "Dry run",
              () => api("POST", "/api/v1/dead-letter/retry", { run_ids: picked(), dry_run: true }),
              { done: show },
            ),
            action(
              "Retry selected",
              () => api("POST", "/api/v1/dead-letter/retry", { run_ids: picked() }),
              { done: show },
            ),
          )
        : null;
      return h(
        "section",
        {},
        h("h1", {}, "Dead letter"),
        bulk,
        report,
        table(["", "Run", "Job", "Reason", "When", "Took", ""], rows, "The dead letter is empty."),
      );
    },
  };
}

// --- DAGs -----------------------------------------------------------------------------
function dagList() {
  return {
    async render() {
      const page = await api("GET", "/api/v1/dags?limit=100");
      // each DAG's latest run: its state and when it ended (one read a DAG, no redraws)
      const latest = await Promise.all(
        page.dags.map((d) =>
          api("GET", `/api/v1/dags/${enc(d.dag_id)}/runs?limit=1`)
            .then((o) => o.dag_runs[0] || null)
            .catch(() => null),
        ),
      );
      return h(
        "section",
        {},
        h("h1", {}, "DAGs"),
        table(
          ["Name", "Id", "Status", "Tasks", "Last run", "Took", "Next"],
          page.dags.map((d, i) => [
            link(`#/dags/${enc(d.dag_id)}`, d.name),
            h("code", {}, d.dag_id),
            stateTag(d.status),
            String(d.tasks.length),
            latest[i]
              ? link(`#/dag-runs/${enc(latest[i].dag_run_id)}`, stateTag(latest[i].state))
              : h("span", { class: "muted" }, "never ran"),
            latest[i] ? took(latest[i].started_at, latest[i].finished_at) : "",
            time(d.next_run_at),
          ]),
          "No DAGs.",
        ),
      );
    },
  };
}

// How long a task took in a DAG run: from its latest attempt's start to its end.
function taskTook(t) {
  const last = t?.attempts?.[t.attempts.length - 1];
  return last ? took(last.started_at, last.finished_at) : "";
}

function dagDefinition(d) {
  return table(
    ["Task", "Depends on", "Trigger rule", "Command", "Retries", "Timeout", "Queue"],
    d.tasks.map((t) => [
      t.name,
      (t.depends_on || []).join(", ") || "—",
      t.trigger_rule || "all_success",
      h("code", {}, t.command),
      retriesText(t.retry_policy || { max_attempts: 1 }),
      duration(t.timeout_s ?? 3600),
      t.queue || "default",
    ]),
  );
}

function dag(id) {
  const screen = {
    wants: (e) => e.job_id === id || e.job_id.startsWith(`${id}.`),
    async render() {
      const [d, runs] = await Promise.all([
        api("GET", `/api/v1/dags/${enc(id)}`),
        api("GET", `/api/v1/dags/${enc(id)}/runs?limit=20`),
      ]);
      const names = d.tasks.map((t) => t.name);
      const reload = () => screen.refresh?.();
      const grid = table(
        ["DAG run", "State", "Took", ...names],
        runs.dag_runs.map((r) => {
          const by = Object.fromEntries(r.tasks.map((t) => [t.task, t]));
          return [
            link(`#/dag-runs/${enc(r.dag_run_id)}`, when(r.scheduled_for)),
            stateTag(r.state),
            took(r.started_at, r.finished_at),
            ...names.map((n) =>
              by[n]
                ? h(
                    "span",
                    {},
                    by[n].run_id
                      ? h("a", { href: `#/runs/${enc(by[n].run_id)}` }, stateTag(by[n].state))
                      : stateTag(by[n].state),
                    h("div", { class: "muted" }, taskTook(by[n])),
                  )
                : "—",
            ),
          ];
        }),
        "No DAG runs yet.",
      );
      const actions = h(
        "div",
        { class: "actions" },
        d.status === "deleted"
          ? action("Restore", () => api("POST", `/api/v1/dags/${enc(id)}/restore`), {
              confirm: `Bring ${d.name} back as a new incarnation?`,
              done: (o) => `Restored: incarnation ${o.incarnation}`,
              after: reload,
            })
          : [
              action("Trigger", () => api("POST", `/api/v1/dags/${enc(id)}/trigger`), {
                after: (o) => {
                  location.hash = `#/dag-runs/${enc(o.dag_run_id)}`;
                },
              }),
              d.status === "active"
                ? action(
                    "Pause",
                    () => api("PATCH", `/api/v1/dags/${enc(id)}`, { status: "paused" }),
                    { after: reload },
                  )
                : action(
                    "Resume",
                    () => api("PATCH", `/api/v1/dags/${enc(id)}`, { status: "active" }),
                    { after: reload },
                  ),
            ],
      );
      return h(
        "section",
        {},
        h("h1", {}, d.name, " ", stateTag(d.status)),
        actions,
        h(
          "p",
          { class: "muted" },
          `${d.schedule_words || scheduleLine(d.schedule)} · next ${when(d.next_run_at)} · version ${d.version} · at most ${d.max_active_runs} running`,
        ),
        h("h2", {}, "Graph"),
        h("div", { class: "scroll", id: "dag-definition-graph" }, dagGraph({ tasks: [] }, d.tasks)),
        h("h2", {}, "Recent DAG runs × tasks"),
        grid,
        h("h2", {}, "Definition"),
        dagDefinition(d),
      );
    },
  };
  return screen;
}

function scheduleLine(s) {
  const text = scheduleText(s);
  return typeof text === "string" ? text : text.textContent;
}

// A DAG run's repair: a plan first (what re-runs, its attempt and retries left, the DAG
// version), then applied by its token, or refused if the DAG run moved meanwhile. The
// plan shown is the screen's (`kept`): a live redraw shows it again.
function repairBox(id, r, refresh, kept) {
  const out = h("div", { id: "repair-plan", role: "status" });
  const note = h("input", { id: "repair-note", placeholder: "why (recorded with who)" });
  // into the screen shown (an answer after a redraw), or, while rendering, into `out`
  const show = (box = live("repair-plan", out)) => {
    const plan = kept.plan;
    if (!plan) return box.replaceChildren();
    const rows = plan.tasks.map((t) => [
      t.task,
      t.state,
      t.change,
      t.attempt ?? "",
      t.retries_left ?? "",
    ]);
    box.replaceChildren(
      h(
        "p",
        {},
        `Plan: ${plan.action} in ${plan.dag_run_id} (${plan.dag_run_state}), on topology version ${plan.topology_version}` +
          (plan.ran_on_topology_version
            ? ` (it ran on ${plan.ran_on_topology_version}, no longer kept)`
            : plan.topology_version !== plan.current_topology_version
              ? ` (the DAG is on ${plan.current_topology_version})`
              : ""),
      ),
      table(["Task", "Now", "Change", "Attempt", "Retries left"], rows),
      h(
        "div",
        { class: "actions" },
        action(
          "Apply this plan",
          () => api("POST", kept.path, { ...kept.request, token: plan.token }),
          {
            done: (o) => `Applied: ${o.new_runs.join(", ") || "waiting on upstream"}`,
            after: () => {
              kept.plan = null;
              note.value = "";
              delete note.dataset.touched;
              refresh();
            },
          },
        ),
        action("Discard", async () => {
          kept.plan = null;
          show();
        }),
      ),
    );
  };
  const plan = (task, kind, extra) => async () => {
    kept.path = `/api/v1/dag-runs/${enc(id)}/${kind}`;
    kept.request = { task, note: note.value || "", ...extra };
    kept.plan = await api("POST", kept.path, { ...kept.request, dry_run: true });
    show();
    return kept.plan;
  };
  const ready = { done: () => "Plan ready: check it below" };
  const rows = r.tasks.map((t) => [
    t.task,
    stateTag(t.state),
    t.run_id ? runLink(t.run_id) : "—",
    String(t.attempts?.length || 0),
    taskTook(t),
    time(t.released_at),
    h(
      "span",
      { class: "actions" },
      action("Clear", plan(t.task, "clear", {}), ready),
      action("Clear failed", plan(t.task, "clear", { only_failed: true }), ready),
      action("Mark succeeded", plan(t.task, "mark", { state: "succeeded" }), ready),
      action("Mark failed", plan(t.task, "mark", { state: "failed" }), ready),
    ),
  ]);
  show(out);
  return h(
    "div",
    {},
    canWrite() ? field("repair-note", "Note for a repair", note) : null,
    table(["Task", "State", "Run", "Attempts", "Took", "Released", ""], rows),
    out,
  );
}

// A DAG run's tasks over time: one bar per attempt, from its start to its end (or now).
function gantt(r) {
  const bars = [];
  for (const t of r.tasks)
    for (const a of t.attempts || [])
      if (a.started_at)
        bars.push({
          task: t.task,
          state: a.state,
          run: a.run_id,
          from: Date.parse(a.started_at),
          to: a.finished_at ? Date.parse(a.finished_at) : Date.now(),
        });
  if (!bars.length) return h("p", { class: "muted" }, "No task has started yet.");
  const t0 = Math.min(...bars.map((b) => b.from));
  const t1 = Math.max(...bars.map((b) => b.to), t0 + 1);
  const names = r.tasks.map((t) => t.task);
  const W = 720,
    L = 140,
    RH = 22;
  const x = (t) => L + ((t - t0) / (t1 - t0)) * (W - L - 10);
  const fills = { succeeded: "#1a7f37", failed: "#cf222e", dead_letter: "#cf222e" };
  return svg(
    "svg",
    {
      viewBox: `0 0 ${W} ${names.length * RH + 24}`,
      width: "100%",
      role: "img",
      id: "gantt",
      "aria-label": `DAG run timeline: ${bars.map((b) => `${b.task} ${b.state}`).join(", ")}`,
    },
    names.map((n, i) =>
      svg("text", { x: 4, y: i * RH + 16 }, n.length > 18 ? `${n.slice(0, 17)}…` : n),
    ),
    bars.map((b) =>
      svg(
        "rect",
        {
          x: x(b.from),
          y: names.indexOf(b.task) * RH + 4,
          width: Math.max(2, x(b.to) - x(b.from)),
          height: RH - 8,
          fill: fills[b.state] || "#0550ae",
          class: "bar",
          "data-task": b.task,
        },
        svg(
          "title",
          {},
          `${b.run}: ${b.state}, ${took(new Date(b.from).toISOString(), new Date(b.to).toISOString())}`,
        ),
      ),
    ),
    svg("text", { x: L, y: names.length * RH + 20 }, when(new Date(t0).toISOString())),
    svg(
      "text",
      { x: W - 10, y: names.length * RH + 20, "text-anchor": "end" },
      `+${took(new Date(t0).toISOString(), new Date(t1).toISOString())}`,
    ),
  );
}

function dagRun(id) {
  const dagId = id.split(":")[0];
  const kept = { plan: null, path: null, request: null }; // a repair's plan, until applied
  const screen = {
    wants: (e) => e.job_id === dagId || e.job_id.startsWith(`${dagId}.`),
    async render() {
      const [r, d] = await Promise.all([
        api("GET", `/api/v1/dag-runs/${enc(id)}`),
        api("GET", `/api/v1/dags/${enc(dagId)}`),
      ]);
      const open = r.state === "queued" || r.state === "running";
      const refresh = () => screen.refresh?.();
      return h(
        "section",
        {},
        h("h1", {}, "DAG run ", h("code", {}, r.dag_run_id), " ", stateTag(r.state)),
        h(
          "p",
          {},
          "Of ",
          link(`#/dags/${enc(dagId)}`, d.name),
          ` · scheduled for ${when(r.scheduled_for)}`,
          r.started_at ? ` · took ${took(r.started_at, r.finished_at)}` : "",
          r.reason ? ` · ${r.reason}` : "",
        ),
        h(
          "div",
          { class: "actions" },
          open
            ? action(
                "Cancel DAG run",
                () =>
                  api("POST", `/api/v1/dag-runs/${enc(id)}/cancel`, { reason: "from the console" }),
                {
                  danger: true,
                  confirm: "Cancel this DAG run and its running tasks?",
                  after: refresh,
                },
              )
            : null,
        ),
        h("div", { class: "scroll", id: "dag-graph" }, dagGraph(r, d.tasks)),
        h("h2", {}, "Tasks"),
        repairBox(id, r, refresh, kept),
        h("h2", {}, "Timeline"),
        gantt(r),
      );
    },
  };
  return screen;
}

// --- fleet ----------------------------------------------------------------------------
function fleet() {
  return {
    async render() {
      const [w, c] = await Promise.all([
        api("GET", "/api/v1/workers"),
        api("GET", "/api/v1/cluster"),
      ]);
      return h(
        "section",
        {},
        h("h1", {}, "Fleet"),
        h("h2", {}, "Workers"),
        table(
          ["Worker", "Capacity", "Free", "Running", "Queues", "Heartbeat until", "Draining"],
          w.workers.map((x) => [
            x.worker_id,
            String(x.capacity),
            String(x.capacity_free),
            String(x.running),
            x.queues.join(", "),
            time(x.expires_at),
            x.draining ? "yes" : "no",
          ]),
          "No live workers.",
        ),
        h("h2", {}, "Nodes"),
        table(
          ["Node", "HTTP", "Shards", "Lag p99 (1 min)", "Fired (1 min)", "Since"],
          c.nodes.map((n) => [
            n.node_id,
            n.http || "—",
            n.shards.join(", "),
            n.lag_p99_1m === null ? "—" : `${Math.round(n.lag_p99_1m * 1000)} ms`,
            String(n.fired_1m),
            time(n.started_at),
          ]),
          "No live nodes.",
        ),
        h("h2", {}, "Shards"),
        shardsView(c.shards),
      );
    },
  };
}

export function screens(parts, params) {
  const [a, b] = parts;
  if (!a) return overview();
  if (a === "jobs" && b) return job(b, params);
  if (a === "jobs") return jobs(params);
  if (a === "new-job") return newJob();
  if (a === "runs" && b) return run(b);
  if (a === "runs") return runsNow(params);
  if (a === "failures") return failures(params);
  if (a === "dead-letter") return deadLetter();
  if (a === "dags" && b) return dag(b);
  if (a === "dags") return dagList();
  if (a === "dag-runs" && b) return dagRun(b);
  if (a === "fleet") return fleet();
  if (a === "events" && b) return eventView(b);
  if (a === "events") return eventsList(params);
  return { render: async () => h("p", { class: "error" }, "No such screen.") };
}
export { ApiError, ago };
