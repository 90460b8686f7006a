/**
 * The dashboard as a Node request handler, mountable into any `http` server
 * (or Express/Connect, with `basePath`): `createDashboard` wires the client,
 * Admin, sign-in and the live feed, then gates every request (origin,
 * sign-in, CSRF, role) before handing it to a route module (`queueRoutes`,
 * `jobRoutes`, `systemRoutes`). Sign-in/out, /events, /metrics and the
 * live script are answered here.
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
import { createHash } from "node:crypto";
import type http from "node:http";
import { SkipqError, ValidationError } from "../../core/errors.js";
import { defaultLogger } from "../../core/logger.js";
import { assertInt, toMs } from "../../core/validate.js";
import { Skipq } from "../../skipq.js";
import { Admin } from "../admin.js";
import type { ReplicaStatus } from "../adminTypes.js";
import { SkipqMetrics } from "../metrics.js";
import { LIVE_JS } from "./assets.js";
import {
  Authenticator,
  CredentialThrottle,
  clientAddress,
  hostAnswered,
  hostParts,
  isLoopback,
  type Principal,
  parseCookies,
  resolveCredentials,
  roleOf,
  SESSION_COOKIE,
  ThrottledError,
} from "./auth.js";
import type { SafeHtml } from "./html.js";
import { jobActions, jobPages, sharedSearch, sharedStateCounts } from "./jobRoutes.js";
import { CSS, type PageContext, signInPage } from "./layout.js";
import { LiveHub, workersWithInFlight } from "./live.js";
import type { Dashboard, DashboardOptions } from "./options.js";
import { queueActions, queuePages, sharedSeries } from "./queueRoutes.js";
import { defaultRedactor, type Redactor } from "./redact.js";
import { FLASH_COOKIE, forwarded, HttpError, interestOf, normaliseBase, readForm, safeHost } from "./request.js";
import { FIXED_ORIGIN, responders } from "./respond.js";
import type { ActionRequest, DashboardRuntime, PageRequest } from "./routes.js";
import { systemActions, systemPages } from "./systemRoutes.js";
import { messagePage } from "./views.js";
import { type DashboardHandler, type FetchContext, type FetchHandler, toFetchHandler } from "./web.js";

export type { Dashboard, DashboardHandler, DashboardOptions, FetchContext, FetchHandler };

/** `allowedHosts`, validated: Host names (optionally with a port); only meaningful without authentication. */
function checkedAllowedHosts(options: DashboardOptions): string[] {
  const hosts = options.allowedHosts;
  if (hosts === undefined) return [];
  if (!Array.isArray(hosts) || hosts.some((h) => typeof h !== "string" || hostParts(h) === undefined))
    throw new ValidationError(
      'allowedHosts must be an array of host names as a Host header carries them, e.g. ["dev.internal", "dev.internal:8080"]',
    );
  if (options.auth !== false)
    throw new ValidationError(
      "allowedHosts applies to a dashboard with auth: false only (with credentials every Host is answered); remove it",
    );
  return hosts;
}

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
      const r: PageRequest = { req, res, rel, url, ctx, page };
      if ((await queuePages(runtime, r)) || (await systemPages(runtime, r)) || (await jobPages(runtime, r))) return;
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
    const r: ActionRequest = {
      req,
      res,
      rel,
      form,
      ctx,
      page,
      done: (text, kind) => {
        done(text, kind);
        return true;
      },
      redirect: (location, cookies) => {
        redirect(res, location, cookies);
        return true;
      },
      record,
    };
    if ((await jobActions(runtime, r)) || (await queueActions(runtime, r)) || (await systemActions(runtime, r))) return;
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

  const series = sharedSeries(admin);
  const search = sharedSearch(admin);
  const stateCounts = sharedStateCounts(skipq.readStore);
  const workersInFlight = () => workersWithInFlight(admin, skipq.readStore);
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
      // Without authentication, only this machine may be answered: the connection's peer must be loopback
      // (never a header: a fetch mount passes the peer explicitly), and the Host must name loopback on this
      // server's port (or an allowed host), or a DNS-rebinding page could read the CSRF token and act.
      if (!auth.enabled) {
        if (!isLoopback(req.socket.remoteAddress))
          throw new HttpError(
            403,
            "this dashboard runs without authentication, so it answers clients on loopback only; configure credentials to expose it",
          );
        const tls = (req.socket as { encrypted?: boolean }).encrypted === true;
        if (!hostAnswered(req.headers.host, req.socket.localPort, tls, allowedHosts))
          throw new HttpError(
            403,
            "this dashboard runs without authentication, so it answers only requests whose Host is a loopback name or address with its port (a page on another name could be a DNS-rebinding attack); open it at http://127.0.0.1:<port>/, or list the name in allowedHosts",
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
      // The client hung up mid-request (Node rejects the body read with ECONNRESET "aborted"): nobody is
      // left to answer, and it is not the server's fault.
      if (req.socket.destroyed || (error as NodeJS.ErrnoException).code === "ECONNRESET") {
        logger.debug({ path }, "skipq dashboard: client closed the connection mid-request");
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
