/**
 * The dashboard as a Node request handler, mountable into any `http` server
 * (or Express/Connect, with `basePath`): `createDashboard` wires the client,
 * Admin, sign-in and the live feed, then gates every request (Host, origin,
 * sign-in, CSRF, role, as its entry in the route table declares) before
 * handing it to the route's handler. The table is the route modules'
 * (`queueRoutes`, `jobRoutes`, `systemRoutes`) and this file's own:
 * sign-in/out, /events, /metrics and the live script.
 *
 * Invariants: every route answers 401 until the request is signed in (only
 * the sign-in form itself is reachable, and it too answers 401); with
 * `auth: false`, only a loopback peer whose Host names loopback on this port
 * (or an allowed host) is answered, anything else 403; every POST
 * carries a valid CSRF token and a same-host Origin; every page is escaped
 * and sent with a strict Content-Security-Policy (scripts from 'self' only —
 * the live script, served here — nothing inline, the stylesheet by hash); lists
 * never load payloads. It never logs or renders a credential.
 */
import type http from "node:http";
import { ValidationError } from "../../core/errors.js";
import { defaultLogger } from "../../core/logger.js";
import { assertInt, toMs } from "../../core/validate.js";
import { DashboardStore } from "../../db/dashboardStore.js";
import { LiveStore } from "../../db/liveStore.js";
import { Skipq } from "../../skipq.js";
import { Admin } from "../admin.js";
import type { ReplicaStatus } from "../adminTypes.js";
import { SkipqMetrics } from "../metrics.js";
import {
  Authenticator,
  CredentialThrottle,
  clientAddress,
  type Principal,
  parseCookies,
  resolveCredentials,
  roleOf,
} from "./auth.js";
import { CSS_SHA256, LIVE_JS } from "./clientAssets.js";
import { answerFailure, checkedAllowedHosts, refuseUnsafe } from "./gate.js";
import type { SafeHtml } from "./html.js";
import { jobRoutes, sharedSearch, sharedStateCounts } from "./jobRoutes.js";
import { type PageContext, signInPage } from "./layout.js";
import { LiveHub, workersWithInFlight } from "./live.js";
import type { Dashboard, DashboardOptions } from "./options.js";
import { queueRoutes, sharedSeries } from "./queueRoutes.js";
import { defaultRedactor, type Redactor } from "./redact.js";
import { FLASH_COOKIE, HttpError, interestOf, normaliseBase, readForm } from "./request.js";
import { FIXED_ORIGIN, responders } from "./respond.js";
import {
  type ActionRequest,
  type DashboardRuntime,
  findRoute,
  type PageRequest,
  pageRoute,
  type Route,
} from "./routes.js";
import { signInRoutes } from "./signInRoutes.js";
import { systemRoutes } from "./systemRoutes.js";
import { type DashboardHandler, type FetchContext, type FetchHandler, toFetchHandler } from "./web.js";

export type { Dashboard, DashboardHandler, DashboardOptions, FetchContext, FetchHandler };

/** Builds the dashboard handler; see `DashboardOptions`. Throws when no credentials are configured and auth is not explicitly `false`. */
export function createDashboard(options: DashboardOptions = {}): Dashboard {
  const credentials = options.auth === false ? undefined : resolveCredentials(options.auth, options.env);
  if (options.auth !== false && !credentials) {
    throw new ValidationError(
      "the dashboard needs credentials: pass auth: { token } or { user, password }, or set SKIPQ_DASHBOARD_TOKEN (or SKIPQ_DASHBOARD_USER and SKIPQ_DASHBOARD_PASSWORD); auth: false is allowed on loopback only",
    );
  }
  const allowedHosts = checkedAllowedHosts(options);
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
      readConnectionString:
        options.readConnectionString ?? ((options.env ?? process.env).SKIPQ_READ_DATABASE_URL || undefined),
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
  const statements = new DashboardStore(skipq.store);
  const auth = new Authenticator(
    credentials,
    statements,
    {
      ttlMs: toMs("sessionTtl", options.sessionTtl ?? "12h", { allowZero: false }),
      idleMs: toMs("sessionIdleTimeout", options.sessionIdleTimeout ?? "1h", { allowZero: false }),
      secret: sessionSecret,
    },
    { throttle, clientOf: (req) => clientAddress(req, trustProxy), logger },
  );
  const redact: Redactor = options.redact === false ? (v) => v : (options.redact ?? defaultRedactor);
  const title = options.title ?? "skipq";
  const csp = `default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'sha256-${CSS_SHA256}'; img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'`;
  const live =
    options.live === false
      ? undefined
      : new LiveHub({
          admin,
          // Its reads follow the pages' (a standby, when configured); its LISTEN stays on the primary.
          store: skipq.readStore,
          connectionString:
            skipq.connectionString ??
            (skipq.pool as { options?: { connectionString?: string } }).options?.connectionString,
          logger,
          intervalMs: toMs("live.interval", options.live?.interval ?? "1s", { allowZero: false }),
          errorOf: (job) => redactError(job.last_error, job),
        });
  const liveTopics = (...topics: string[]) => (live ? topics : undefined);

  const { send, cookie, redirect, safeBack } = responders({
    base,
    csp,
    secureCookies: options.secureCookies === true,
    trustProxy,
  });

  const redactError = (text: string | null, job: { id: string; queue: string; kind: string }): string | null => {
    if (text === null) return null;
    const out = redact(text, { field: "error", job });
    return typeof out === "string" ? out : String(out);
  };
  /** Answers a signed-in request from the route table. */
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
      replica: req.method === "GET" ? await replicaStatus() : undefined,
      csrf: principal.kind === "bearer" ? undefined : auth.csrfToken(principal),
      flash: flashCookie
        ? {
            kind: flashCookie.startsWith("err:") ? "error" : "flash",
            text: flashCookie.slice(flashCookie.indexOf(":") + 1),
          }
        : undefined,
    };
    const page = (status: number, body: SafeHtml): true => {
      send(res, status, body, flashCookie ? { "set-cookie": cookie(req, FLASH_COOKIE, "", 0) } : {});
      return true;
    };

    if (req.method === "GET" || req.method === "HEAD") {
      const found = findRoute(table, "page", rel);
      if (!found) throw new HttpError(404, "no such page");
      const r: PageRequest = { req, res, rel, url, principal, ctx, page };
      await found.route.handle(runtime, r, found.params);
      return;
    }

    if (req.method !== "POST") throw new HttpError(405, "only GET and POST are accepted");
    const form = await readForm(req);
    if (!auth.checkCsrf(principal, form.get("_csrf") ?? undefined))
      throw new HttpError(403, "the form's CSRF token is missing or stale; reload the page and try again");
    const found = findRoute(table, "action", rel);
    // A POST no route answers is refused to a viewer as an action would be, before it is a 404.
    if ((found?.route.role ?? "admin") === "admin" && role !== "admin")
      throw new HttpError(403, "this credential is read-only: sign in with the admin credential to act");
    if (!found) throw new HttpError(404, "no such action");
    const back = safeBack(form.get("back"));
    const r: ActionRequest = {
      req,
      res,
      rel,
      form,
      principal,
      ctx,
      page,
      done: (text, kind = "ok") => {
        redirect(res, back, [cookie(req, FLASH_COOKIE, `${kind}:${text}`, 30)]);
        return true;
      },
      redirect: (location, cookies) => {
        redirect(res, location, cookies);
        return true;
      },
      /** Logs an action and writes its audit row (who, what, when, from where) before it is answered. */
      record: (what, target, detail = {}) => {
        logger.info({ action: what, target, ...detail, by: principal.name }, `skipq dashboard: ${what}`);
        return audit(req, principal.name, what, target, detail);
      },
    };
    await found.route.handle(runtime, r, found.params);
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
    await statements.auditInsert({
      principal: who,
      role: roleOf(who),
      action: what,
      target,
      detail: Object.keys(detail).length > 0 ? JSON.stringify(detail) : null,
      client: clientAddress(req, trustProxy),
      userAgent: typeof agent === "string" ? agent.slice(0, 200) : null,
    });
  };

  const series = sharedSeries(admin);
  const search = sharedSearch(admin);
  const stateCounts = sharedStateCounts(new DashboardStore(skipq.readStore));
  const liveReads = new LiveStore(skipq.readStore);
  const workersInFlight = () => workersWithInFlight(admin, liveReads);
  // Where the pages read from, for the header: read at most every 2 s, whatever the page rate.
  let replica: { at: number; status: Promise<ReplicaStatus | "failed" | undefined> } | undefined;
  const replicaStatus = () => {
    if (skipq.readStore === skipq.store) return Promise.resolve(undefined);
    if (!replica || performance.now() - replica.at > 2000) {
      replica = { at: performance.now(), status: admin.replica().catch(() => "failed" as const) };
    }
    return replica.status;
  };

  const runtime: DashboardRuntime = {
    base,
    skipq,
    admin,
    statements,
    logger,
    health: options.health,
    redact,
    redactError,
    liveTopics,
    series,
    search,
    stateCounts,
    workersInFlight,
    send,
    cookie,
  };

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

  /** This file's routes (the live feed and its script, /metrics) and the sign-in routes. */
  const ownRoutes: Route[] = [
    ...signInRoutes({ base, auth, live, logger, audit, send, cookie, redirect, safeBack }),
    pageRoute("/events", async (_, { req, res, url, principal }) => {
      if (!live) throw new HttpError(404, "the live feed is off (live: false)");
      live.serve(req, res, interestOf(url), principal.id);
    }),
    pageRoute("/assets/live.js", async (_, { res }) => {
      res.writeHead(200, {
        "content-type": "text/javascript; charset=utf-8",
        "cache-control": "private, max-age=300",
        "x-content-type-options": "nosniff",
      });
      res.end(LIVE_JS);
    }),
  ];
  if (metrics) {
    // Behind sign-in unless metricsAuth is false.
    ownRoutes.push(
      metricsAuth
        ? pageRoute("/metrics", async (_, { res }) => serveMetrics(res))
        : { kind: "open", method: "GET", path: "/metrics", handle: ({ res }) => serveMetrics(res) },
    );
  }
  const table: Route[] = [...ownRoutes, ...queueRoutes, ...systemRoutes, ...jobRoutes];

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
      refuseUnsafe(req, auth.enabled, allowedHosts, trustProxy);
      const open = findRoute(table, "open", rel, req.method);
      if (open) return open.route.handle({ req, res, url, ctx });
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
    })().catch((error: unknown) => answerFailure(req, res, error, { path, signedIn, ctx, logger, send }));
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
