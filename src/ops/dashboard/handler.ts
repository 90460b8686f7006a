/**
 * The dashboard as a Node request handler, mountable into any `http` server
 * (or Express/Connect, with `basePath`). Routes: overview, jobs list, job
 * detail, dead jobs by fingerprint, /metrics, sign-in/out, and POST actions.
 *
 * Invariants: every route answers 401 until the request is signed in (only
 * the sign-in form itself is reachable, and it too answers 401); every POST
 * carries a valid CSRF token and a same-host Origin; every page is escaped
 * and sent with a strict Content-Security-Policy (no script at all); lists
 * never load payloads. It never logs or renders a credential.
 */
import { createHash } from "node:crypto";
import type http from "node:http";
import { Skipq } from "../../core/client.js";
import { SkipqError, ValidationError } from "../../core/errors.js";
import { defaultLogger, type Logger } from "../../core/logger.js";
import { assertInt, type Duration, NAME_PATTERN, toMs } from "../../core/validate.js";
import { Admin } from "../admin.js";
import {
  type AttemptLog,
  BULK_ACTIONS,
  type BulkAction,
  type FlowNode,
  JOB_STATUSES,
  type JobFilter,
  type JobRow,
  type JobStatus,
  type ListedJob,
  type QueueLimits,
  STATS_RANGES,
  type StatsPoint,
  type StatsRange,
} from "../adminTypes.js";
import { attemptLogText } from "../attemptLogs.js";
import type { HealthOptions } from "../health.js";
import { SkipqMetrics } from "../metrics.js";
import { LIVE_JS } from "./assets.js";
import {
  Authenticator,
  CredentialThrottle,
  clientAddress,
  type DashboardAuth,
  isLoopback,
  type Principal,
  parseCookies,
  resolveCredentials,
  roleOf,
  SESSION_COOKIE,
  ThrottledError,
  type ThrottleOptions,
} from "./auth.js";
import type { SafeHtml } from "./html.js";
import { LiveHub, type LiveInterest, workersWithInFlight } from "./live.js";
import { defaultRedactor, type Redactor } from "./redact.js";
import {
  auditPage,
  bulkConfirmPage,
  CSS,
  chartsBlock,
  cronPage,
  deadPage,
  FILTER_FIELDS,
  type JobsFilter,
  jobPage,
  jobsPage,
  messagePage,
  outboxPage,
  overviewPage,
  type PageContext,
  queuePage,
  signInPage,
  workersPage,
} from "./views.js";
import { type DashboardHandler, type FetchContext, type FetchHandler, toFetchHandler } from "./web.js";

export interface DashboardOptions {
  /** The client whose schema the dashboard shows. Default: one created from `connectionString` (and closed by `close()`). */
  skipq?: Skipq;
  /** Used when `skipq` is not given. Default: `DATABASE_URL`. */
  connectionString?: string;
  /** Schema, when `skipq` is not given. Default "skipq". */
  schema?: string;
  /**
   * Credentials. Default: from `SKIPQ_DASHBOARD_TOKEN`, `SKIPQ_DASHBOARD_USER` and
   * `SKIPQ_DASHBOARD_PASSWORD`; with none, `createDashboard` throws. `false` turns
   * authentication off, which is refused for any request arriving on a
   * non-loopback address.
   */
  auth?: DashboardAuth | false;
  /** Path prefix the dashboard is mounted under, e.g. "/skipq". Default "" (the root). */
  basePath?: string;
  /** Hides secrets in payloads, headers and errors before they are rendered. Default: keys that look like secrets; `false` shows everything. */
  redact?: Redactor | false;
  /** Metrics served at `/metrics`. Default: a new set reading this schema; `false` turns /metrics off. */
  metrics?: SkipqMetrics | false;
  /** Require sign-in for `/metrics` too (scrapers send `Authorization: Bearer <token>` or Basic). Default true. */
  metricsAuth?: boolean;
  /** Thresholds for the health warnings on the overview. */
  health?: HealthOptions;
  /** Shown in the header and the page titles. Default "skipq". */
  title?: string;
  /** How long a sign-in lasts at most, from sign-in. Default "12h". */
  sessionTtl?: Duration;
  /** A session not used for this long is refused (open pages that refresh themselves keep it alive). Default "1h". */
  sessionIdleTimeout?: Duration;
  /** Mark every cookie Secure, whatever the request says (TLS ends at a proxy in front). Default false. */
  secureCookies?: boolean;
  /**
   * The dashboard runs behind a reverse proxy that sets X-Forwarded-Proto,
   * X-Forwarded-For and (optionally) X-Forwarded-Host. Then a request that
   * reached the proxy over HTTPS gets Secure cookies, failed sign-ins are
   * counted per the address the proxy saw, and a POST's Origin may match the
   * forwarded host. Only set it when every request comes through that proxy:
   * otherwise a client could claim any address. Of a comma-separated header,
   * the last value (the one your proxy wrote) counts. Default false.
   */
  trustProxy?: boolean;
  /**
   * Keys session hashes and CSRF tokens. Give every replica the same one, and
   * keep it across restarts, so sessions stay valid. At least 32 characters.
   * Default: `SKIPQ_DASHBOARD_SESSION_SECRET`, else random per process (a
   * restart signs everyone out).
   */
  sessionSecret?: string;
  /**
   * Limits on failed credential checks (form, Basic, Bearer): per client
   * (default 10 a minute) and per user name across clients (default 30 a
   * minute, never applied to a client that signed in as that name before).
   */
  signInThrottle?: ThrottleOptions;
  /**
   * Live pages: one listener connection and one snapshot per `interval` for every open tab together
   * (server-sent events at `<base>/events`). `false`: no live feed; pages refresh themselves instead. Default `{ interval: "1s" }`.
   */
  live?: { interval?: Duration } | false;
  /** Where the environment credentials are read from. Default `process.env`. */
  env?: NodeJS.ProcessEnv;
  /** Default: the client's logger. */
  logger?: Logger;
}

export type { DashboardHandler, FetchContext, FetchHandler };

export interface Dashboard {
  /** The request handler. Requests outside `basePath` go to `next`, or get a 404. */
  handle: DashboardHandler;
  /**
   * The same as a fetch handler, `(Request, { remoteAddress }) => Promise<Response>`, for Hono, Next.js route
   * handlers and other web-standard servers. Pass the client's address: it keys the sign-in throttle.
   */
  fetch: FetchHandler;
  readonly metrics: SkipqMetrics | undefined;
  /** The live feed's hub (undefined when `live: false`): how many viewers, snapshots and statements. */
  readonly live: LiveHub | undefined;
  /** Closes the client the dashboard created (never one passed in). */
  close(): Promise<void>;
}

const PAGE_SIZE = 50;
const MAX_BODY = 16 * 1024;
const MAX_PAYLOAD_CHARS = 100_000;
const FLASH_COOKIE = "skipq_flash";
/** The origin redirect targets are resolved against; never contacted, only compared. */
const FIXED_ORIGIN = "http://dashboard.invalid";

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Builds the dashboard handler; see `DashboardOptions`. Throws when no credentials are configured and auth is not explicitly `false`. */
export function createDashboard(options: DashboardOptions = {}): Dashboard {
  const credentials = options.auth === false ? undefined : resolveCredentials(options.auth, options.env);
  if (options.auth !== false && !credentials) {
    throw new ValidationError(
      "the dashboard needs credentials: pass auth: { token } or { user, password }, or set SKIPQ_DASHBOARD_TOKEN (or SKIPQ_DASHBOARD_USER and SKIPQ_DASHBOARD_PASSWORD); auth: false is allowed on loopback only",
    );
  }
  const base = normaliseBase(options.basePath ?? "");
  const trustProxy = options.trustProxy === true;
  const sessionSecret =
    options.sessionSecret ?? ((options.env ?? process.env).SKIPQ_DASHBOARD_SESSION_SECRET || undefined);
  if (sessionSecret !== undefined && (typeof sessionSecret !== "string" || sessionSecret.length < 32))
    throw new ValidationError(
      "the dashboard session secret (sessionSecret or SKIPQ_DASHBOARD_SESSION_SECRET) must be at least 32 characters; generate one with `openssl rand -hex 32`",
    );
  const ownsClient = options.skipq === undefined;
  const skipq =
    options.skipq ??
    new Skipq({
      connectionString: options.connectionString ?? process.env.DATABASE_URL,
      poolSize: 4,
      ...(options.schema ? { schema: options.schema } : {}),
      ...(options.logger ? { logger: options.logger } : {}),
    });
  const logger = options.logger ?? skipq.logger ?? defaultLogger;
  const admin = new Admin(skipq);
  const metrics = options.metrics === false ? undefined : (options.metrics ?? new SkipqMetrics({ skipq, logger }));
  const metricsAuth = options.metricsAuth ?? true;
  const throttle = new CredentialThrottle({
    perClient: assertInt("signInThrottle.perClient", options.signInThrottle?.perClient ?? 10, 1, 1_000_000),
    perUser: assertInt("signInThrottle.perUser", options.signInThrottle?.perUser ?? 30, 1, 1_000_000),
    windowMs: toMs("signInThrottle.window", options.signInThrottle?.window ?? "1m", { allowZero: false }),
  });
  const auth = new Authenticator(
    credentials,
    skipq.store,
    {
      ttlMs: toMs("sessionTtl", options.sessionTtl ?? "12h", { allowZero: false }),
      idleMs: toMs("sessionIdleTimeout", options.sessionIdleTimeout ?? "1h", { allowZero: false }),
      secret: sessionSecret,
    },
    { throttle, clientOf: (req) => clientAddress(req, trustProxy), logger },
  );
  const redact: Redactor = options.redact === false ? (v) => v : (options.redact ?? defaultRedactor);
  const title = options.title ?? "skipq";
  const csp = `default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'sha256-${createHash("sha256").update(CSS).digest("base64")}'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;
  const live =
    options.live === false
      ? undefined
      : new LiveHub({
          admin,
          store: skipq.store,
          connectionString:
            skipq.connectionString ??
            (skipq.pool as { options?: { connectionString?: string } }).options?.connectionString,
          logger,
          intervalMs: toMs("live.interval", options.live?.interval ?? "1s", { allowZero: false }),
          errorOf: (job) => redactError(job.last_error, job),
        });
  const liveTopics = (...topics: string[]) => (live ? topics : undefined);

  const send = (
    res: http.ServerResponse,
    status: number,
    body: SafeHtml | string,
    headers: http.OutgoingHttpHeaders = {},
  ) => {
    const isHtml = typeof body !== "string";
    res.writeHead(status, {
      "content-type": isHtml ? "text/html; charset=utf-8" : "text/plain; charset=utf-8",
      "cache-control": "no-store",
      "x-content-type-options": "nosniff",
      // same-origin, not no-referrer: with no-referrer, browsers send "Origin: null" on form POSTs, which the origin check refuses.
      "referrer-policy": "same-origin",
      "x-frame-options": "DENY",
      "content-security-policy": csp,
      ...headers,
    });
    res.end(String(body));
  };

  const cookie = (req: http.IncomingMessage, name: string, value: string, maxAgeSeconds: number) => {
    const tls =
      options.secureCookies === true ||
      (req.socket as { encrypted?: boolean }).encrypted === true ||
      (trustProxy && forwarded(req, "x-forwarded-proto")?.toLowerCase() === "https");
    const secure = tls ? "; Secure" : "";
    return `${name}=${encodeURIComponent(value)}; Path=${base || "/"}; HttpOnly; SameSite=Strict; Max-Age=${maxAgeSeconds}${secure}`;
  };

  const redirect = (res: http.ServerResponse, location: string, cookies: string[] = []) =>
    send(res, 303, "see other\n", { location, ...(cookies.length ? { "set-cookie": cookies } : {}) });

  /**
   * A redirect target from a form or a link: only a path under the base path
   * on this origin. The value is resolved the way a browser would (dropping
   * TAB/CR/LF, reading "\\" as "/", resolving dot segments) against a fixed
   * origin, and only the resolved, re-serialised path and query are used, so
   * "/\t/evil.example" or "/.//evil.example" cannot become "//evil.example".
   */
  const safeBack = (value: string | null | undefined): string => {
    const home = `${base}/`;
    if (typeof value !== "string" || !value.startsWith("/") || value.length > 2048) return home;
    let target: URL;
    try {
      target = new URL(value, `${FIXED_ORIGIN}${home}`);
    } catch {
      return home;
    }
    const path = target.pathname;
    if (target.origin !== FIXED_ORIGIN || path.startsWith("//")) return home;
    if (path !== base && !path.startsWith(home)) return home;
    return `${path}${target.search}`;
  };

  const redactError = (text: string | null, job: { id: string; queue: string; kind: string }): string | null => {
    if (text === null) return null;
    const out = redact(text, { field: "error", job });
    return typeof out === "string" ? out : String(out);
  };

  async function route(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    rel: string,
    url: URL,
    principal: Principal,
  ): Promise<void> {
    const flashCookie = parseCookies(req.headers.cookie)[FLASH_COOKIE];
    const role = roleOf(principal.name);
    const ctx: PageContext = {
      base,
      title,
      canAct: role === "admin",
      role,
      csrf: principal.kind === "bearer" ? undefined : auth.csrfToken(principal),
      flash: flashCookie
        ? {
            kind: flashCookie.startsWith("err:") ? "error" : "flash",
            text: flashCookie.slice(flashCookie.indexOf(":") + 1),
          }
        : undefined,
    };
    const page = (status: number, body: SafeHtml) =>
      send(res, status, body, flashCookie ? { "set-cookie": cookie(req, FLASH_COOKIE, "", 0) } : {});

    if (req.method === "GET" || req.method === "HEAD") {
      if (rel === "/") {
        const [queues, stats, health, workers] = await Promise.all([
          admin.overview(),
          series(undefined, "1h"),
          admin.health(options.health).then(
            (r) => r,
            (e: unknown) => (e instanceof Error ? e : new Error(String(e))),
          ),
          workersInFlight(),
        ]);
        return page(
          200,
          overviewPage(
            { ...ctx, refresh: 10, live: liveTopics("queues", "workers") },
            {
              queues,
              stats,
              warnings: health instanceof Error ? [] : health.warnings,
              healthError: health instanceof Error ? health.message : undefined,
              workers,
            },
          ),
        );
      }
      const queueMatch = /^\/queues\/([^/]+)$/.exec(rel);
      if (queueMatch) {
        const queue = decodePathSegment(queueMatch[1] as string);
        if (queue === undefined || !NAME_PATTERN.test(queue)) throw new HttpError(400, "not a queue name");
        const range = rangeOf(url);
        const [overview, stats, limits, pausedKeys] = await Promise.all([
          admin.overview(),
          series(queue, range),
          admin.getQueueLimits(queue),
          admin.pausedKeys(queue),
        ]);
        return page(
          200,
          queuePage(
            { ...ctx, refresh: 30, live: liveTopics("queues") },
            {
              queue,
              overview: overview.find((q) => q.queue === queue),
              range,
              stats,
              limits: limits[0],
              pausedKeys,
              canAct: ctx.canAct !== false,
            },
          ),
        );
      }
      if (rel === "/charts") {
        const queue = param(url, "queue");
        if (queue && !NAME_PATTERN.test(queue)) throw new HttpError(400, "not a queue name");
        const range = rangeOf(url);
        return send(res, 200, chartsBlock(range, queue, await series(queue || undefined, range)));
      }
      if (rel === "/audit") {
        const before = param(url, "before");
        if (before && !/^[1-9][0-9]{0,18}$/.test(before)) throw new HttpError(400, "before must be an audit row id");
        const { rows } = await skipq.store.query(skipq.store.sql.dashboard.auditList, [before || null, 100]);
        return page(200, auditPage(ctx, rows, before, 100));
      }
      if (rel === "/outbox") {
        const sql = skipq.store.sql.dashboard;
        const [summary, keys] = await Promise.all([
          skipq.store.query(sql.outboxSummary),
          skipq.store.query(sql.outboxKeys, [200]),
        ]);
        const shown = keys.rows.map((k) => ({
          ...k,
          error: redactError(k.error, { id: "outbox", queue: k.topic, kind: "outbox" }),
        }));
        return page(200, outboxPage({ ...ctx, refresh: 10 }, summary.rows[0], shown));
      }
      if (rel === "/cron") {
        return page(200, cronPage({ ...ctx, refresh: 30 }, await admin.cronSchedules(), ctx.canAct !== false));
      }
      if (rel === "/workers") {
        return page(200, workersPage({ ...ctx, refresh: 5, live: liveTopics("workers") }, await workersInFlight()));
      }
      if (rel === "/events") {
        if (!live) throw new HttpError(404, "the live feed is off (live: false)");
        return live.serve(req, res, interestOf(url), principal.id);
      }
      if (rel === "/assets/live.js") {
        res.writeHead(200, {
          "content-type": "text/javascript; charset=utf-8",
          "cache-control": "private, max-age=300",
          "x-content-type-options": "nosniff",
        });
        res.end(LIVE_JS);
        return;
      }
      if (rel === "/jobs") {
        const filter = filterOf((name) => param(url, name));
        const before = param(url, "before");
        if (before && !/^[1-9][0-9]{0,18}$/.test(before)) throw new HttpError(400, "before must be a job id");
        // The live script's refreshes (marked by their header) share results for a second; a person's navigation never does.
        const jobs =
          req.headers["x-skipq-live"] === "1"
            ? await search(filter, before)
            : await admin.searchJobs(toJobFilter(filter), { ...(before ? { before } : {}), limit: PAGE_SIZE });
        return page(
          200,
          jobsPage(
            { ...ctx, refresh: before ? undefined : 10, live: liveTopics("jobs") },
            filter,
            { before, jobs, limit: PAGE_SIZE, canAct: ctx.canAct !== false },
            JOB_STATUSES,
            (j) => redactError(j.last_error, j),
          ),
        );
      }
      const detail = /^\/jobs\/([1-9][0-9]{0,18})$/.exec(rel);
      if (detail) {
        const job = await admin.getJob(detail[1] as string);
        if (!job) throw new HttpError(404, `job ${detail[1]} does not exist (it may have been pruned)`);
        const text = shownJson(() => redact(job.payload, { field: "payload", job }), "payload", job.id);
        const headers = job.headers
          ? shownJson(() => redact(job.headers, { field: "headers", job }), "headers", job.id)
          : null;
        const result =
          job.result === null ? null : shownJson(() => redact(job.result, { field: "result", job }), "result", job.id);
        const moving = job.status === "waiting" || job.status === "pending" || job.status === "running";
        // Workflows: parents and children, results redacted as payloads are, cut to one line.
        const flow = await admin.jobFlow(job.id, 200);
        const shownNode = (n: FlowNode) => {
          const text =
            n.result === null || n.result === undefined
              ? "—"
              : shownJson(
                  () => redact(n.result, { field: "payload", job: { id: n.id, queue: job.queue, kind: n.kind ?? "" } }),
                  "payload",
                  n.id,
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
            progress: job.progress === null ? null : JSON.stringify(job.progress),
            attemptLogs: attemptLogsShown(job, redact, redactError),
            ...(flow ? { flow: { parents: flow.parents.map(shownNode), children: flow.children.map(shownNode) } } : {}),
          }),
        );
      }
      if (rel === "/dead") {
        const queue = param(url, "queue");
        const groups = await admin.deadByFingerprint({ ...(queue ? { queue } : {}), limit: 200 });
        return page(
          200,
          deadPage(ctx, queue, groups, (g) =>
            redactError(g.example_error, { id: g.example_id, queue: g.queue, kind: g.kind }),
          ),
        );
      }
      if (rel === "/metrics" && metrics) return serveMetrics(res);
      throw new HttpError(404, "no such page");
    }

    if (req.method !== "POST") throw new HttpError(405, "only GET and POST are accepted");
    const form = await readForm(req);
    if (!auth.checkCsrf(principal, form.get("_csrf") ?? undefined))
      throw new HttpError(403, "the form's CSRF token is missing or stale; reload the page and try again");
    const back = safeBack(form.get("back"));
    const done = (text: string, kind: "ok" | "err" = "ok") =>
      redirect(res, back, [cookie(req, FLASH_COOKIE, `${kind}:${text}`, 30)]);
    /** Logs an action and writes its audit row (who, what, when, from where) before it is answered. */
    const record = (what: string, target: string | null, detail: Record<string, unknown> = {}) => {
      logger.info({ action: what, target, ...detail, by: principal.name }, `skipq dashboard: ${what}`);
      return audit(req, principal.name, what, target, detail);
    };
    if (role !== "admin" && rel !== "/logout")
      throw new HttpError(403, "this credential is read-only: sign in with the admin credential to act");

    if (rel === "/logout") {
      await auth.endSession(req);
      live?.endSession(principal.id);
      await record("sign-out", null);
      return redirect(res, `${base}/login`, [cookie(req, SESSION_COOKIE, "", 0)]);
    }
    if (rel === "/jobs/bulk") {
      const filter = filterOf((name) => formParam(form, name));
      const action = form.get("action") as BulkAction;
      if (!BULK_ACTIONS.includes(action)) throw new HttpError(400, `action must be one of ${BULK_ACTIONS.join(", ")}`);
      const scope = form.get("scope") === "selected" ? "selected" : "filter";
      const ids = form.getAll("ids");
      if (scope === "selected") {
        if (ids.length === 0) return done("Select at least one job first.", "err");
        if (ids.length > 500 || !ids.every((id) => /^[1-9][0-9]{0,18}$/.test(id)))
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
      return redirect(res, `${base}/jobs${query ? `?${query}` : ""}`, [
        cookie(req, FLASH_COOKIE, `ok:${action}: ${n} job(s) changed.`, 30),
      ]);
    }
    let m = /^\/jobs\/([1-9][0-9]{0,18})\/(retry|cancel)$/.exec(rel);
    if (m) {
      const [, id, verb] = m as unknown as [string, string, "retry" | "cancel"];
      try {
        if (verb === "retry") await admin.retryJob(id);
        else await admin.cancelJob(id);
      } catch (error) {
        if (error instanceof SkipqError) return done(error.message, "err");
        throw error;
      }
      await record(`job ${verb}`, `job ${id}`);
      return done(verb === "retry" ? `Job ${id} is pending again.` : `Job ${id} was cancelled.`);
    }
    m = /^\/cron\/([^/]+)\/(pause|resume|run)$/.exec(rel);
    if (m) {
      const name = decodePathSegment(m[1] as string);
      if (name === undefined || !NAME_PATTERN.test(name)) throw new HttpError(400, "not a schedule name");
      const verb = m[2] as "pause" | "resume" | "run";
      const found =
        verb === "pause"
          ? await admin.pauseCron(name)
          : verb === "resume"
            ? await admin.resumeCron(name)
            : await admin.runCronNow(name);
      if (!found) return done(`There is no schedule ${name}.`, "err");
      await record(`cron ${verb}`, `schedule ${name}`);
      return done(
        verb === "pause"
          ? `Schedule ${name} is paused: its ticks are skipped until it is resumed.`
          : verb === "resume"
            ? `Schedule ${name} runs again from its next tick.`
            : `Schedule ${name} runs once at the next pass of a scheduler that declares it.`,
      );
    }
    m = /^\/queues\/([^/]+)\/(limits|keys\/pause|keys\/resume)$/.exec(rel);
    if (m) {
      const queue = decodePathSegment(m[1] as string);
      if (queue === undefined || !NAME_PATTERN.test(queue)) throw new HttpError(400, "not a queue name");
      try {
        if (m[2] === "limits") {
          const limits = limitsOf(form);
          await admin.setQueueLimits(queue, limits);
          await record("queue limits", `queue ${queue}`, { limits });
          return done(`Limits of ${queue} saved.`);
        }
        const key = formParam(form, "key");
        if (m[2] === "keys/pause") {
          const until = await admin.pauseKey(queue, key || null, formParam(form, "for") || "10m");
          await record("key pause", `queue ${queue}`, { key: key || null, until: until.toISOString() });
          return done(`${key ? `Key ${key}` : "The whole queue"} of ${queue} is paused until ${until.toISOString()}.`);
        }
        const resumed = await admin.resumeKey(queue, key || null);
        await record("key resume", `queue ${queue}`, { key: key || null, resumed });
        return done(
          resumed ? `${key ? `Key ${key}` : "The queue-wide pause"} of ${queue} is resumed.` : "It was not paused.",
        );
      } catch (error) {
        if (error instanceof ValidationError) return done(error.message, "err");
        throw error;
      }
    }
    m = /^\/queues\/([^/]+)\/(pause|resume|retry-dead)$/.exec(rel);
    if (m) {
      const queue = decodePathSegment(m[1] as string);
      if (queue === undefined || !NAME_PATTERN.test(queue)) throw new HttpError(400, "not a queue name");
      await record(`queue ${m[2]}`, `queue ${queue}`);
      if (m[2] === "pause") {
        await admin.pauseQueue(queue);
        return done(`Queue ${queue} is paused: running jobs finish, nothing new is claimed.`);
      }
      if (m[2] === "resume") {
        await admin.resumeQueue(queue);
        return done(`Queue ${queue} is active again.`);
      }
      const n = await admin.retryDead(queue);
      return done(`${n} dead job(s) in ${queue} are pending again.`);
    }
    if (rel === "/outbox/retry") {
      const topic = formParam(form, "topic");
      const key = form.get("key") ?? "";
      if (!topic || key.length === 0 || key.length > 512)
        throw new HttpError(400, "a topic and a key (1–512 characters) are needed");
      const { rowCount } = await skipq.store.query(skipq.store.sql.dashboard.outboxRetryKey, [key, topic]);
      await record("outbox retry", `outbox ${topic}/${key}`.slice(0, 600), { events: rowCount ?? 0 });
      return done(`${rowCount ?? 0} event(s) of key ${key} are due now.`);
    }
    if (rel === "/dead/retry") {
      const fingerprint = form.get("fingerprint") ?? "";
      const queue = form.get("queue") || undefined;
      const n = await admin.retryDeadByFingerprint(fingerprint, queue);
      await record("retry dead by fingerprint", `fingerprint ${fingerprint}`, { queue: queue ?? null, jobs: n });
      return done(`${n} dead job(s) with fingerprint ${fingerprint} are pending again.`);
    }
    throw new HttpError(404, "no such action");
  }

  /**
   * Appends an audit row. Throws when it cannot be written (the schema lacks the table): an action nobody
   * could account for is answered as a failure, after it ran; the log line is written either way.
   */
  const audit = async (
    req: http.IncomingMessage,
    who: string,
    what: string,
    target: string | null,
    detail: Record<string, unknown>,
  ): Promise<void> => {
    const agent = req.headers["user-agent"];
    await skipq.store.query(skipq.store.sql.dashboard.auditInsert, [
      who,
      roleOf(who),
      what,
      target,
      Object.keys(detail).length > 0 ? JSON.stringify(detail) : null,
      clientAddress(req, trustProxy),
      typeof agent === "string" ? agent.slice(0, 200) : null,
    ]);
  };

  /** Chart series, shared by every viewer for 15 s (a page's charts reload every 30 s). */
  const seriesCache = new Map<string, { at: number; points: Promise<StatsPoint[]> }>();
  const series = (queue: string | undefined, range: StatsRange): Promise<StatsPoint[]> => {
    const key = `${queue ?? ""}\u0000${range}`;
    const hit = seriesCache.get(key);
    if (hit && Date.now() - hit.at < 15_000) return hit.points;
    if (seriesCache.size > 1000) seriesCache.clear();
    const points = admin.queueSeries(queue, range);
    seriesCache.set(key, { at: Date.now(), points });
    points.catch(() => seriesCache.delete(key));
    return points;
  };

  /** Explorer pages for the live script's refreshes, shared by every viewer of the same filter for 1 s. */
  const searchCache = new Map<string, { at: number; jobs: Promise<ListedJob[]> }>();
  const search = (filter: JobsFilter, before: string): Promise<ListedJob[]> => {
    const key = JSON.stringify([filter, before]);
    const hit = searchCache.get(key);
    if (hit && Date.now() - hit.at < 1000) return hit.jobs;
    if (searchCache.size > 1000) searchCache.clear();
    const jobs = admin.searchJobs(toJobFilter(filter), { ...(before ? { before } : {}), limit: PAGE_SIZE });
    searchCache.set(key, { at: Date.now(), jobs });
    jobs.catch(() => searchCache.delete(key));
    return jobs;
  };

  const workersInFlight = () => workersWithInFlight(admin, skipq.store);

  function serveMetrics(res: http.ServerResponse): void {
    const m = metrics as SkipqMetrics;
    m.metrics().then(
      (text) => res.writeHead(200, { "content-type": m.contentType, "cache-control": "no-store" }).end(text),
      (error) => {
        logger.warn({ err: error }, "skipq dashboard: /metrics failed");
        send(res, 500, "metrics failed\n");
      },
    );
  }

  async function signIn(req: http.IncomingMessage, res: http.ServerResponse, ctx: PageContext): Promise<void> {
    const form = await readForm(req);
    const next = safeBack(form.get("next"));
    const show = (status: number, message: string) =>
      send(res, status, signInPage(ctx, { token: auth.acceptsToken, password: auth.acceptsPassword, next, message }));
    const token = form.get("token");
    let name: string | undefined;
    try {
      name = auth.check(
        req,
        "form",
        token ? { token } : { user: form.get("user") ?? "", password: form.get("password") ?? "" },
      );
    } catch (error) {
      if (!(error instanceof ThrottledError)) throw error;
      res.setHeader("retry-after", String(error.retryAfterSeconds));
      return show(429, `Too many failed sign-ins from here; wait ${error.retryAfterSeconds} s and try again.`);
    }
    if (name === undefined) return show(401, "Wrong credentials.");
    const session = await auth.startSession(req, name);
    logger.info({ by: name }, "skipq dashboard: signed in");
    await audit(req, name, "sign-in", null, {});
    return redirect(res, next, [cookie(req, SESSION_COOKIE, session, Math.floor(auth.sessionTtlSeconds))]);
  }

  const handle: DashboardHandler = (req, res, next) => {
    const full = (req as { originalUrl?: string }).originalUrl ?? req.url ?? "/";
    let url: URL;
    try {
      url = new URL(full, FIXED_ORIGIN);
    } catch {
      send(res, 400, "bad request\n");
      return;
    }
    const path = url.pathname;
    if (base && path !== base && !path.startsWith(`${base}/`)) {
      if (next) next();
      else send(res, 404, "not found\n");
      return;
    }
    const rel = path.slice(base.length) || "/";
    const ctx: PageContext = { base, title, csrf: undefined, flash: undefined };

    // Who the request turned out to be, once known: an error page is HTML only for a signed-in GET.
    let signedIn: Principal | undefined;
    void (async () => {
      if (!auth.enabled && !isLoopback(req.socket.localAddress)) {
        throw new HttpError(
          403,
          "this dashboard runs without authentication, so it answers on loopback only; configure credentials to expose it",
        );
      }
      if (req.method === "POST") {
        const origin = req.headers.origin;
        const host = safeHost(origin ?? "");
        const hosts = [req.headers.host, trustProxy ? forwarded(req, "x-forwarded-host") : undefined];
        if (origin !== undefined && origin !== "null" && (host === undefined || !hosts.includes(host)))
          throw new HttpError(403, "cross-origin POSTs are refused");
        if (origin === "null") throw new HttpError(403, "cross-origin POSTs are refused");
      }
      if (rel === "/login") {
        if (req.method === "POST") return signIn(req, res, ctx);
        if (await auth.authenticate(req)) return redirect(res, `${base}/`);
        return send(
          res,
          401,
          signInPage(ctx, {
            token: auth.acceptsToken,
            password: auth.acceptsPassword,
            next: safeBack(url.searchParams.get("next")),
          }),
        );
      }
      if (rel === "/metrics" && metrics && !metricsAuth && req.method === "GET") return serveMetrics(res);
      const principal = await auth.authenticate(req);
      signedIn = principal;
      if (!principal) {
        const wantsPage = req.method === "GET" && rel !== "/metrics";
        if (!wantsPage)
          return send(res, 401, "sign in first: send Authorization: Bearer <token> or Basic credentials\n", {
            "www-authenticate": 'Bearer realm="skipq"',
          });
        return send(
          res,
          401,
          signInPage(ctx, {
            token: auth.acceptsToken,
            password: auth.acceptsPassword,
            next: safeBack(`${path}${url.search}`),
          }),
          { "www-authenticate": 'Bearer realm="skipq"' },
        );
      }
      await route(req, res, rel, url, principal);
    })().catch((error: unknown) => {
      if (res.headersSent) {
        res.destroy();
        return;
      }
      if (error instanceof ThrottledError) {
        send(res, 429, `${error.message}\n`, { "retry-after": String(error.retryAfterSeconds) });
        return;
      }
      const status =
        error instanceof HttpError
          ? error.status
          : error instanceof SkipqError
            ? error.code === "SKIPQ_NOT_FOUND"
              ? 404
              : error.code === "SKIPQ_INVALID_ARGUMENT"
                ? 400
                : 500
            : 500;
      if (status === 500) logger.error({ err: error, path }, "skipq dashboard: request failed");
      const text = status === 500 ? "Something went wrong; the server log has the details." : (error as Error).message;
      if (req.method === "GET" && signedIn) send(res, status, messagePage(ctx, `Error ${status}`, text));
      else send(res, status, `${text}\n`);
    });
  };

  return {
    handle,
    fetch: toFetchHandler(handle),
    metrics,
    live,
    async close() {
      await live?.close();
      if (ownsClient) await skipq.close();
    },
  };
}

function normaliseBase(basePath: string): string {
  if (basePath === "" || basePath === "/") return "";
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(basePath) || basePath.includes("//"))
    throw new ValidationError(`basePath ${JSON.stringify(basePath)} must be a path like "/skipq"`);
  return basePath.replace(/\/+$/, "");
}

/**
 * A redacted value pretty-printed for the page. A payload inserted by plain SQL
 * can nest deeper than JSON.stringify (or a recursive redactor) can go: that
 * RangeError becomes a note on the page, never a 500 and never unredacted text.
 */
function shownJson(redacted: () => unknown, field: "payload" | "headers" | "result", id: string): string {
  try {
    return JSON.stringify(redacted(), null, 2) ?? "null";
  } catch (error) {
    if (!(error instanceof RangeError)) throw error;
    return `(the ${field} is nested too deeply to show here; read it with SQL: SELECT ${field} FROM <schema>.jobs WHERE id = ${id})`;
  }
}

/** A limits form: an empty field removes that limit; numbers and the window are validated by Admin.setQueueLimits. */
function limitsOf(form: URLSearchParams): QueueLimits {
  const int = (name: string): number | null => {
    const text = formParam(form, name);
    if (text === "") return null;
    if (!/^[0-9]{1,7}$/.test(text))
      throw new ValidationError(`${name} must be a whole number from 1 to 1000000, or empty for no limit`);
    return Number(text);
  };
  const rateLimit = int("rateLimit");
  const windowText = formParam(form, "rateWindow");
  if ((rateLimit === null) !== (windowText === ""))
    throw new ValidationError("a rate limit needs both a number of starts and a window (e.g. 100 per 1m), or neither");
  return {
    concurrency: int("concurrency"),
    keyConcurrency: int("keyConcurrency"),
    rate:
      rateLimit === null
        ? null
        : { limit: rateLimit, window: windowText, perKey: formParam(form, "ratePerKey") === "true" },
  };
}

/** The explorer's filter as typed, from a URL or a form (each field at most 200 characters). */
function filterOf(get: (name: string) => string): JobsFilter {
  const filter = {} as JobsFilter;
  for (const [key, name] of Object.entries(FILTER_FIELDS) as Array<[keyof JobsFilter, string]>) filter[key] = get(name);
  if (filter.status && !JOB_STATUSES.includes(filter.status as JobStatus))
    throw new HttpError(400, `status must be one of ${JOB_STATUSES.join(", ")}`);
  return filter;
}

/** A "from"/"to" field: an ISO time, read as UTC when it names no zone (what a datetime-local input sends). */
function utcTime(name: string, text: string): Date | undefined {
  if (!text) return undefined;
  const local = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?)?$/.test(text);
  const d = new Date(local ? (text.includes("T") ? `${text}Z` : `${text}T00:00Z`) : text);
  if (!/^\d{4}-/.test(text) || Number.isNaN(d.getTime()))
    throw new HttpError(400, `${name} must be a time like 2026-01-31T09:00 (UTC) or 2026-01-31T09:00:00+01:00`);
  return d;
}

/** The typed filter as Admin's, validated by it (bad names, paths and values are 400s). */
function toJobFilter(f: JobsFilter): JobFilter {
  return {
    ...(f.status ? { status: f.status as JobStatus } : {}),
    ...(f.queue ? { queue: f.queue } : {}),
    ...(f.kind ? { kind: f.kind } : {}),
    ...(f.search ? { search: f.search } : {}),
    ...(f.from ? { createdFrom: utcTime("from", f.from) } : {}),
    ...(f.to ? { createdTo: utcTime("to", f.to) } : {}),
    ...(f.path ? { payloadPath: f.path } : {}),
    ...(f.value ? { payloadValue: f.value } : {}),
  };
}

function formParam(form: URLSearchParams, name: string): string {
  const value = form.get(name) ?? "";
  if (value.length > 200) throw new HttpError(400, `${name} is longer than 200 characters`);
  return value.trim();
}

function rangeOf(url: URL): StatsRange {
  const range = url.searchParams.get("range") || "1h";
  if (!(range in STATS_RANGES))
    throw new HttpError(400, `range must be one of ${Object.keys(STATS_RANGES).join(", ")}`);
  return range as StatsRange;
}

/** What an event stream asks for: `topics` (queues, workers) and `jobs` (ids, at most 200). */
function interestOf(url: URL): LiveInterest {
  const topics = (url.searchParams.get("topics") ?? "").split(",");
  const jobs = (url.searchParams.get("jobs") ?? "").split(",").filter((id) => id !== "");
  if (jobs.length > 200) throw new HttpError(400, "jobs: at most 200 ids");
  for (const id of jobs)
    if (!/^[1-9][0-9]{0,18}$/.test(id)) throw new HttpError(400, `jobs: ${id.slice(0, 30)} is not a job id`);
  return { queues: topics.includes("queues"), workers: topics.includes("workers"), jobs };
}

/** A job's attempt logs as text, each line redacted like a payload and each error like last_error. */
function attemptLogsShown(
  job: JobRow,
  redact: Redactor,
  redactError: (text: string | null, job: JobRow) => string | null,
): string[] {
  return (job.attempt_logs ?? []).map((log) => {
    try {
      const lines = redact(log.lines, { field: "logs", job }) as AttemptLog["lines"];
      return attemptLogText({ ...log, lines, error: redactError(log.error, job) });
    } catch {
      return `attempt ${log.attempt}: (its log cannot be shown here; read attempt_logs with SQL)`;
    }
  });
}

function param(url: URL, name: string): string {
  const value = url.searchParams.get(name) ?? "";
  if (value.length > 200) throw new HttpError(400, `${name} is longer than 200 characters`);
  return value.trim();
}

/** A percent-decoded path segment, or undefined when its escapes are malformed ("%", "%ZZ", "%C0%80"). */
function decodePathSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** The last value of a proxy header (the one the proxy in front wrote), trimmed; undefined when absent. */
function forwarded(req: http.IncomingMessage, name: "x-forwarded-proto" | "x-forwarded-host"): string | undefined {
  const value = req.headers[name];
  const last = (Array.isArray(value) ? value.join(",") : (value ?? "")).split(",").at(-1)?.trim();
  return last || undefined;
}

function safeHost(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

function readForm(req: http.IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    const type = req.headers["content-type"] ?? "";
    if (!type.startsWith("application/x-www-form-urlencoded")) {
      reject(new HttpError(415, "send the form as application/x-www-form-urlencoded"));
      req.resume();
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new HttpError(413, "form too large"));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(new URLSearchParams(Buffer.concat(chunks).toString("utf8"))));
    req.on("error", reject);
  });
}
