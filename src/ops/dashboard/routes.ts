/**
 * What the dashboard's route modules share: the runtime `createDashboard`
 * wires once (client, Admin, redaction, caches, response helpers), the
 * request being routed, and the route table's entries (method and path
 * pattern → handler, with what the route needs: sign-in, CSRF, role). A route
 * module exports its table and only answers requests through these; it never
 * reads options or credentials itself.
 */
import type http from "node:http";
import type { Logger } from "../../core/logger.js";
import type { DashboardStore } from "../../db/dashboardStore.js";
import type { Skipq } from "../../skipq.js";
import type { Admin } from "../admin.js";
import type { ListedJob, StatsPoint, StatsRange } from "../adminTypes.js";
import type { HealthOptions } from "../health.js";
import type { Principal } from "./auth.js";
import type { SafeHtml } from "./html.js";
import type { JobsFilter, StateCounts } from "./jobsView.js";
import type { PageContext } from "./layout.js";
import type { LiveWorker } from "./live.js";
import type { Redactor } from "./redact.js";

/** The pieces of one dashboard that every route uses. */
export interface DashboardRuntime {
  /** The normalised base path ("" at the root). */
  base: string;
  skipq: Skipq;
  admin: Admin;
  /** The dashboard's own statements (sessions, audit, outbox page), over the client's store (the primary). */
  statements: DashboardStore;
  logger: Logger;
  /** Thresholds for the overview's health warnings. */
  health: HealthOptions | undefined;
  redact: Redactor;
  /** An error text redacted as the job's error field; null stays null. */
  redactError(text: string | null, job: { id: string; queue: string; kind: string }): string | null;
  /** The live topics a page subscribes to, or undefined when the live feed is off. */
  liveTopics(...topics: string[]): string[] | undefined;
  /** Chart series, cached for every viewer. */
  series(queue: string | undefined, range: StatsRange): Promise<StatsPoint[]>;
  /** An explorer page for the live script's refreshes, cached for every viewer. */
  search(filter: JobsFilter, before: string): Promise<ListedJob[]>;
  /** The explorer's state tabs for a queue and kind ("": any); `shared`: a result under a second old will do. */
  stateCounts(queue: string, kind: string, shared: boolean): Promise<StateCounts>;
  workersInFlight(): Promise<LiveWorker[]>;
  /** Answers with the dashboard's security headers. */
  send(res: http.ServerResponse, status: number, body: SafeHtml | string, headers?: http.OutgoingHttpHeaders): void;
  /** A Set-Cookie value under the base path (Secure when the request came over TLS). */
  cookie(req: http.IncomingMessage, name: string, value: string, maxAgeSeconds: number): string;
}

/** A signed-in GET (or HEAD) being routed. */
export interface PageRequest {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  /** The path below the base path. */
  rel: string;
  url: URL;
  principal: Principal;
  ctx: PageContext;
  /** Answers with a page, clearing a flash cookie that was shown. */
  page(status: number, body: SafeHtml): true;
}

/** A signed-in POST, its CSRF token checked (and its role, as its route declares), being routed. */
export interface ActionRequest {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  rel: string;
  form: URLSearchParams;
  principal: Principal;
  ctx: PageContext;
  page(status: number, body: SafeHtml): true;
  /** Redirects back to the form's page with a flash message. */
  done(text: string, kind?: "ok" | "err"): true;
  /** Redirects to `location`, setting `cookies`. */
  redirect(location: string, cookies?: string[]): true;
  /** Logs an action and writes its audit row (who, what, when, from where) before it is answered. */
  record(what: string, target: string | null, detail?: Record<string, unknown>): Promise<void>;
}

/** A route's path: the exact path below the base path, or a pattern whose groups are the handler's `params`. */
export type RoutePath = string | RegExp;

/**
 * One entry of the route table. What a route needs is declared by its kind: a `page` answers a signed-in GET
 * (or HEAD) of any role; an `action` answers a signed-in POST whose CSRF token was checked, by an admin unless
 * its `role` says "viewer"; an `open` route is answered before sign-in (no session, no CSRF token), after the
 * Host and Origin checks every request passes.
 */
export type Route =
  | { kind: "page"; path: RoutePath; handle(rt: DashboardRuntime, r: PageRequest, params: string[]): Promise<unknown> }
  | {
      kind: "action";
      path: RoutePath;
      role: "admin" | "viewer";
      handle(rt: DashboardRuntime, r: ActionRequest, params: string[]): Promise<unknown>;
    }
  | { kind: "open"; method: "GET" | "POST"; path: RoutePath; handle(r: OpenRequest): unknown };

/** A request answered before sign-in. */
export interface OpenRequest {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  url: URL;
  ctx: PageContext;
}

/** A page route. */
export function pageRoute(
  path: RoutePath,
  handle: (rt: DashboardRuntime, r: PageRequest, params: string[]) => Promise<unknown>,
): Route {
  return { kind: "page", path, handle };
}

/** An action route (admin only unless `role` is "viewer"). */
export function actionRoute(
  path: RoutePath,
  handle: (rt: DashboardRuntime, r: ActionRequest, params: string[]) => Promise<unknown>,
  role: "admin" | "viewer" = "admin",
): Route {
  return { kind: "action", path, role, handle };
}

/** The first route of `kind` (and, for open routes, `method`; GET answers HEAD too) whose path matches `rel`, with its params. */
export function findRoute<K extends Route["kind"]>(
  table: readonly Route[],
  kind: K,
  rel: string,
  method?: string,
): { route: Extract<Route, { kind: K }>; params: string[] } | undefined {
  for (const route of table) {
    if (route.kind !== kind) continue;
    if (route.kind === "open" && route.method !== (method === "HEAD" ? "GET" : method)) continue;
    if (typeof route.path === "string") {
      if (route.path === rel) return { route: route as Extract<Route, { kind: K }>, params: [] };
      continue;
    }
    const m = route.path.exec(rel);
    if (m) return { route: route as Extract<Route, { kind: K }>, params: m.slice(1) };
  }
  return undefined;
}
