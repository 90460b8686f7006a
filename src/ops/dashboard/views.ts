/**
 * The dashboard's pages, rendered on the server with the escaping `html` tag.
 * Every page works without JavaScript: actions are plain forms that POST with
 * a CSRF token, and pages whose content moves refresh themselves through a
 * <noscript> meta tag. With scripts on, one self-hosted script (client/live.js)
 * shows timestamps in the browser's time zone and keeps pages live over
 * server-sent events, reading the data-* marks here.
 * Every value shown comes through `html` (escaped) or a redactor first.
 * The shared layout and stylesheet are layout.ts; the jobs explorer is
 * jobsView.ts and a job's page jobView.ts.
 */
import type { AuditRow, OutboxKeyRow, OutboxSummaryRow } from "../../db/dashboardStore.js";
import type {
  CronScheduleRow,
  DeadGroup,
  QueueOverview,
  QueueSettings,
  StatsPoint,
  StatsRange,
  WorkerPresence,
} from "../adminTypes.js";
import { displayJson } from "../display.js";
import type { HealthWarning } from "../health.js";
import { statsCharts } from "./chart.js";
import { html, raw, type SafeHtml } from "./html.js";
import { action, csrfField, dataTable, duration, firstLine, layout, link, type PageContext, time } from "./layout.js";

export function overviewPage(
  ctx: PageContext,
  data: {
    queues: QueueOverview[];
    stats: StatsPoint[];
    warnings: HealthWarning[];
    healthError: string | undefined;
    workers: WorkerPresence[];
  },
): SafeHtml {
  const here = `${ctx.base}/`;
  const rows = data.queues.map(
    (q) => html`<tr data-queue="${q.queue}" data-dead="${q.dead}" data-paused="${q.paused}">
<td><a href="${link(ctx.base, ["queues", q.queue])}">${q.queue}</a></td>
<td class="n" data-f="pending">${q.pending}</td><td class="n" data-f="scheduled">${q.scheduled}</td><td class="n" data-f="waiting">${q.waiting}</td><td class="n" data-f="running">${q.running}</td>
<td class="n">${q.dead > 0 ? html`<a href="${link(ctx.base, ["dead"], { queue: q.queue })}">${q.dead}</a>` : "0"}</td>
<td class="n" data-f="completed">${q.completedLastHour}</td><td class="n">${duration(q.oldestPendingSeconds)}</td>
<td>${q.paused ? html`<strong>paused</strong>` : "active"}</td>
<td>${q.paused ? action(ctx, link("", ["queues", q.queue, "resume"]), "Resume", { back: here }) : action(ctx, link("", ["queues", q.queue, "pause"]), "Pause", { back: here })}
${q.dead > 0 ? action(ctx, link("", ["queues", q.queue, "retry-dead"]), `Retry ${q.dead} dead`, { back: here }) : ""}</td></tr>`,
  );
  const warnings =
    data.warnings.length === 0 && !data.healthError
      ? html`<p class="muted">No health warnings.</p>`
      : html`${data.healthError ? html`<div class="warn">Health check failed: ${data.healthError}</div>` : ""}${data.warnings.map(
          (w) => html`<div class="warn" data-check="${w.check}"><strong>${w.check}</strong>: ${w.message}</div>`,
        )}`;
  const workers = workersTable(ctx, data.workers);
  return layout(ctx, "Queues", [
    data.queues.length === 0
      ? html`<p class="muted">No jobs yet.</p>`
      : dataTable(
          "Queues",
          "queues",
          html`<th>Queue</th><th>Pending</th><th>Scheduled</th><th>Waiting</th><th>Running</th><th>Dead</th><th>Completed (1 h)</th><th>Oldest pending</th><th>State</th><th>Actions</th>`,
          rows,
          { all: true },
        ),
    html`<h2>Health</h2>${warnings}`,
    html`<h2>Last hour, all queues</h2>${chartsBlock("1h", "", data.stats)}`,
    html`<h2>Workers</h2>${workers}`,
  ]);
}

const RANGE_FROM: Record<StatsRange, string> = { "1h": "1 h ago", "24h": "24 h ago", "7d": "7 d ago" };

/** A queue's charts (or all queues'), which the live script reloads from `<base>/charts` every 30 s. */
export function chartsBlock(range: StatsRange, queue: string, points: StatsPoint[]): SafeHtml {
  const query = new URLSearchParams({ range, ...(queue ? { queue } : {}) }).toString();
  return html`<div data-charts="${query}">${statsCharts(points, RANGE_FROM[range])}</div>`;
}

export function queuePage(
  ctx: PageContext,
  data: {
    queue: string;
    overview: QueueOverview | undefined;
    range: StatsRange;
    stats: StatsPoint[];
    limits: QueueSettings | undefined;
    pausedKeys: Array<{ key: string | null; pausedUntil: Date }>;
    canAct: boolean;
  },
): SafeHtml {
  const q = data.overview;
  const here = link(ctx.base, ["queues", data.queue]);
  const tabs = (["1h", "24h", "7d"] as StatsRange[]).map(
    (r) => html`<a href="${here}?range=${r}"${r === data.range ? raw(' aria-current="page"') : ""}>${r}</a>`,
  );
  return layout(ctx, `Queue ${data.queue}`, [
    q
      ? dataTable(
          "Queues",
          "queues",
          html`<th>Pending</th><th>Scheduled</th><th>Waiting</th><th>Running</th><th>Dead</th><th>Completed (1 h)</th><th>Oldest pending</th><th>State</th><th>Actions</th>`,
          html`<tr data-queue="${q.queue}" data-dead="${q.dead}" data-paused="${q.paused}"><td class="n" data-f="pending">${q.pending}</td><td class="n" data-f="scheduled">${q.scheduled}</td>
<td class="n" data-f="waiting">${q.waiting}</td><td class="n" data-f="running">${q.running}</td><td class="n">${q.dead}</td><td class="n" data-f="completed">${q.completedLastHour}</td><td class="n">${duration(q.oldestPendingSeconds)}</td>
<td>${q.paused ? html`<strong>paused</strong>` : "active"}</td>
<td>${q.paused ? action(ctx, link("", ["queues", data.queue, "resume"]), "Resume", { back: here }) : action(ctx, link("", ["queues", data.queue, "pause"]), "Pause", { back: here })}
<a href="${link(ctx.base, ["jobs"], { queue: data.queue })}">Jobs</a></td></tr>`,
        )
      : html`<p class="muted">No jobs in this queue now.</p>`,
    html`<h2>Statistics</h2><p class="tabs">Range: ${tabs}</p>${chartsBlock(data.range, data.queue, data.stats)}
<p class="muted">From the maintainer's per-minute rollup (written by the leader every 20 s, kept 7 days).</p>`,
    limitsSection(ctx, data.queue, data.limits, data.pausedKeys, data.canAct),
  ]);
}

/** A queue's fairness weights as the limits form shows them: "acme=2, globex=0.5". */
function weightsText(limits: QueueSettings | undefined): string {
  return Object.entries(limits?.fairness?.weights ?? {})
    .map(([key, weight]) => `${key}=${weight}`)
    .join(", ");
}

function limitsSection(
  ctx: PageContext,
  queue: string,
  limits: QueueSettings | undefined,
  keys: Array<{ key: string | null; pausedUntil: Date }>,
  canAct: boolean,
): SafeHtml {
  const here = link(ctx.base, ["queues", queue]);
  const num = (name: string, label: string, value: number | null | undefined, min: number, hint: string) =>
    html`<label>${label}<input name="${name}" type="number" min="${min}" max="1000000" value="${value ?? ""}" placeholder="${hint}"${canAct ? "" : raw(" disabled")}></label>`;
  const rate = limits?.rate;
  const form = html`<form id="limits" class="filters" method="post" action="${here}/limits" aria-label="Limits of ${queue}">
${csrfField(ctx)}<input type="hidden" name="back" value="${here}">
${num("concurrency", "Concurrency", limits?.concurrency, 1, "no limit")}${num("keyConcurrency", "Per-key concurrency", limits?.keyConcurrency, 1, "no limit")}
${num("rateLimit", "Rate: starts", rate?.limit, 1, "no limit")}
<label>Rate: per window<input name="rateWindow" value="${rate ? `${rate.window}ms` : ""}" placeholder="1m"${canAct ? "" : raw(" disabled")}></label>
<label>Rate per key<select name="ratePerKey"${canAct ? "" : raw(" disabled")}><option value="false">no</option><option value="true"${rate?.perKey ? raw(" selected") : ""}>yes</option></select></label>
<label>Fair (round robin across keys)<select name="fair"${canAct ? "" : raw(" disabled")}><option value="false">no</option><option value="true"${limits?.fairness ? raw(" selected") : ""}>yes</option></select></label>
<label>Weights<input name="weights" value="${weightsText(limits)}" placeholder="acme=2, globex=0.5"${canAct ? "" : raw(" disabled")}></label>
${canAct ? html`<button type="submit">Save limits</button>` : ""}</form>
<p class="muted">An empty field removes that limit. Workers apply a change within a moment (a notification, else their 5 s refresh).</p>`;
  const rows = keys.map(
    (k) => html`<tr><td>${k.key ?? html`<em>whole queue</em>`}</td><td>${time(k.pausedUntil)}</td>
<td>${canAct ? action(ctx, link("", ["queues", queue, "keys", "resume"]), "Resume", { key: k.key ?? "", back: here }) : ""}</td></tr>`,
  );
  const summary = html`<dl id="limits"><dt>Concurrency</dt><dd>${limits?.concurrency ?? "no limit"}</dd><dt>Per-key concurrency</dt><dd>${limits?.keyConcurrency ?? "no limit"}</dd>
<dt>Rate</dt><dd>${rate ? `${rate.limit} starts per ${rate.window} ms${rate.perKey ? ", per key" : ""}` : "no limit"}</dd>
<dt>Fair</dt><dd>${limits?.fairness ? `yes${weightsText(limits) ? ` (weights ${weightsText(limits)})` : ""}` : "no"}</dd></dl>`;
  return html`<h2>Limits</h2>${canAct ? form : summary}<h2>Paused keys</h2>${
    keys.length === 0
      ? html`<p class="muted">No key is paused.</p>`
      : dataTable(
          "Paused keys",
          "paused-keys",
          html`<th>Key</th><th>Paused until</th><th><span class="skip-label">Actions</span></th>`,
          rows,
        )
  }${
    canAct
      ? html`<form class="filters" method="post" action="${here}/keys/pause" aria-label="Pause a key">${csrfField(ctx)}
<input type="hidden" name="back" value="${here}"><label>Key (empty: whole queue)<input name="key"></label><label>For<input name="for" value="10m" placeholder="10m"></label>
<button type="submit">Pause key</button></form>`
      : ""
  }`;
}

export function cronPage(ctx: PageContext, schedules: CronScheduleRow[], canAct: boolean): SafeHtml {
  const here = `${ctx.base}/cron`;
  const rows = schedules.map((c) => {
    return html`<tr data-cron="${c.name}"><td>${c.name}</td><td><code>${c.expression}</code>${c.timezone ? ` (${c.timezone})` : ""}</td>
<td><a href="${link(ctx.base, ["queues", c.queue])}">${c.queue}</a></td><td>${c.kind}</td>
<td>${time(c.lastTick)}${c.lastJobId ? html` · <a href="${ctx.base}/jobs/${c.lastJobId}">#${c.lastJobId}</a>` : ""}</td>
<td>${c.pausedAt ? html`<span class="muted">paused</span>` : time(c.nextTick)}</td>
<td>${c.pausedAt ? html`<strong>paused</strong> since ${time(c.pausedAt)}` : "active"}${c.runRequestedAt ? html`<br><span class="muted">run requested ${time(c.runRequestedAt)}</span>` : ""}</td>
<td>${
      canAct
        ? html`${action(ctx, link("", ["cron", c.name, "run"]), "Run now", { back: here })} ${
            c.pausedAt
              ? action(ctx, link("", ["cron", c.name, "resume"]), "Resume", { back: here })
              : action(ctx, link("", ["cron", c.name, "pause"]), "Pause", { back: here })
          }`
        : ""
    }</td></tr>`;
  });
  return layout(ctx, "Cron schedules", [
    schedules.length === 0
      ? html`<p class="muted">No schedules: they appear once a worker with a Scheduler declares them.</p>`
      : dataTable(
          "Cron schedules",
          "cron",
          html`<th>Name</th><th>Expression</th><th>Queue</th><th>Kind</th><th>Last tick</th><th>Next tick</th><th>State</th><th>Actions</th>`,
          rows,
        ),
    html`<p class="muted">"Run now" is enqueued by the next pass of a scheduler that declares the schedule (its payload lives in code). A paused schedule skips its ticks until resumed.</p>`,
  ]);
}

/** The live workers, with their in-flight jobs when known; the live script redraws its body from events. */
export function workersTable(ctx: PageContext, workers: Array<WorkerPresence & { inFlight?: InFlight[] }>): SafeHtml {
  if (workers.length === 0)
    return html`<p class="muted" id="no-workers">No live workers have reported in (workers record themselves every 10 s).</p>`;
  return dataTable(
    "Workers",
    "workers",
    html`<th>Worker</th><th>Host</th><th>Queues</th><th>Kinds</th><th>In flight</th><th>Last seen</th>`,
    html`${workers.map(
      (w) =>
        html`<tr data-worker="${w.id}"><td>${w.id}</td><td>${w.hostname ?? "—"}${w.pid ? ` · ${w.pid}` : ""}</td><td>${w.queues.join(", ")}</td><td>${w.kinds.join(", ")}</td>
<td data-f="inflight">${
          w.inFlight === undefined
            ? html`<span class="muted">—</span>`
            : w.inFlight.length === 0
              ? "idle"
              : w.inFlight.map(
                  (j, i) => html`${i > 0 ? ", " : ""}<a href="${ctx.base}/jobs/${j.id}">${j.kind} #${j.id}</a>`,
                )
        }</td><td>${time(w.last_seen_at)}</td></tr>`,
    )}`,
  );
}

export interface InFlight {
  id: string;
  queue: string;
  kind: string;
  locked_at: Date | null;
  attempts: number;
}

export function workersPage(ctx: PageContext, workers: Array<WorkerPresence & { inFlight: InFlight[] }>): SafeHtml {
  return layout(ctx, "Workers", [
    html`<p class="muted">Workers record themselves every 10 s; a worker that stops recording is gone after its presence expires.</p>`,
    workersTable(ctx, workers),
  ]);
}

export function deadPage(
  ctx: PageContext,
  queue: string,
  groups: DeadGroup[],
  errorOf: (group: DeadGroup) => string | null,
): SafeHtml {
  const here = link(ctx.base, ["dead"], { queue });
  const rows = groups.map(
    (
      g,
    ) => html`<tr><td>${g.queue}</td><td>${g.kind}</td><td><code>${g.fingerprint ?? "—"}</code></td><td class="n">${g.count}</td>
<td>${time(g.last_seen)}</td><td><a href="${ctx.base}/jobs/${g.example_id}">${g.example_id}</a></td><td>${firstLine(errorOf(g))}</td>
<td>${g.fingerprint ? action(ctx, "/dead/retry", `Retry ${g.count}`, { fingerprint: g.fingerprint, queue: g.queue, back: here }) : ""}</td></tr>`,
  );
  return layout(ctx, queue ? `Dead jobs in ${queue}` : "Dead jobs", [
    html`<form class="filters" method="get" action="${ctx.base}/dead"><input name="queue" placeholder="queue" value="${queue}"><button type="submit">Filter</button></form>`,
    queue
      ? html`<p>${action(ctx, link("", ["queues", queue, "retry-dead"]), `Retry every dead job in ${queue}`, { back: here })}</p>`
      : "",
    groups.length === 0
      ? html`<p class="muted">No dead jobs.</p>`
      : dataTable(
          "Dead jobs",
          "dead",
          html`<th>Queue</th><th>Kind</th><th>Fingerprint</th><th>Jobs</th><th>Last seen</th><th>Latest</th><th>Error</th><th><span class="skip-label">Actions</span></th>`,
          rows,
        ),
  ]);
}

export function outboxPage(ctx: PageContext, summary: OutboxSummaryRow, keys: OutboxKeyRow[]): SafeHtml {
  const here = `${ctx.base}/outbox`;
  return layout(ctx, "Outbox", [
    html`<p id="outbox-summary">${summary.undelivered} undelivered event(s) over ${summary.keys} key(s); ${summary.failing} failed at least once${
      summary.oldest ? html`; the oldest was written ${time(summary.oldest)}` : ""
    }.</p>`,
    keys.length === 0
      ? html`<p class="muted">Nothing waits: every event was delivered.</p>`
      : dataTable(
          "Outbox keys",
          "outbox",
          html`<th>Topic</th><th>Key</th><th>Backlog</th><th>Oldest</th><th>Attempts</th><th>Next try</th><th>Error</th><th><span class="skip-label">Actions</span></th>`,
          html`${keys.map(
            (
              k,
            ) => html`<tr data-key="${k.key}"><td>${k.topic}</td><td><code>${k.key}</code></td><td class="n">${k.backlog}</td><td>${time(k.oldest)}</td>
<td class="n">${k.attempts}</td><td>${time(k.next_try)}</td><td>${firstLine(k.error)}</td>
<td>${k.attempts > 0 ? action(ctx, "/outbox/retry", "Retry now", { topic: k.topic, key: k.key, back: here }) : ""}</td></tr>`,
          )}`,
        ),
    html`<p class="muted">Failing keys first. A key's events go out in order, so one failing event holds its key back; "Retry now" makes its events due at once.</p>`,
  ]);
}

export function auditPage(ctx: PageContext, rows: AuditRow[], before: string, limit: number): SafeHtml {
  const last = rows.at(-1);
  return layout(ctx, "Audit", [
    html`<p class="muted">Every dashboard action, sign-in and sign-out: who, what, when and from where. Failed sign-ins go to the server log only.</p>`,
    rows.length === 0
      ? html`<p class="muted">Nothing recorded yet.</p>`
      : dataTable(
          "Audit",
          "audit",
          html`<th>When</th><th>Who</th><th>Role</th><th>What</th><th>Target</th><th>Details</th><th>From</th>`,
          html`${rows.map(
            (r) =>
              html`<tr><td>${time(r.at)}</td><td>${r.principal}</td><td>${r.role}</td><td>${r.action}</td><td>${r.target ?? "—"}</td>
<td>${r.detail === null ? "—" : html`<code>${displayJson(r.detail)}</code>`}</td><td>${r.client ?? "—"}<br><span class="muted">${r.user_agent ?? ""}</span></td></tr>`,
          )}`,
        ),
    html`<p>${before ? html`<a href="${ctx.base}/audit">« newest</a> ` : ""}${last && rows.length === limit ? html`<a href="${ctx.base}/audit?before=${last.id}" rel="next">older »</a>` : ""}</p>`,
  ]);
}

export function messagePage(ctx: PageContext, heading: string, text: string): SafeHtml {
  return layout(ctx, heading, html`<p>${text}</p>`);
}
