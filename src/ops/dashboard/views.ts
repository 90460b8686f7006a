/**
 * The dashboard's pages, rendered on the server with the escaping `html` tag.
 * Every page works without JavaScript: actions are plain forms that POST with
 * a CSRF token, and pages whose content moves refresh themselves through a
 * <noscript> meta tag. With scripts on, one self-hosted script (assets.ts)
 * keeps them live over server-sent events, reading the data-* marks here.
 * Every value shown comes through `html` (escaped) or a redactor first.
 */
import {
  BULK_ACTIONS,
  type BulkAction,
  type BulkCounts,
  type CronScheduleRow,
  type DeadGroup,
  type JobRow,
  type ListedJob,
  type QueueOverview,
  type QueueSettings,
  type ReplicaStatus,
  type StatsPoint,
  type StatsRange,
  type WorkerPresence,
} from "../adminTypes.js";
import { type AttemptRow, displayJson, MAX_ATTEMPTS_KEPT } from "../display.js";
import type { HealthWarning } from "../health.js";
import { finiteDate, timestampText } from "../timestamp.js";
import { statsCharts } from "./chart.js";
import { html, raw, type SafeHtml } from "./html.js";

export const CSS = `
:root{color-scheme:light dark;--fg:#1f2937;--muted:#4b5563;--bg:#f9fafb;--card:#fff;--line:#e5e7eb;--head:#f3f4f6;
--bar:#111827;--barfg:#e5e7eb;--link:#1d4ed8;--focus:#f59e0b;--ok:#ecfdf5;--okline:#047857;--bad:#fef2f2;--badline:#b91c1c;
--warnbg:#fffbeb;--warnline:#b45309;--chart1:#2563eb;--chart2:#dc2626;--chart3:#059669;--grid:#d1d5db}
@media (prefers-color-scheme:dark){:root{--fg:#e5e7eb;--muted:#9ca3af;--bg:#0b1120;--card:#111827;--line:#1f2937;--head:#1f2937;
--bar:#030712;--barfg:#d1d5db;--link:#93c5fd;--ok:#052e16;--okline:#34d399;--bad:#450a0a;--badline:#f87171;--warnbg:#422006;
--warnline:#fbbf24;--chart1:#60a5fa;--chart2:#f87171;--chart3:#34d399;--grid:#374151}}
body{font:14px/1.45 system-ui,sans-serif;margin:0;color:var(--fg);background:var(--bg)}
a{color:var(--link)}a:focus-visible,button:focus-visible,input:focus-visible,select:focus-visible,summary:focus-visible{outline:3px solid var(--focus);outline-offset:2px}
.skip,.skip-label{position:absolute;left:-9999px}.skip:focus{left:8px;top:8px;background:var(--card);padding:8px;z-index:9}
header{background:var(--bar);color:#fff;padding:8px 16px;display:flex;flex-wrap:wrap;gap:8px 16px;align-items:center}
header nav{display:flex;flex-wrap:wrap;gap:4px 16px;align-items:center}
header a{color:var(--barfg);text-decoration:none}header a:hover{color:#fff;text-decoration:underline}header .brand{font-weight:700;color:#fff}
header .signout{margin-left:auto}.live{font-size:12px;padding:1px 8px;border-radius:8px;border:1px solid #6b7280;color:#d1d5db}
.live.on{border-color:#34d399;color:#6ee7b7}.live.lag{border-color:#f59e0b;color:#fcd34d}main{padding:16px;max-width:1280px}
table{border-collapse:collapse;width:100%;background:var(--card);margin:8px 0 16px}.scroll{overflow-x:auto}
th,td{border-bottom:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
th{background:var(--head);font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
pre{background:var(--card);border:1px solid var(--line);padding:8px;overflow:auto;max-height:480px;white-space:pre-wrap;word-break:break-word}
.flash{background:var(--ok);border:1px solid var(--okline);padding:8px;margin-bottom:12px}
.error{background:var(--bad);border:1px solid var(--badline);padding:8px;margin-bottom:12px}
.warn{background:var(--warnbg);border:1px solid var(--warnline);padding:8px;margin:4px 0}
.status{padding:1px 6px;border-radius:8px;background:#e5e7eb;color:#111827}.status-dead{background:#fecaca}.status-completed{background:#bbf7d0}
.status-running{background:#bfdbfe}.status-pending{background:#fef3c7}.status-waiting{background:#ede9fe}.status-cancelled{background:#e5e7eb}
form.inline{display:inline}button{cursor:pointer;font:inherit;padding:2px 10px}.muted{color:var(--muted)}
input,select{font:inherit;padding:2px 4px;background:var(--card);color:var(--fg);border:1px solid #6b7280}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 16px;background:var(--card);padding:8px;border:1px solid var(--line)}
dt{font-weight:600}dd{margin:0;overflow-wrap:anywhere}.filters{display:flex;flex-wrap:wrap;gap:6px 10px;align-items:end;margin:8px 0}
.filters label{display:flex;flex-direction:column;font-size:12px;color:var(--muted)}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(320px,1fr));gap:12px}
.chart{width:100%;height:auto;background:var(--card);border:1px solid var(--line)}
.chart .axis{stroke:var(--grid)}.chart text{fill:var(--muted)}.chart .s1{stroke:var(--chart1);fill:none}.chart .s2{stroke:var(--chart2);fill:none}
.chart .b1,.chart text.t1{fill:var(--chart1)}.chart .b2,.chart text.t2,.chart text.b2{fill:var(--chart2)}.chart .b3,.chart text.b3{fill:var(--chart3)}
.tabs a{margin-right:8px}.tabs a[aria-current]{font-weight:700;text-decoration:none}
.signin{display:block;max-width:360px;margin:64px auto;background:var(--card);border:1px solid var(--line);padding:24px}
.signin label{display:block;margin:8px 0}.signin input{width:100%;box-sizing:border-box}
@media (max-width:640px){main{padding:8px}th,td{padding:3px 4px}dl{grid-template-columns:1fr}dt{margin-top:6px}}
`;

export interface PageContext {
  base: string;
  title: string;
  csrf: string | undefined;
  flash: { kind: "flash" | "error"; text: string } | undefined;
  /** Seconds until the page reloads itself when scripts are off, for pages whose content moves. */
  refresh?: number;
  /** Whether the viewer may act (admin); read-only viewers get no action forms. Default true. */
  canAct?: boolean;
  /** Shown in the header beside sign-out. */
  role?: "admin" | "viewer";
  /** What the live script subscribes to on this page ("queues", "workers"; watched jobs are marked in the markup). */
  live?: string[];
  /** Where the page's reads came from, when a read replica is configured ("failed": its status could not be read). */
  replica?: ReplicaStatus | "failed";
}

/** The header's note on a read replica: which server the page read, and how far behind the primary it is. */
function replicaNote(replica: ReplicaStatus | "failed" | undefined): SafeHtml | string {
  if (replica === undefined) return "";
  if (replica === "failed")
    return html`<span class="live lag" id="replica" title="Pages read from a replica">replica lag unknown</span>`;
  if (!replica.standby) {
    return html`<span class="live" id="replica" title="No standby answered: pages read from a primary">reads: ${replica.server} (primary)</span>`;
  }
  const behind =
    replica.lagBytes === 0
      ? "caught up"
      : `${replica.lagMs === null ? "?" : (replica.lagMs / 1000).toFixed(1)} s / ${replica.lagBytes === null ? "?" : bytes(replica.lagBytes)} behind`;
  return html`<span class="live${replica.lagMs !== null && replica.lagMs > 10_000 ? " lag" : ""}" id="replica" data-lag-ms="${replica.lagMs ?? ""}" data-lag-bytes="${replica.lagBytes ?? ""}" title="Pages read from a standby; what they show lags the primary by this much">reads: standby ${replica.server}, ${behind}</span>`;
}

function bytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  return `${(n / 1024 / 1024).toFixed(1)} MB`;
}

export function layout(ctx: PageContext, heading: string, body: SafeHtml | Array<SafeHtml | string>): SafeHtml {
  const b = ctx.base;
  const live = ctx.live ?? [];
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1">
${ctx.refresh ? html`<noscript><meta http-equiv="refresh" content="${ctx.refresh}"></noscript>` : ""}
<title>${heading} · ${ctx.title}</title><style>${raw(CSS)}</style>
${live.length > 0 ? html`<script src="${b}/assets/live.js" defer></script>` : ""}</head>
<body data-base="${b}" data-live="${live.join(",")}"><a class="skip" href="#main">Skip to content</a>
<header><nav aria-label="Main"><a class="brand" href="${b}/">${ctx.title}</a>
<a href="${b}/">Queues</a><a href="${b}/jobs">Jobs</a><a href="${b}/workers">Workers</a><a href="${b}/cron">Cron</a><a href="${b}/dead">Dead</a><a href="${b}/outbox">Outbox</a><a href="${b}/audit">Audit</a><a href="${b}/metrics">Metrics</a></nav>
${ctx.role === "viewer" ? html`<span class="live" title="This credential only reads">read-only</span>` : ""}
${replicaNote(ctx.replica)}
${live.length > 0 ? html`<span id="live" class="live off" title="Live updates">static</span>` : ""}
${ctx.csrf === undefined ? "" : html`<form class="inline signout" method="post" action="${b}/logout">${csrfField(ctx.csrf)}<button type="submit">Sign out</button></form>`}
</header><main id="main"><h1>${heading}</h1>
${ctx.flash ? html`<div class="${ctx.flash.kind}" role="status">${ctx.flash.text}</div>` : ""}
<p id="live-notice" class="warn" hidden>Things changed while you were selecting; <a href="">reload</a> to see them.</p>
${body}</main></body></html>`;
}

function csrfField(token: string): SafeHtml {
  return html`<input type="hidden" name="_csrf" value="${token}">`;
}

function action(ctx: PageContext, path: string, label: string, fields: Record<string, string> = {}) {
  if (ctx.canAct === false) return "";
  const hidden = Object.entries(fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  return html`<form class="inline" method="post" action="${ctx.base}${path}">${ctx.csrf === undefined ? "" : csrfField(ctx.csrf)}${hidden}<button type="submit">${label}</button></form>`;
}

export function signInPage(
  ctx: PageContext,
  options: { token: boolean; password: boolean; next: string; message?: string },
): SafeHtml {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Sign in · ${ctx.title}</title><style>${raw(CSS)}</style></head>
<body><main class="signin" id="main"><h1>${ctx.title}</h1>
${options.message ? html`<div class="error" role="alert">${options.message}</div>` : ""}
<form method="post" action="${ctx.base}/login">
<input type="hidden" name="next" value="${options.next}">
${options.password ? html`<label>User <input name="user" autocomplete="username"></label><label>Password <input name="password" type="password" autocomplete="current-password"></label>` : ""}
${options.token ? html`<label>${options.password ? "Or token" : "Token"} <input name="token" type="password" autocomplete="off"></label>` : ""}
<button type="submit">Sign in</button></form></main></body></html>`;
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
    stats: StatsPoint[];
    warnings: HealthWarning[];
    healthError: string | undefined;
    workers: WorkerPresence[];
  },
): SafeHtml {
  const here = `${ctx.base}/`;
  const rows = data.queues.map(
    (q) => html`<tr data-queue="${q.queue}" data-dead="${q.dead}" data-paused="${q.paused}">
<td><a href="${ctx.base}/queues/${encodeURIComponent(q.queue)}">${q.queue}</a></td>
<td class="n" data-f="pending">${q.pending}</td><td class="n" data-f="scheduled">${q.scheduled}</td><td class="n" data-f="waiting">${q.waiting}</td><td class="n" data-f="running">${q.running}</td>
<td class="n">${q.dead > 0 ? html`<a href="${ctx.base}/dead?queue=${encodeURIComponent(q.queue)}">${q.dead}</a>` : "0"}</td>
<td class="n" data-f="completed">${q.completedLastHour}</td><td class="n">${duration(q.oldestPendingSeconds)}</td>
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
  const workers = workersTable(ctx, data.workers);
  return layout(ctx, "Queues", [
    data.queues.length === 0
      ? html`<p class="muted">No jobs yet.</p>`
      : html`<div class="scroll" tabindex="0" role="region" aria-label="Queues"><table id="queues" data-all><thead><tr><th>Queue</th><th>Pending</th><th>Scheduled</th><th>Waiting</th><th>Running</th><th>Dead</th><th>Completed (1 h)</th><th>Oldest pending</th><th>State</th><th>Actions</th></tr></thead>
<tbody>${rows}</tbody></table></div>`,
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
  const enc = encodeURIComponent(data.queue);
  const here = `${ctx.base}/queues/${enc}`;
  const tabs = (["1h", "24h", "7d"] as StatsRange[]).map(
    (r) => html`<a href="${here}?range=${r}"${r === data.range ? raw(' aria-current="page"') : ""}>${r}</a>`,
  );
  return layout(ctx, `Queue ${data.queue}`, [
    q
      ? html`<div class="scroll" tabindex="0" role="region" aria-label="Queues"><table id="queues"><thead><tr><th>Pending</th><th>Scheduled</th><th>Waiting</th><th>Running</th><th>Dead</th><th>Completed (1 h)</th><th>Oldest pending</th><th>State</th><th>Actions</th></tr></thead>
<tbody><tr data-queue="${q.queue}" data-dead="${q.dead}" data-paused="${q.paused}"><td class="n" data-f="pending">${q.pending}</td><td class="n" data-f="scheduled">${q.scheduled}</td>
<td class="n" data-f="waiting">${q.waiting}</td><td class="n" data-f="running">${q.running}</td><td class="n">${q.dead}</td><td class="n" data-f="completed">${q.completedLastHour}</td><td class="n">${duration(q.oldestPendingSeconds)}</td>
<td>${q.paused ? html`<strong>paused</strong>` : "active"}</td>
<td>${q.paused ? action(ctx, `/queues/${enc}/resume`, "Resume", { back: here }) : action(ctx, `/queues/${enc}/pause`, "Pause", { back: here })}
<a href="${ctx.base}/jobs?queue=${enc}">Jobs</a></td></tr></tbody></table></div>`
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
  const enc = encodeURIComponent(queue);
  const here = `${ctx.base}/queues/${enc}`;
  const num = (name: string, label: string, value: number | null | undefined, min: number, hint: string) =>
    html`<label>${label}<input name="${name}" type="number" min="${min}" max="1000000" value="${value ?? ""}" placeholder="${hint}"${canAct ? "" : raw(" disabled")}></label>`;
  const rate = limits?.rate;
  const form = html`<form id="limits" class="filters" method="post" action="${here}/limits" aria-label="Limits of ${queue}">
${ctx.csrf === undefined ? "" : csrfField(ctx.csrf)}<input type="hidden" name="back" value="${here}">
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
<td>${canAct ? action(ctx, `/queues/${enc}/keys/resume`, "Resume", { key: k.key ?? "", back: here }) : ""}</td></tr>`,
  );
  const summary = html`<dl id="limits"><dt>Concurrency</dt><dd>${limits?.concurrency ?? "no limit"}</dd><dt>Per-key concurrency</dt><dd>${limits?.keyConcurrency ?? "no limit"}</dd>
<dt>Rate</dt><dd>${rate ? `${rate.limit} starts per ${rate.window} ms${rate.perKey ? ", per key" : ""}` : "no limit"}</dd>
<dt>Fair</dt><dd>${limits?.fairness ? `yes${weightsText(limits) ? ` (weights ${weightsText(limits)})` : ""}` : "no"}</dd></dl>`;
  return html`<h2>Limits</h2>${canAct ? form : summary}<h2>Paused keys</h2>${
    keys.length === 0
      ? html`<p class="muted">No key is paused.</p>`
      : html`<table id="paused-keys"><thead><tr><th>Key</th><th>Paused until</th><th><span class="skip-label">Actions</span></th></tr></thead><tbody>${rows}</tbody></table>`
  }${
    canAct
      ? html`<form class="filters" method="post" action="${here}/keys/pause" aria-label="Pause a key">${ctx.csrf === undefined ? "" : csrfField(ctx.csrf)}
<input type="hidden" name="back" value="${here}"><label>Key (empty: whole queue)<input name="key"></label><label>For<input name="for" value="10m" placeholder="10m"></label>
<button type="submit">Pause key</button></form>`
      : ""
  }`;
}

export function cronPage(ctx: PageContext, schedules: CronScheduleRow[], canAct: boolean): SafeHtml {
  const here = `${ctx.base}/cron`;
  const rows = schedules.map((c) => {
    const enc = encodeURIComponent(c.name);
    return html`<tr data-cron="${c.name}"><td>${c.name}</td><td><code>${c.expression}</code>${c.timezone ? ` (${c.timezone})` : ""}</td>
<td><a href="${ctx.base}/queues/${encodeURIComponent(c.queue)}">${c.queue}</a></td><td>${c.kind}</td>
<td>${time(c.lastTick)}${c.lastJobId ? html` · <a href="${ctx.base}/jobs/${c.lastJobId}">#${c.lastJobId}</a>` : ""}</td>
<td>${c.pausedAt ? html`<span class="muted">paused</span>` : time(c.nextTick)}</td>
<td>${c.pausedAt ? html`<strong>paused</strong> since ${time(c.pausedAt)}` : "active"}${c.runRequestedAt ? html`<br><span class="muted">run requested ${time(c.runRequestedAt)}</span>` : ""}</td>
<td>${
      canAct
        ? html`${action(ctx, `/cron/${enc}/run`, "Run now", { back: here })} ${
            c.pausedAt
              ? action(ctx, `/cron/${enc}/resume`, "Resume", { back: here })
              : action(ctx, `/cron/${enc}/pause`, "Pause", { back: here })
          }`
        : ""
    }</td></tr>`;
  });
  return layout(ctx, "Cron schedules", [
    schedules.length === 0
      ? html`<p class="muted">No schedules: they appear once a worker with a Scheduler declares them.</p>`
      : html`<div class="scroll" tabindex="0" role="region" aria-label="Cron schedules"><table id="cron"><thead><tr><th>Name</th><th>Expression</th><th>Queue</th><th>Kind</th><th>Last tick</th><th>Next tick</th><th>State</th><th>Actions</th></tr></thead><tbody>${rows}</tbody></table></div>`,
    html`<p class="muted">"Run now" is enqueued by the next pass of a scheduler that declares the schedule (its payload lives in code). A paused schedule skips its ticks until resumed.</p>`,
  ]);
}

/** The live workers, with their in-flight jobs when known; the live script redraws its body from events. */
export function workersTable(ctx: PageContext, workers: Array<WorkerPresence & { inFlight?: InFlight[] }>): SafeHtml {
  if (workers.length === 0)
    return html`<p class="muted" id="no-workers">No live workers have reported in (workers record themselves every 10 s).</p>`;
  return html`<div class="scroll" tabindex="0" role="region" aria-label="Workers"><table id="workers"><thead><tr><th>Worker</th><th>Host</th><th>Queues</th><th>Kinds</th><th>In flight</th><th>Last seen</th></tr></thead><tbody>${workers.map(
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
  )}</tbody></table></div>`;
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

/** The explorer's filter as the URL and forms carry it (text, as typed). */
export interface JobsFilter {
  queue: string;
  kind: string;
  status: string;
  search: string;
  from: string;
  to: string;
  path: string;
  value: string;
}

export const FILTER_FIELDS: Record<keyof JobsFilter, string> = {
  queue: "queue",
  kind: "kind",
  status: "status",
  search: "q",
  from: "from",
  to: "to",
  path: "path",
  value: "value",
};

function filterQuery(filter: JobsFilter): URLSearchParams {
  const p = new URLSearchParams();
  for (const [key, name] of Object.entries(FILTER_FIELDS)) {
    const v = filter[key as keyof JobsFilter];
    if (v) p.set(name, v);
  }
  return p;
}

function filterHidden(filter: JobsFilter): SafeHtml[] {
  return [...filterQuery(filter)].map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
}

const BULK_LABELS: Record<BulkAction, string> = {
  retry: "Retry (dead, cancelled)",
  cancel: "Cancel (pending, running)",
  delete: "Delete (all but running)",
  "run-now": "Run now (scheduled)",
  priority: "Set priority (pending)",
};

export function jobsPage(
  ctx: PageContext,
  filter: JobsFilter,
  page: { before: string; jobs: ListedJob[]; limit: number; canAct: boolean },
  statuses: readonly string[],
  errorOf: (job: ListedJob) => string | null,
): SafeHtml {
  const { jobs, limit, before } = page;
  const query = (older?: string) => {
    const p = filterQuery(filter);
    if (older) p.set("before", older);
    const s = p.toString();
    return `${ctx.base}/jobs${s ? `?${s}` : ""}`;
  };
  const last = jobs.at(-1);
  const field = (name: string, label: string, value: string, attrs = "") =>
    html`<label>${label}<input name="${name}" value="${value}"${raw(attrs)}></label>`;
  const form = html`<form class="filters" method="get" action="${ctx.base}/jobs" role="search" aria-label="Filter jobs">
${field("queue", "Queue", filter.queue)}${field("kind", "Kind", filter.kind)}
<label>State<select name="status"><option value="">any</option>${statuses.map((s) => html`<option${filter.status === s ? raw(" selected") : ""}>${s}</option>`)}</select></label>
${field("from", "Created from (UTC)", filter.from, ' placeholder="2026-01-31T09:00"')}${field("to", "Created before (UTC)", filter.to, ' placeholder="2026-01-31T10:00"')}
${field("q", "Error text", filter.search)}${field("path", "Payload path", filter.path, ' placeholder="customer.id"')}${field("value", "Payload value", filter.value, ' placeholder="42 or text"')}
<button type="submit">Filter</button> <a href="${ctx.base}/jobs">Clear</a></form>`;
  const rows = jobs.map(
    (
      j,
    ) => html`<tr data-watch-job="${j.id}" data-status="${j.status}">${page.canAct ? html`<td><input type="checkbox" name="ids" value="${j.id}" form="bulk" aria-label="Select job ${j.id}"></td>` : ""}<td><a href="${ctx.base}/jobs/${j.id}">${j.id}</a></td><td>${j.queue}</td><td>${j.kind}</td><td>${status(j.status)}</td>
<td class="n" data-f="attempts">${j.attempts}/${j.max_attempts}</td><td class="n">${j.priority}</td><td>${time(j.run_at)}</td><td>${time(j.created_at)}</td><td class="n">${j.payload_bytes} B</td>
<td>${firstLine(errorOf(j))}</td></tr>`,
  );
  const bulk = page.canAct
    ? html`<form id="bulk" class="filters" method="post" action="${ctx.base}/jobs/bulk" aria-label="Bulk action">
${ctx.csrf === undefined ? "" : csrfField(ctx.csrf)}${filterHidden(filter)}
<label>Bulk action<select name="action">${BULK_ACTIONS.map((a) => html`<option value="${a}">${BULK_LABELS[a]}</option>`)}</select></label>
<label>Priority<input name="priority" type="number" min="-32768" max="32767" value="0"></label>
<button type="submit" name="scope" value="selected">Selected jobs…</button>
<button type="submit" name="scope" value="filter">Every job matching the filter…</button>
<span class="muted">You see how many jobs it touches before confirming.</span></form>`
    : "";
  const paging = html`<p>${before ? html`<a href="${query()}">« newest</a> ` : ""}${last && jobs.length === limit ? html`<a href="${query(last.id)}" rel="next">older »</a>` : ""}</p>`;
  return layout(ctx, "Jobs", [
    form,
    bulk,
    html`<div id="jobs-list"${before ? "" : html` data-live-list="${filter.queue}"`}>${
      jobs.length === 0
        ? html`<p class="muted">No jobs match.</p>`
        : html`<div class="scroll" tabindex="0" role="region" aria-label="Jobs"><table id="jobs"><thead><tr>${page.canAct ? html`<th><span class="skip-label">Select</span></th>` : ""}<th>Id</th><th>Queue</th><th>Kind</th><th>Status</th><th>Attempts</th><th>Priority</th><th>Run at</th><th>Created</th><th>Payload</th><th>Last error</th></tr></thead><tbody>${rows}</tbody></table></div>`
    }</div>`,
    paging,
  ]);
}

/** The count shown before a bulk action runs, and the form that confirms it. */
export function bulkConfirmPage(
  ctx: PageContext,
  o: {
    action: BulkAction;
    scope: "selected" | "filter";
    ids: string[];
    filter: JobsFilter;
    priority: string;
    counts: BulkCounts;
  },
): SafeHtml {
  const n = o.counts.applicable[o.action];
  const back = `${ctx.base}/jobs${filterQuery(o.filter).size ? `?${filterQuery(o.filter)}` : ""}`;
  const what =
    o.scope === "selected"
      ? `${o.ids.length} selected job(s)`
      : `every job matching the filter (${o.counts.matched > o.counts.limit ? `more than ${o.counts.limit}` : o.counts.matched})`;
  return layout(ctx, "Confirm bulk action", [
    html`<p id="bulk-count"><strong>${BULK_LABELS[o.action]}${o.action === "priority" ? ` to ${o.priority}` : ""}</strong> on ${what}: this touches <strong data-f="applicable">${n}</strong> job(s)${o.counts.matched > n ? `; the other ${Math.min(o.counts.matched, o.counts.limit) - n} are in states it does not apply to` : ""}.</p>`,
    o.counts.matched > o.counts.limit
      ? html`<p class="warn">At most ${o.counts.limit} jobs are changed at a time: run it again for the rest.</p>`
      : "",
    n === 0
      ? html`<p>Nothing to do. <a href="${back}">Back to the jobs</a></p>`
      : html`<form method="post" action="${ctx.base}/jobs/bulk">${ctx.csrf === undefined ? "" : csrfField(ctx.csrf)}${filterHidden(o.filter)}
<input type="hidden" name="action" value="${o.action}"><input type="hidden" name="scope" value="${o.scope}"><input type="hidden" name="priority" value="${o.priority}">
${o.ids.map((id) => html`<input type="hidden" name="ids" value="${id}">`)}<input type="hidden" name="confirm" value="${n}">
<button type="submit" id="bulk-confirm">Confirm: ${o.action} ${n} job(s)</button> <a href="${back}">Cancel</a></form>`,
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
    result?: string | null;
    progress?: string | null;
    attemptLogs?: string[];
    /** Every attempt, newest first (display.ts attemptRows): text already redacted. */
    attempts?: { rows: AttemptRow[]; unrecorded: number };
    /** Workflows: its parents and children, results already redacted and cut to text. */
    flow?: { parents: ShownNode[]; children: ShownNode[] };
  },
): SafeHtml {
  const here = `${ctx.base}/jobs/${job.id}`;
  const one = (verb: BulkAction, label: string, extra: Record<string, string> = {}) =>
    action(ctx, "/jobs/bulk", label, { action: verb, scope: "selected", ids: job.id, ...extra });
  const scheduled =
    job.status === "pending" && finiteDate(job.run_at) !== undefined && (finiteDate(job.run_at) as Date) > new Date();
  const actions = [
    job.status === "dead" || job.status === "cancelled"
      ? action(ctx, `/jobs/${job.id}/retry`, "Retry", { back: here })
      : "",
    job.status === "waiting" || job.status === "pending" || job.status === "running"
      ? action(ctx, `/jobs/${job.id}/cancel`, "Cancel", { back: here })
      : "",
    scheduled ? one("run-now", "Run now…") : "",
    job.status !== "running" ? one("delete", "Delete…") : "",
  ];
  return layout(ctx, `Job ${job.id}`, [
    html`<p class="actions">${actions}</p>`,
    html`<dl id="job" data-watch-job="${job.id}" data-status="${job.status}">
<dt>Status</dt><dd id="job-status">${status(job.status)}</dd>
<dt>Queue</dt><dd><a href="${ctx.base}/queues/${encodeURIComponent(job.queue)}">${job.queue}</a></dd>
<dt>Kind</dt><dd>${job.kind}</dd><dt>Priority</dt><dd>${job.priority}</dd>
<dt>Attempts</dt><dd data-f="attempts">${job.attempts}/${job.max_attempts}</dd>
<dt>Run at</dt><dd>${time(job.run_at)}</dd><dt>Created</dt><dd>${time(job.created_at)}</dd>
<dt>Updated</dt><dd>${time(job.updated_at)}</dd><dt>Locked at</dt><dd>${time(job.locked_at)}</dd>
<dt>Locked by</dt><dd data-f="locked_by">${job.locked_by ?? "—"}</dd><dt>Lease expires</dt><dd>${time(job.lease_expires_at)}</dd>
<dt>Completed</dt><dd>${time(job.completed_at)}</dd>
<dt>Idempotency key</dt><dd>${job.idempotency_key ?? "—"}</dd>
<dt>Error fingerprint</dt><dd>${job.error_fingerprint ? html`<a href="${ctx.base}/dead?queue=${encodeURIComponent(job.queue)}">${job.error_fingerprint}</a>` : "—"}</dd>
<dt>Progress</dt><dd id="job-progress">${shown.progress ?? "—"}</dd>
</dl>`,
    html`<h2>Timeline</h2>${timeline(job, shown.error)}`,
    shown.attempts ? attemptsTable(shown.attempts) : "",
    // Result, progress and per-attempt logs (the job-features branch) render here, under their own h2s, when the schema has them.
    html`<h2>Payload</h2><pre id="payload">${shown.payload}</pre>${shown.payloadTruncated > 0 ? html`<p class="muted">Truncated: ${shown.payloadTruncated} more characters not shown.</p>` : ""}`,
    shown.headers ? html`<h2>Headers</h2><pre>${shown.headers}</pre>` : "",
    shown.result ? html`<h2>Result</h2><pre id="result">${shown.result}</pre>` : "",
    html`<h2>Last error</h2>${shown.error ? html`<pre id="last-error">${shown.error}</pre>` : html`<p class="muted">None.</p>`}`,
    shown.attemptLogs?.length
      ? html`<h2>Attempt logs</h2><pre id="attempt-logs">${shown.attemptLogs.join("\n\n")}</pre>`
      : "",
    shown.flow && shown.flow.parents.length + shown.flow.children.length > 0 ? flowSection(ctx, shown.flow) : "",
  ]);
}

/**
 * Every attempt of a job, newest first: start, end, worker, outcome and error (docs/dashboard.md, "Job
 * page"). Text arrives redacted; the html tag escapes it. A time that is not one is shown as its text.
 */
function attemptsTable(a: { rows: AttemptRow[]; unrecorded: number }): SafeHtml {
  const at = (v: string | null) => (v === null ? html`<span class="muted">—</span>` : time(v));
  const rows = a.rows.map(
    (r) =>
      html`<tr data-attempt="${r.attempt}" data-source="${r.source}"><td>${r.attempt}</td><td>${at(r.startedAt)}${r.source === "row" && r.startedAt !== null ? html` <span class="muted">(claim or last heartbeat)</span>` : ""}</td><td>${at(r.endedAt)}</td><td><code>${r.worker}</code></td><td data-f="outcome">${r.outcome}</td><td>${r.error === null ? html`<span class="muted">—</span>` : html`<pre class="attempt-error">${r.error}</pre>`}</td></tr>`,
  );
  const note =
    a.unrecorded > 0
      ? html`<p class="muted" id="attempts-unrecorded">${a.unrecorded} attempt(s) have no record: run before attempts were recorded, by a worker of the SQL protocol, or older than the ${MAX_ATTEMPTS_KEPT} kept.</p>`
      : "";
  return html`<h2 id="attempts-heading">Attempts</h2>${
    a.rows.length === 0
      ? html`<p class="muted" id="attempts">No attempt yet.</p>`
      : html`<div class="scroll" tabindex="0" role="region" aria-label="Attempts"><table id="attempts"><thead><tr><th scope="col">Attempt</th><th scope="col">Started</th><th scope="col">Ended</th><th scope="col">Worker</th><th scope="col">Outcome</th><th scope="col">Error</th></tr></thead>
<tbody>${rows}</tbody></table></div>`
  }${note}`;
}

/**
 * A job's life as far as its row tells: enqueued, runnable from, the last
 * attempt's start (worker, wait) and its end (outcome, duration, error).
 * Each attempt's own details are in the attempts table.
 */
function timeline(job: JobRow, error: string | null): SafeHtml {
  const at = (v: Date | number | string | null | undefined) =>
    v === null || v === undefined ? undefined : finiteDate(v);
  const created = at(job.created_at);
  const runAt = at(job.run_at);
  const started = at(job.locked_at);
  const finished = at((job as JobRow & { finished_at?: Date | null }).finished_at ?? null);
  const seconds = (from: Date | undefined, to: Date | undefined) =>
    from && to ? duration((to.getTime() - from.getTime()) / 1000) : "—";
  const events: SafeHtml[] = [html`<li><strong>Enqueued</strong> ${time(job.created_at)}</li>`];
  if (runAt && created && Math.abs(runAt.getTime() - created.getTime()) > 1000)
    events.push(
      html`<li><strong>${job.attempts > 0 && job.status === "pending" ? "Retry due" : "Runnable from"}</strong> ${time(job.run_at)}</li>`,
    );
  if (job.attempts > 1)
    events.push(
      html`<li class="muted">Attempts 1–${job.attempts - 1}: see <a href="#attempts">Attempts</a> for each one's start, end, worker, outcome and error.</li>`,
    );
  if (started)
    events.push(
      html`<li><strong>Attempt ${job.attempts} started</strong> ${time(job.locked_at)} on <code>${job.locked_by ?? "?"}</code> · waited ${seconds(runAt, started)}</li>`,
    );
  if (job.status === "running")
    events.push(html`<li><strong>Running</strong> · lease until ${time(job.lease_expires_at)}</li>`);
  if (finished)
    events.push(
      html`<li><strong>${job.status === "completed" ? "Completed" : job.status === "dead" ? "Failed for good (dead)" : "Cancelled"}</strong> ${time(finished)}${started ? html` · ran ${seconds(started, finished)}` : ""}${
        error && job.status !== "completed" ? html`<pre class="attempt-error">${error}</pre>` : ""
      }</li>`,
    );
  else if (job.status === "pending" && error)
    events.push(html`<li><strong>Last attempt failed</strong><pre class="attempt-error">${error}</pre></li>`);
  return html`<ol id="timeline" class="timeline">${events}</ol>`;
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
      : html`<div class="scroll" tabindex="0" role="region" aria-label="Dead jobs"><table id="dead"><thead><tr><th>Queue</th><th>Kind</th><th>Fingerprint</th><th>Jobs</th><th>Last seen</th><th>Latest</th><th>Error</th><th><span class="skip-label">Actions</span></th></tr></thead><tbody>${rows}</tbody></table></div>`,
  ]);
}

export interface OutboxKeyRow {
  topic: string;
  key: string;
  backlog: number;
  oldest: Date;
  attempts: number;
  error: string | null;
  next_try: Date;
}

export function outboxPage(
  ctx: PageContext,
  summary: { undelivered: number; oldest: Date | null; keys: number; failing: number },
  keys: OutboxKeyRow[],
): SafeHtml {
  const here = `${ctx.base}/outbox`;
  return layout(ctx, "Outbox", [
    html`<p id="outbox-summary">${summary.undelivered} undelivered event(s) over ${summary.keys} key(s); ${summary.failing} failed at least once${
      summary.oldest ? html`; the oldest was written ${time(summary.oldest)}` : ""
    }.</p>`,
    keys.length === 0
      ? html`<p class="muted">Nothing waits: every event was delivered.</p>`
      : html`<div class="scroll" tabindex="0" role="region" aria-label="Outbox keys"><table id="outbox"><thead><tr><th>Topic</th><th>Key</th><th>Backlog</th><th>Oldest</th><th>Attempts</th><th>Next try</th><th>Error</th><th><span class="skip-label">Actions</span></th></tr></thead><tbody>${keys.map(
          (
            k,
          ) => html`<tr data-key="${k.key}"><td>${k.topic}</td><td><code>${k.key}</code></td><td class="n">${k.backlog}</td><td>${time(k.oldest)}</td>
<td class="n">${k.attempts}</td><td>${time(k.next_try)}</td><td>${firstLine(k.error)}</td>
<td>${k.attempts > 0 ? action(ctx, "/outbox/retry", "Retry now", { topic: k.topic, key: k.key, back: here }) : ""}</td></tr>`,
        )}</tbody></table></div>`,
    html`<p class="muted">Failing keys first. A key's events go out in order, so one failing event holds its key back; "Retry now" makes its events due at once.</p>`,
  ]);
}

export interface AuditRow {
  id: string;
  at: Date;
  principal: string;
  role: string;
  action: string;
  target: string | null;
  detail: unknown;
  client: string | null;
  user_agent: string | null;
}

export function auditPage(ctx: PageContext, rows: AuditRow[], before: string, limit: number): SafeHtml {
  const last = rows.at(-1);
  return layout(ctx, "Audit", [
    html`<p class="muted">Every dashboard action, sign-in and sign-out: who, what, when and from where. Failed sign-ins go to the server log only.</p>`,
    rows.length === 0
      ? html`<p class="muted">Nothing recorded yet.</p>`
      : html`<div class="scroll" tabindex="0" role="region" aria-label="Audit"><table id="audit"><thead><tr><th>When</th><th>Who</th><th>Role</th><th>What</th><th>Target</th><th>Details</th><th>From</th></tr></thead><tbody>${rows.map(
          (r) =>
            html`<tr><td>${time(r.at)}</td><td>${r.principal}</td><td>${r.role}</td><td>${r.action}</td><td>${r.target ?? "—"}</td>
<td>${r.detail === null ? "—" : html`<code>${displayJson(r.detail)}</code>`}</td><td>${r.client ?? "—"}<br><span class="muted">${r.user_agent ?? ""}</span></td></tr>`,
        )}</tbody></table></div>`,
    html`<p>${before ? html`<a href="${ctx.base}/audit">« newest</a> ` : ""}${last && rows.length === limit ? html`<a href="${ctx.base}/audit?before=${last.id}" rel="next">older »</a>` : ""}</p>`,
  ]);
}

export function messagePage(ctx: PageContext, heading: string, text: string): SafeHtml {
  return layout(ctx, heading, html`<p>${text}</p>`);
}
