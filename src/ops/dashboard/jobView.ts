/**
 * A job's page: its fields, actions, timeline, every attempt, payload,
 * headers, result, errors and logs (all already redacted by the route), and
 * its workflow parents and children.
 */
import type { BulkAction, JobRow } from "../adminTypes.js";
import { type AttemptRow, MAX_ATTEMPTS_KEPT } from "../display.js";
import { finiteDate } from "../timestamp.js";
import { html, type SafeHtml } from "./html.js";
import { action, dataTable, duration, layout, link, type PageContext, status, time } from "./layout.js";

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
<dt>Queue</dt><dd><a href="${link(ctx.base, ["queues", job.queue])}">${job.queue}</a></dd>
<dt>Kind</dt><dd>${job.kind}</dd><dt>Priority</dt><dd>${job.priority}</dd>
<dt>Attempts</dt><dd data-f="attempts">${job.attempts}/${job.max_attempts}</dd>
<dt>Run at</dt><dd>${time(job.run_at)}</dd><dt>Created</dt><dd>${time(job.created_at)}</dd>
<dt>Updated</dt><dd>${time(job.updated_at)}</dd><dt>Locked at</dt><dd>${time(job.locked_at)}</dd>
<dt>Locked by</dt><dd data-f="locked_by">${job.locked_by ?? "—"}</dd><dt>Lease expires</dt><dd>${time(job.lease_expires_at)}</dd>
<dt>Completed</dt><dd>${time(job.completed_at)}</dd>
<dt>Idempotency key</dt><dd>${job.idempotency_key ?? "—"}</dd>
<dt>Error fingerprint</dt><dd>${job.error_fingerprint ? html`<a href="${link(ctx.base, ["dead"], { queue: job.queue })}">${job.error_fingerprint}</a>` : "—"}</dd>
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
      : dataTable(
          "Attempts",
          "attempts",
          html`<th scope="col">Attempt</th><th scope="col">Started</th><th scope="col">Ended</th><th scope="col">Worker</th><th scope="col">Outcome</th><th scope="col">Error</th>`,
          rows,
        )
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
  return html`<h2>Workflow</h2>${dataTable("Workflow", "flow", html`<th><span class="skip-label">Role</span></th><th>Id</th><th>Kind</th><th>Status</th><th>Result</th>`, html`${rows("parent", flow.parents)}${rows("child", flow.children)}`)}`;
}
