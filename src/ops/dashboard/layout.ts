/**
 * What every dashboard page shares: the page layout (header, navigation,
 * the stylesheet inlined — client/dashboard.css, which the CSP allows by the
 * hash clientAssets.ts carries — and the live script), the sign-in page, and
 * the small renderers the views use (timestamps, durations, statuses, action
 * forms, the CSRF field, scrolling tables, encoded links). Every value shown
 * comes through `html` (escaped).
 */
import type { ReplicaStatus } from "../adminTypes.js";
import { finiteDate, timestampText } from "../timestamp.js";
import { CSS } from "./clientAssets.js";
import { html, raw, type SafeHtml } from "./html.js";

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
