/**
 * What every dashboard page shares: the one stylesheet (CSS; handler.ts
 * allows it by its sha256 hash, computed from this constant), the page
 * layout (header, navigation, the live script), the sign-in page, and the
 * small renderers the views use (timestamps, durations, statuses, action
 * forms). Every value shown comes through `html` (escaped).
 */
import type { ReplicaStatus } from "../adminTypes.js";
import { finiteDate, timestampText } from "../timestamp.js";
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
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(min(320px,100%),1fr));gap:12px}
.chart{width:100%;height:auto;background:var(--card);border:1px solid var(--line)}
.chart .axis{stroke:var(--grid)}.chart .zero-line{stroke:var(--muted)}.chart .gap{fill:var(--grid);fill-opacity:.45}.chart text{fill:var(--muted)}.chart .s1{stroke:var(--chart1);fill:none}.chart .s2{stroke:var(--chart2);fill:none}
.chart .b1,.chart text.t1{fill:var(--chart1)}.chart .b2,.chart text.t2,.chart text.b2{fill:var(--chart2)}.chart .b3,.chart text.b3{fill:var(--chart3)}
.tabs a{margin-right:8px}.tabs a[aria-current]{font-weight:700;text-decoration:none}
.states{display:flex;flex-wrap:wrap;gap:4px 6px;margin:8px 0}.states a{margin:0;padding:2px 8px;border:1px solid var(--line);border-radius:12px;background:var(--card)}
.states a[aria-current]{border-color:var(--link)}.count{font-variant-numeric:tabular-nums;color:var(--muted)}
.signin{display:block;max-width:360px;margin:64px auto;background:var(--card);border:1px solid var(--line);padding:24px}
.signin label{display:block;margin:8px 0}.signin input{width:100%;box-sizing:border-box}
.hint{margin-top:16px;font-size:13px;color:var(--muted)}.hint ul{padding-left:18px;margin:4px 0}.hint p{margin:0}
h1,p code,li code{overflow-wrap:anywhere}svg{max-width:100%}.filters label,.filters input,.filters select{max-width:100%;min-width:0}
@media (max-width:640px){main{padding:8px}th,td{padding:3px 4px}dl{grid-template-columns:1fr}dt{margin-top:6px}
.signin{margin:16px auto;padding:16px}header{padding:8px}}
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
<script src="${b}/assets/live.js" defer></script></head>
<body data-base="${b}" data-live="${live.join(",")}"><a class="skip" href="#main">Skip to content</a>
<header><nav aria-label="Main"><a class="brand" href="${b}/">${ctx.title}</a>
<a href="${b}/">Queues</a><a href="${b}/jobs">Jobs</a><a href="${b}/workers">Workers</a><a href="${b}/cron">Cron</a><a href="${b}/dead">Dead</a><a href="${b}/outbox">Outbox</a><a href="${b}/audit">Audit</a><a href="${b}/metrics">Metrics</a></nav>
${ctx.role === "viewer" ? html`<span class="live" title="This credential only reads">read-only</span>` : ""}
${replicaNote(ctx.replica)}
${live.length > 0 ? html`<span id="live" class="live off" title="Live updates">static</span>` : ""}
${ctx.csrf === undefined ? "" : html`<form class="inline signout" method="post" action="${b}/logout">${csrfField(ctx)}<button type="submit">Sign out</button></form>`}
</header><main id="main"><h1>${heading}</h1>
${ctx.flash ? html`<div class="${ctx.flash.kind}" role="status">${ctx.flash.text}</div>` : ""}
<p id="live-notice" class="warn" hidden>Things changed while you were selecting; <a href="">reload</a> to see them.</p>
${body}</main></body></html>`;
}

/** A form's CSRF field; nothing for a bearer request (it has no token and needs none). */
export function csrfField(ctx: { csrf: string | undefined }): SafeHtml | "" {
  return ctx.csrf === undefined ? "" : html`<input type="hidden" name="_csrf" value="${ctx.csrf}">`;
}

/** A table in a scrolling region labelled `label`: `head` is its header cells, `body` its rows. */
export function dataTable(label: string, id: string, head: SafeHtml, body: unknown, o: { all?: boolean } = {}) {
  return html`<div class="scroll" tabindex="0" role="region" aria-label="${label}"><table id="${id}"${o.all ? raw(" data-all") : ""}><thead><tr>${head}</tr></thead>
<tbody>${body}</tbody></table></div>`;
}

/**
 * A path under the base path: each segment percent-encoded (a queue or schedule name is data), then the query's
 * set fields, encoded. Interpolate it into `html` as any value (that escapes it for the attribute).
 */
export function link(base: string, segments: readonly string[], query: Record<string, string | undefined> = {}) {
  const path = segments.map((s) => `/${encodeURIComponent(s)}`).join("");
  const fields = Object.entries(query).filter((e): e is [string, string] => e[1] !== undefined && e[1] !== "");
  const search = fields.map(([k, v]) => `${encodeURIComponent(k)}=${encodeURIComponent(v)}`).join("&");
  return `${base}${path}${search ? `?${search}` : ""}`;
}

export function action(ctx: PageContext, path: string, label: string, fields: Record<string, string> = {}) {
  if (ctx.canAct === false) return "";
  const hidden = Object.entries(fields).map(([k, v]) => html`<input type="hidden" name="${k}" value="${v}">`);
  return html`<form class="inline" method="post" action="${ctx.base}${path}">${csrfField(ctx)}${hidden}<button type="submit">${label}</button></form>`;
}

export function signInPage(
  ctx: PageContext,
  options: { token: boolean; password: boolean; next: string; message?: string },
): SafeHtml {
  return html`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width,initial-scale=1"><title>Sign in · ${ctx.title}</title><style>${raw(CSS)}</style></head>
<body><main class="signin" id="main"><h1>${ctx.title}</h1>
${options.message ? html`<div class="error" role="alert">${options.message}</div>` : ""}
<form method="post" action="${ctx.base}/login">
<input type="hidden" name="next" value="${options.next}">
${options.password ? html`<label>User <input name="user" autocomplete="username"></label><label>Password <input name="password" type="password" autocomplete="current-password"></label>` : ""}
${options.token ? html`<label>${options.password ? "Or token" : "Token"} <input name="token" type="password" autocomplete="off"></label>` : ""}
<button type="submit">Sign in</button></form>${signInHint(options)}</main></body></html>`;
}

/**
 * Where the credentials the form asks for are configured (names of settings only, never a value): the
 * environment variables and `auth` option `resolveCredentials` reads, and the one-time token `skipq
 * dashboard` and `startDashboard` print when none is set (docs/dashboard.md, "Secure it").
 */
function signInHint(options: { token: boolean; password: boolean }): SafeHtml {
  return html`<div class="hint" id="signin-hint"><p>Ask whoever runs this dashboard: the credentials are set where it runs, not here.</p><ul>
${
  options.token
    ? html`<li>The token is <code>SKIPQ_DASHBOARD_TOKEN</code> in the server's environment, or <code>auth: { token }</code> in the code that creates the dashboard; a read-only one is <code>SKIPQ_DASHBOARD_VIEWER_TOKEN</code>.</li>
<li>With none set, <code>skipq dashboard</code> (and <code>startDashboard</code>) on 127.0.0.1 generates a one-time token and prints it in its log when it starts.</li>`
    : ""
}
${options.password ? html`<li>The user and password are <code>SKIPQ_DASHBOARD_USER</code> and <code>SKIPQ_DASHBOARD_PASSWORD</code> (read-only: <code>SKIPQ_DASHBOARD_VIEWER_USER</code> and <code>SKIPQ_DASHBOARD_VIEWER_PASSWORD</code>), or <code>auth: { user, password }</code>.</li>` : ""}
</ul></div>`;
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

export function status(s: string): SafeHtml {
  return html`<span class="status status-${s}">${s}</span>`;
}

export function firstLine(text: string | null): string {
  if (!text) return "";
  const line = text.split("\n")[0] ?? "";
  return line.length > 160 ? `${line.slice(0, 160)}…` : line;
}
