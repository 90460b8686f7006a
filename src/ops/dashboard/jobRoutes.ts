/**
 * The dashboard's job routes: the explorer (`/jobs`), a job's page, dead jobs
 * grouped by fingerprint, and their actions (bulk, retry, cancel, retry by
 * fingerprint). Lists never load payloads; a job's payload, headers, result
 * and logs are redacted before they are shown, and cut to a bounded size.
 * The explorer's state tabs are counted by one statement (jobStateCounts).
 */

import { SkipqError } from "../../core/errors.js";
import { assertName, ID_PATTERN, isId } from "../../core/validate.js";
import type { DashboardStore } from "../../db/dashboardStore.js";
import type { Admin } from "../admin.js";
import { BULK_ACTIONS, type BulkAction, type FlowNode, JOB_STATUSES, type ListedJob } from "../adminTypes.js";
import { displayJson } from "../display.js";
import { bulkConfirmPage, FILTER_FIELDS, type JobsFilter, jobsPage, type StateCounts } from "./jobsView.js";
import { jobPage } from "./jobView.js";
import {
  attemptLogsShown,
  attemptsShown,
  FLASH_COOKIE,
  filterOf,
  formParam,
  HttpError,
  param,
  shownJson,
  toJobFilter,
} from "./request.js";
import { actionRoute, type DashboardRuntime, type PageRequest, pageRoute, type Route } from "./routes.js";
import { deadPage } from "./views.js";

/** A job's page, and an action on it: the id as every id is checked (core/validate.ts). */
const JOB_PAGE = new RegExp(`^/jobs/(${ID_PATTERN})$`);
const JOB_ACTION = new RegExp(`^/jobs/(${ID_PATTERN})/(retry|cancel)$`);

/** Jobs per explorer page. */
export const PAGE_SIZE = 50;
/** A state tab counts the history's rows of its state up to this many (more: "1000+"). */
export const STATE_COUNT_CAP = 1000;
const MAX_PAYLOAD_CHARS = 100_000;

/** The explorer. */
async function explorer(rt: DashboardRuntime, r: PageRequest): Promise<unknown> {
  const { admin, redactError, liveTopics, search, stateCounts } = rt;
  const { req, url, ctx, page } = r;
  const filter = filterOf((name) => param(url, name));
  const before = param(url, "before");
  if (before && !isId(before)) throw new HttpError(400, "before must be a job id");
  // The live script's refreshes (marked by their header) share results for a second; a person's navigation never does.
  const shared = req.headers["x-skipq-live"] === "1";
  const [jobs, counts] = await Promise.all([
    shared
      ? search(filter, before)
      : admin.searchJobs(toJobFilter(filter), { ...(before ? { before } : {}), limit: PAGE_SIZE }),
    stateCounts(filter.queue, filter.kind, shared),
  ]);
  return page(
    200,
    jobsPage(
      { ...ctx, refresh: before ? undefined : 10, live: liveTopics("jobs") },
      filter,
      { before, jobs, limit: PAGE_SIZE, canAct: ctx.canAct !== false, counts },
      JOB_STATUSES,
      (j) => redactError(j.last_error, j),
    ),
  );
}

/** A job's page. */
async function jobDetail(rt: DashboardRuntime, r: PageRequest, [id]: string[]): Promise<unknown> {
  const { admin, redact, redactError, liveTopics } = rt;
  const { ctx, page } = r;
  const job = await admin.getJob(id as string);
  if (!job) throw new HttpError(404, `job ${id} does not exist (it may have been pruned)`);
  const text = shownJson(() => redact(job.payload, { field: "payload", job }));
  const headers = job.headers ? shownJson(() => redact(job.headers, { field: "headers", job })) : null;
  const result = job.result === null ? null : shownJson(() => redact(job.result, { field: "result", job }));
  const moving = job.status === "waiting" || job.status === "pending" || job.status === "running";
  // Workflows: parents and children, results redacted as payloads are, cut to one line.
  const flow = await admin.jobFlow(job.id, 200);
  const shownNode = (n: FlowNode) => {
    const text =
      n.result === null || n.result === undefined
        ? "—"
        : shownJson(() =>
            redact(n.result, { field: "result", job: { id: n.id, queue: job.queue, kind: n.kind ?? "" } }),
          ).replace(/\s+/g, " ");
    return {
      id: n.id,
      kind: n.kind,
      status: n.status,
      result: text.length > 120 ? `${text.slice(0, 119)}…` : text,
    };
  };
  return page(
    200,
    jobPage(moving ? { ...ctx, refresh: 2, live: liveTopics("job") } : { ...ctx, live: liveTopics("job") }, job, {
      payload: text.slice(0, MAX_PAYLOAD_CHARS),
      payloadTruncated: Math.max(0, text.length - MAX_PAYLOAD_CHARS),
      headers,
      error: redactError(job.last_error, job),
      result: result === null ? null : result.slice(0, MAX_PAYLOAD_CHARS),
      progress:
        job.progress === null || job.progress === undefined
          ? null
          : displayJson(redact(job.progress, { field: "progress", job })).slice(0, MAX_PAYLOAD_CHARS),
      attemptLogs: attemptLogsShown(job, redact, redactError),
      attempts: attemptsShown(job, redact, redactError),
      ...(flow ? { flow: { parents: flow.parents.map(shownNode), children: flow.children.map(shownNode) } } : {}),
    }),
  );
}

/** The job pages and the job actions (bulk, retry, cancel, retry by fingerprint). */
export const jobRoutes: Route[] = [
  pageRoute("/jobs", explorer),
  pageRoute(JOB_PAGE, jobDetail),
  pageRoute("/dead", async ({ admin, redactError }, { url, ctx, page }) => {
    const queue = param(url, "queue");
    const groups = await admin.deadByFingerprint({ ...(queue ? { queue } : {}), limit: 200 });
    return page(
      200,
      deadPage(ctx, queue, groups, (g) =>
        redactError(g.example_error, { id: g.example_id, queue: g.queue, kind: g.kind }),
      ),
    );
  }),
  actionRoute("/jobs/bulk", async ({ base, admin, cookie }, { req, form, ctx, page, done, redirect, record }) => {
    const filter = filterOf((name) => formParam(form, name));
    const action = form.get("action") as BulkAction;
    if (!BULK_ACTIONS.includes(action)) throw new HttpError(400, `action must be one of ${BULK_ACTIONS.join(", ")}`);
    const scope = form.get("scope") === "selected" ? "selected" : "filter";
    const ids = form.getAll("ids");
    if (scope === "selected") {
      if (ids.length === 0) return done("Select at least one job first.", "err");
      if (ids.length > 500 || !ids.every((id) => typeof id === "string" && isId(id)))
        throw new HttpError(400, "ids: at most 500 job ids");
    }
    const priorityText = form.get("priority") ?? "0";
    if (action === "priority" && !/^-?[0-9]{1,5}$/.test(priorityText))
      throw new HttpError(400, "priority must be a whole number from -32768 to 32767");
    const priority = Number(priorityText);
    if (action === "priority" && (priority < -32768 || priority > 32767))
      throw new HttpError(400, "priority must be a whole number from -32768 to 32767");
    const target = { ...toJobFilter(filter), ...(scope === "selected" ? { ids } : {}) };
    if (form.get("confirm") === null) {
      const counts = await admin.bulkCounts(target);
      return page(
        200,
        bulkConfirmPage(ctx, {
          action,
          scope,
          ids: scope === "selected" ? ids : [],
          filter,
          priority: priorityText,
          counts,
        }),
      );
    }
    const n = await admin.bulk(action, target, { priority });
    await record(
      `bulk ${action}`,
      scope === "selected" ? `jobs ${ids.join(",")}`.slice(0, 500) : "jobs matching a filter",
      {
        filter: Object.fromEntries(Object.entries(filter).filter(([, v]) => v)),
        jobs: n,
        ...(action === "priority" ? { priority } : {}),
      },
    );
    const query = new URLSearchParams(
      Object.entries(FILTER_FIELDS).flatMap(([k, name]): Array<[string, string]> => {
        const v = filter[k as keyof JobsFilter];
        return v ? [[name, v]] : [];
      }),
    ).toString();
    return redirect(`${base}/jobs${query ? `?${query}` : ""}`, [
      cookie(req, FLASH_COOKIE, `ok:${action}: ${n} job(s) changed.`, 30),
    ]);
  }),
  actionRoute(JOB_ACTION, async ({ admin }, { done, record }, params) => {
    const [id, verb] = params as [string, "retry" | "cancel"];
    try {
      if (verb === "retry") await admin.retryJob(id);
      else await admin.cancelJob(id);
    } catch (error) {
      if (error instanceof SkipqError) return done(error.message, "err");
      throw error;
    }
    await record(`job ${verb}`, `job ${id}`);
    return done(verb === "retry" ? `Job ${id} is pending again.` : `Job ${id} was cancelled.`);
  }),
  actionRoute("/dead/retry", async ({ admin }, { form, done, record }) => {
    const fingerprint = form.get("fingerprint") ?? "";
    const queue = form.get("queue") || undefined;
    const n = await admin.retryDeadByFingerprint(fingerprint, queue);
    await record("retry dead by fingerprint", `fingerprint ${fingerprint}`, { queue: queue ?? null, jobs: n });
    return done(`${n} dead job(s) with fingerprint ${fingerprint} are pending again.`);
  }),
];

/** Explorer pages for the live script's refreshes, shared by every viewer of the same filter for 1 s. */
/**
 * Results of `load` shared per key for a second: the live script's refreshes of every viewer of one filter
 * cost one statement a second. `fresh` (a person's navigation) loads anew, and its result is shared too.
 */
function sharedForASecond<T>(): (key: string, load: () => Promise<T>, fresh?: boolean) => Promise<T> {
  const cache = new Map<string, { at: number; value: Promise<T> }>();
  return (key, load, fresh = false) => {
    const hit = cache.get(key);
    if (!fresh && hit && Date.now() - hit.at < 1000) return hit.value;
    if (cache.size > 1000) cache.clear();
    const value = load();
    cache.set(key, { at: Date.now(), value });
    value.catch(() => cache.delete(key));
    return value;
  };
}

export function sharedSearch(admin: Admin): (filter: JobsFilter, before: string) => Promise<ListedJob[]> {
  const shared = sharedForASecond<ListedJob[]>();
  return (filter, before) =>
    shared(JSON.stringify([filter, before]), () =>
      admin.searchJobs(toJobFilter(filter), { ...(before ? { before } : {}), limit: PAGE_SIZE }),
    );
}

/**
 * The state tabs' counts for a queue and kind ("" for any), one statement on the read store; the live
 * script's refreshes (`shared`) take a result under a second old, for every viewer of the same filter.
 */
export function sharedStateCounts(
  reads: DashboardStore,
): (queue: string, kind: string, shared: boolean) => Promise<StateCounts> {
  const cached = sharedForASecond<StateCounts>();
  return (queue, kind, shared) =>
    cached(
      JSON.stringify([queue, kind]),
      // A bad name rejects the promise, never throws: the page awaits these counts beside the job search, and a
      // synchronous throw here would leave the search's own rejection unhandled.
      () =>
        Promise.resolve()
          .then(() =>
            reads.jobStateCounts({
              queue: queue ? assertName("queue", queue) : null,
              kind: kind ? assertName("kind", kind) : null,
              limit: STATE_COUNT_CAP + 1,
            }),
          )
          .then((counts) => ({ counts, cap: STATE_COUNT_CAP })),
      !shared,
    );
}
