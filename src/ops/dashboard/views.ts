/**
 * The dashboard's pages, rendered on the server with the escaping `html` tag.
 * No JavaScript: actions are plain forms that POST with a CSRF token, and
 * pages of jobs that are still moving refresh themselves with a meta tag.
 * Every value shown comes through `html` (escaped) or a redactor first.
 */
import type { DeadGroup, JobRow, ListedJob, QueueOverview, WorkerPresence } from "../adminTypes.js";
import type { HealthWarning } from "../health.js";
import { finiteDate, timestampText } from "../timestamp.js";
import { throughputChart } from "./chart.js";
import { html, raw, type SafeHtml } from "./html.js";

export const CSS = `
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}
header{background:#1f2937;color:#fff;padding:8px 16px;display:flex;gap:16px;align-items:center}
header a{color:#e5e7eb;text-decoration:none}header a:hover{color:#fff}header .brand{font-weight:700;color:#fff}
header form{margin-left:auto}main{padding:16px;max-width:1200px}
table{border-collapse:collapse;width:100%;background:#fff;margin:8px 0 16px}
th,td{border-bottom:1px solid #e5e7eb;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f4f6;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:#fff;border:1px solid #e5e7eb;padding:8px;overflow:auto;max-height:480px;white-space:pre-wrap;word-break:break-word}
.flash{background:#ecfdf5;border:1px solid #10b981;padding:8px;margin-bottom:12px}
.error{background:#fef2f2;border:1px solid #ef4444;padding:8px;margin-bottom:12px}
.warn{background:#fffbeb;border:1px solid #f59e0b;padding:8px;margin:4px 0}
.status{padding:1px 6px;border-radius:8px;background:#e5e7eb}.status-dead{background:#fecaca}.status-completed{background:#bbf7d0}
.status-running{background:#bfdbfe}.status-pending{background:#fef3c7}.status-waiting{background:#ede9fe}.status-cancelled{background:#e5e7eb}
form.inline{display:inline}button{cursor:pointer}.muted{color:#6b7280}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;background:#fff;padding:8px;border:1px solid #e5e7eb}
dt{font-weight:600}dd{margin:0}.filters input,.filters select{margin-right:8px}
.signin{max-width:360px;margin:64px auto;background:#fff;border:1px solid #e5e7eb;padding:24px}
.signin label{display:block;margin:8px 0}.signin input{width:100%;box-sizing:border-box}
`;

export interface PageContext {
  base: string;
  title: string;
  csrf: string | undefined;
  flash: { kind: "flash" | "error"; text: string } | undefined;
  /** Seconds until the page reloads itself, when its content is still moving. */
  refresh?: number;
}

export function layout(ctx: PageContext, heading: string, body: SafeHtml | Array<SafeHtml | string>): SafeHtml {
  const b = ctx.base;
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
${ctx.refresh ? html`<meta http-equiv="refresh" content="${ctx.refresh}">` : ""}
<title>${heading} · ${ctx.title}</title><style>${raw(CSS)}</style></head>
<body><header><a class="brand" href="${b}/">${ctx.title}</a>
<a href="${b}/">Queues</a><a href="${b}/jobs">Jobs</a><a href="${b}/dead">Dead</a><a href="${b}/metrics">Metrics</a>
${ctx.csrf === undefined ? "" : html`<form class="inline" method="post" action="${b}/logout">${csrfField(ctx.csrf)}<button type="submit">Sign out</button></form>`}
</header><main><h1>${heading}</h1>
${ctx.flash ? html`<div class="${ctx.flash.kind}" role="status">${ctx.flash.text}</div>` : ""}
${body}</main></body></html>`;
}

function csrfField(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}

function action(ctx: PageContext, path: string, label: string, fields: Record<string, string> = {}) {
  const hidden = Object.entries(fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  return html`<form class="inline" method="post" action="${ctx.base}${path}">${ctx.csrf === undefined ? "" : csrfField(ctx.csrf)}${hidden}<button type="submit">${label}</button></form>`;
}

export function signInPage(
  ctx: PageContext,
  options: { token: boolean; password: boolean; next: string; message?: string },
): SafeHtml {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · ${ctx.title}</title><style>${raw(CSS)}</style></head>
<body><div class="signin"><h1>${ctx.title}</h1>
${options.message ? html`<div class="error" role="alert">${options.message}</div>` : ""}
<form method="post" action="${ctx.base}/login">
<input type="hidden" name="next" value="${options.next}">
${options.password ? html`<label>User <input name="user" autocomplete="username"></label><label>Password <input name="password" type="password" autocomplete="current-password"></label>` : ""}
${options.token ? html`<label>${options.password ? "Or token" : "Token"} <input name="token" type="password" autocomplete="off"></label>` : ""}
<button type="submit">Sign in</button></form></div></body></html>`;
}

const pad = (n: number) => String(n).padStart(2, "0");

/** A database timestamp; one no Date can hold ('infinity', a year past +275760) is shown as text, never thrown on. */
export function time(value: Date | number | string | null | undefined): SafeHtml {
  if (value === null || value === undefined) return html`<span class="muted">—</span>`;
  const d = finiteDate(value);
  if (d === undefined) return html`<span class="timestamp">${timestampText(value)}</span>`;
  const text = `${d.getUTCFullYear()}-${pad(d.getUTCMonth() + 1)}-${pad(d.getUTCDate())} ${pad(d.getUTCHours())}:${pad(d.getUTCMinutes())}:${pad(d.getUTCSeconds())}Z`;
  return html`<time datetime="${d.toISOString()}" title="${ago(d)}">${text}</time>`;
}

export function duration(seconds: number | null): string {
  if (seconds === null) return "—";
  const s = Math.max(0, Math.round(seconds));
  if (s < 120) return `${s} s`;
  if (s < 7200) return `${Math.round(s / 60)} min`;
  if (s < 172_800) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86_400)} d`;
}

function ago(d: Date): string {
  const s = (Date.now() - d.getTime()) / 1000;
  return s >= 0 ? `${duration(s)} ago` : `in ${duration(-s)}`;
}

function status(s: string): SafeHtml {
  return html`<span class="status status-${s}">${s}</span>`;
}

function firstLine(text: string | null): string {
  if (!text) return "";
  const line = text.split("\n")[0] ?? "";
  return line.length > 160 ? `${line.slice(0, 160)}…` : line;
}

export function overviewPage(
  ctx: PageContext,
  data: {
    queues: QueueOverview[];
    throughput: number[];
    warnings: HealthWarning[];
    healthError: string | undefined;
    workers: WorkerPresence[];
  },
): SafeHtml {
  const here = `${ctx.base}/`;
  const rows = data.queues.map(
    (q) => html`<tr data-queue="${q.queue}">
<td><a href="${ctx.base}/jobs?queue=${encodeURIComponent(q.queue)}">${q.queue}</a></td>
<td class="n">${q.pending}</td><td class="n">${q.scheduled}</td><td class="n">${q.waiting}</td><td class="n">${q.running}</td>
<td class="n">${q.dead > 0 ? html`<a href="${ctx.base}/dead?queue=${encodeURIComponent(q.queue)}">${q.dead}</a>` : "0"}</td>
<td class="n">${q.completedLastHour}</td><td class="n">${duration(q.oldestPendingSeconds)}</td>
<td>${q.paused ? html`<strong>paused</strong>` : "active"}</td>
<td>${q.paused ? action(ctx, `/queues/${encodeURIComponent(q.queue)}/resume`, "Resume", { back: here }) : action(ctx, `/queues/${encodeURIComponent(q.queue)}/pause`, "Pause", { back: here })}
${q.dead > 0 ? action(ctx, `/queues/${encodeURIComponent(q.queue)}/retry-dead`, `Retry ${q.dead} dead`, { back: here }) : ""}</td></tr>`,
  );
  const warnings =
    data.warnings.length === 0 && !data.healthError
      ? html`<p class="muted">No health warnings.</p>`
      : html`${data.healthError ? html`<div class="warn">Health check failed: ${data.healthError}</div>` : ""}${data.warnings.map(
          (w) => html`<div class="warn" data-check="${w.check}"><strong>${w.check}</strong>: ${w.message}</div>`,
        )}`;
  const workers =
    data.workers.length === 0
      ? html`<p class="muted">No live workers have reported in (workers record themselves every 10 s).</p>`
      : html`<table><thead><tr><th>Worker</th><th>Queues</th><th>Kinds</th><th>Last seen</th></tr></thead><tbody>${data.workers.map(
          (w) =>
            html`<tr><td>${w.id}</td><td>${w.queues.join(", ")}</td><td>${w.kinds.join(", ")}</td><td>${time(w.last_seen_at)}</td></tr>`,
        )}</tbody></table>`;
  return layout(ctx, "Queues", [
    data.queues.length === 0
      ? html`<p class="muted">No jobs yet.</p>`
      : html`<table id="queues"><thead><tr><th>Queue</th><th>Pending</th><th>Scheduled</th><th>Waiting</th><th>Running</th><th>Dead</th><th>Completed (1 h)</th><th>Oldest pending</th><th>State</th><th>Actions</th></tr></thead>
<tbody>${rows}</tbody></table>`,
    html`<h2>Health</h2>${warnings}`,
    html`<h2>Throughput</h2>${throughputChart(data.throughput, "Completed per minute")}`,
    html`<h2>Workers</h2>${workers}`,
  ]);
}

export interface JobsFilter {
  queue: string;
  kind: string;
  status: string;
  search: string;
  before: string;
}

export function jobsPage(
  ctx: PageContext,
  filter: JobsFilter,
  jobs: ListedJob[],
  limit: number,
  statuses: readonly string[],
  errorOf: (job: ListedJob) => string | null,
): SafeHtml {
  const query = (before?: string) => {
    const p = new URLSearchParams();
    if (filter.queue) p.set("queue", filter.queue);
    if (filter.kind) p.set("kind", filter.kind);
    if (filter.status) p.set("status", filter.status);
    if (filter.search) p.set("q", filter.search);
    if (before) p.set("before", before);
    const s = p.toString();
    return `${ctx.base}/jobs${s ? `?${s}` : ""}`;
  };
  const last = jobs.at(-1);
  const form = html`<form class="filters" method="get" action="${ctx.base}/jobs">
<input name="queue" placeholder="queue" value="${filter.queue}"><input name="kind" placeholder="kind" value="${filter.kind}">
<select name="status"><option value="">any status</option>${statuses.map((s) => html`<option${filter.status === s ? raw(" selected") : ""}>${s}</option>`)}</select>
<input name="q" placeholder="text in last error" value="${filter.search}"><button type="submit">Filter</button>
<a href="${ctx.base}/jobs">clear</a></form>`;
  const rows = jobs.map(
    (
      j,
    ) => html`<tr><td><a href="${ctx.base}/jobs/${j.id}">${j.id}</a></td><td>${j.queue}</td><td>${j.kind}</td><td>${status(j.status)}</td>
<td class="n">${j.attempts}/${j.max_attempts}</td><td>${time(j.run_at)}</td><td>${time(j.updated_at)}</td><td class="n">${j.payload_bytes} B</td>
<td>${firstLine(errorOf(j))}</td></tr>`,
  );
  const paging = html`<p>${filter.before ? html`<a href="${query()}">« newest</a> ` : ""}${last && jobs.length === limit ? html`<a href="${query(last.id)}" rel="next">older »</a>` : ""}</p>`;
  return layout(ctx, "Jobs", [
    form,
    jobs.length === 0
      ? html`<p class="muted">No jobs match.</p>`
      : html`<table id="jobs"><thead><tr><th>Id</th><th>Queue</th><th>Kind</th><th>Status</th><th>Attempts</th><th>Run at</th><th>Updated</th><th>Payload</th><th>Last error</th></tr></thead><tbody>${rows}</tbody></table>`,
    paging,
  ]);
}

export function jobPage(
  ctx: PageContext,
  job: JobRow,
  shown: {
    payload: string;
    payloadTruncated: number;
    headers: string | null;
    error: string | null;
    /** Workflows: its parents and children, results already redacted and cut to text. */
    flow?: { parents: ShownNode[]; children: ShownNode[] };
  },
): SafeHtml {
  const here = `${ctx.base}/jobs/${job.id}`;
  const actions = [
    job.status === "dead" || job.status === "cancelled"
      ? action(ctx, `/jobs/${job.id}/retry`, "Retry", { back: here })
      : "",
    job.status === "waiting" || job.status === "pending" || job.status === "running"
      ? action(ctx, `/jobs/${job.id}/cancel`, "Cancel", { back: here })
      : "",
  ];
  return layout(ctx, `Job ${job.id}`, [
    html`<p>${actions}</p>`,
    html`<dl id="job">
<dt>Status</dt><dd id="job-status">${status(job.status)}</dd>
<dt>Queue</dt><dd><a href="${ctx.base}/jobs?queue=${encodeURIComponent(job.queue)}">${job.queue}</a></dd>
<dt>Kind</dt><dd>${job.kind}</dd><dt>Priority</dt><dd>${job.priority}</dd>
<dt>Attempts</dt><dd>${job.attempts} of ${job.max_attempts}</dd>
<dt>Run at</dt><dd>${time(job.run_at)}</dd><dt>Created</dt><dd>${time(job.created_at)}</dd>
<dt>Updated</dt><dd>${time(job.updated_at)}</dd><dt>Locked at</dt><dd>${time(job.locked_at)}</dd>
<dt>Locked by</dt><dd>${job.locked_by ?? "—"}</dd><dt>Lease expires</dt><dd>${time(job.lease_expires_at)}</dd>
<dt>Completed</dt><dd>${time(job.completed_at)}</dd>
<dt>Idempotency key</dt><dd>${job.idempotency_key ?? "—"}</dd>
<dt>Error fingerprint</dt><dd>${job.error_fingerprint ? html`<a href="${ctx.base}/dead?queue=${encodeURIComponent(job.queue)}">${job.error_fingerprint}</a>` : "—"}</dd>
</dl>`,
    html`<h2>Payload</h2><pre id="payload">${shown.payload}</pre>${shown.payloadTruncated > 0 ? html`<p class="muted">Truncated: ${shown.payloadTruncated} more characters not shown.</p>` : ""}`,
    shown.headers ? html`<h2>Headers</h2><pre>${shown.headers}</pre>` : "",
    html`<h2>Last error</h2>${shown.error ? html`<pre id="last-error">${shown.error}</pre>` : html`<p class="muted">None.</p>`}`,
    shown.flow && shown.flow.parents.length + shown.flow.children.length > 0 ? flowSection(ctx, shown.flow) : "",
  ]);
}

/** Workflows: a job of the graph around another, as the job page lists it. */
export interface ShownNode {
  id: string;
  kind: string | null;
  status: string | null;
  result: string;
}

/** The workflow graph around a job: the jobs it waits for, then those waiting for it. */
function flowSection(ctx: PageContext, flow: { parents: ShownNode[]; children: ShownNode[] }): SafeHtml {
  const rows = (role: string, nodes: ShownNode[]) =>
    nodes.map(
      (n) =>
        html`<tr data-role="${role}"><td>${role}</td><td><a href="${ctx.base}/jobs/${n.id}">${n.id}</a></td><td>${n.kind ?? "—"}</td><td>${n.status ? status(n.status) : "pruned"}</td><td><code>${n.result}</code></td></tr>`,
    );
  return html`<h2>Workflow</h2><table id="flow"><thead><tr><th></th><th>Id</th><th>Kind</th><th>Status</th><th>Result</th></tr></thead>
<tbody>${rows("parent", flow.parents)}${rows("child", flow.children)}</tbody></table>`;
}

export function deadPage(
  ctx: PageContext,
  queue: string,
  groups: DeadGroup[],
  errorOf: (group: DeadGroup) => string | null,
): SafeHtml {
  const here = `${ctx.base}/dead${queue ? `?queue=${encodeURIComponent(queue)}` : ""}`;
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
      ? html`<p>${action(ctx, `/queues/${encodeURIComponent(queue)}/retry-dead`, `Retry every dead job in ${queue}`, { back: here })}</p>`
      : "",
    groups.length === 0
      ? html`<p class="muted">No dead jobs.</p>`
      : html`<table id="dead"><thead><tr><th>Queue</th><th>Kind</th><th>Fingerprint</th><th>Jobs</th><th>Last seen</th><th>Latest</th><th>Error</th><th></th></tr></thead><tbody>${rows}</tbody></table>`,
  ]);
}

export function messagePage(ctx: PageContext, heading: string, text: string): SafeHtml {
  return layout(ctx, heading, html`<p>${text}</p>`);
}
