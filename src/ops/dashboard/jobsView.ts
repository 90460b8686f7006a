/**
 * The jobs explorer's pages: the filter form and state tabs, the list (never
 * a payload, only its size), and the count a bulk action shows before it is
 * confirmed. The filter travels as text (JobsFilter), as typed.
 */
import { BULK_ACTIONS, type BulkAction, type BulkCounts, type JobStatus, type ListedJob } from "../adminTypes.js";
import { html, raw, type SafeHtml } from "./html.js";
import { csrfField, dataTable, firstLine, layout, type PageContext, status, time } from "./layout.js";

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

/** How many jobs of the filter's queue and kind are in each state; the history's states counted up to `cap`. */
export interface StateCounts {
  counts: Record<JobStatus, number>;
  cap: number;
}

/** States whose count stops at the cap (the history's); the live table's are exact. */
const CAPPED: readonly string[] = ["dead", "completed", "cancelled"];

/**
 * The state tabs above the list: all, then each state, with its count for the filter's queue and kind,
 * the current one marked. A tab keeps the rest of the filter and starts at the newest page.
 */
function stateTabs(ctx: PageContext, filter: JobsFilter, c: StateCounts, statuses: readonly string[]): SafeHtml {
  const over = (s: string) => CAPPED.includes(s) && c.counts[s as JobStatus] > c.cap;
  const shown = (s: string) => (over(s) ? `${c.cap}+` : String(c.counts[s as JobStatus] ?? 0));
  const total = statuses.reduce((n, s) => n + Math.min(c.counts[s as JobStatus] ?? 0, c.cap), 0);
  const tab = (state: string, label: string, count: string) => {
    const q = filterQuery({ ...filter, status: state }).toString();
    return html`<a href="${ctx.base}/jobs${q ? `?${q}` : ""}" data-state="${label}"${filter.status === state ? raw(' aria-current="page"') : ""}>${label} <span class="count" data-f="count-${label}">${count}</span></a>`;
  };
  const narrowed = filter.search || filter.from || filter.to || filter.path || filter.value;
  return html`<nav class="tabs states" id="states" aria-label="Job states">${tab("", "all", `${total}${statuses.some(over) ? "+" : ""}`)}${statuses.map((s) => tab(s, s, shown(s)))}</nav>${
    narrowed
      ? html`<p class="muted" id="states-note">The counts are for the queue and kind filter; the list applies the other filters too.</p>`
      : ""
  }`;
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
  page: { before: string; jobs: ListedJob[]; limit: number; canAct: boolean; counts: StateCounts },
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
${csrfField(ctx)}${filterHidden(filter)}
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
    stateTabs(ctx, filter, page.counts, statuses),
    html`<div id="jobs-list"${before ? "" : html` data-live-list="${filter.queue}"`}>${
      jobs.length === 0
        ? html`<p class="muted">No jobs match.</p>`
        : dataTable(
            "Jobs",
            "jobs",
            html`${page.canAct ? html`<th><span class="skip-label">Select</span></th>` : ""}<th>Id</th><th>Queue</th><th>Kind</th><th>Status</th><th>Attempts</th><th>Priority</th><th>Run at</th><th>Created</th><th>Payload</th><th>Last error</th>`,
            rows,
          )
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
      : html`<form method="post" action="${ctx.base}/jobs/bulk">${csrfField(ctx)}${filterHidden(o.filter)}
<input type="hidden" name="action" value="${o.action}"><input type="hidden" name="scope" value="${o.scope}"><input type="hidden" name="priority" value="${o.priority}">
${o.ids.map((id) => html`<input type="hidden" name="ids" value="${id}">`)}<input type="hidden" name="confirm" value="${n}">
<button type="submit" id="bulk-confirm">Confirm: ${o.action} ${n} job(s)</button> <a href="${back}">Cancel</a></form>`,
  ]);
}
