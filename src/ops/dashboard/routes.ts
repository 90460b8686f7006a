/**
 * What the dashboard's route modules share: the runtime `createDashboard`
 * wires once (client, Admin, redaction, caches, response helpers) and the
 * request being routed. A route module only answers requests through these;
 * it never reads options or credentials itself. Every answer helper returns
 * `true`, so a route reads `return page(...)` and a module's function answers
 * `false` when no route of its own matched.
 */
import type http from "node:http";
import type { Logger } from "../../core/logger.js";
import type { Skipq } from "../../skipq.js";
import type { Admin } from "../admin.js";
import type { ListedJob, StatsPoint, StatsRange } from "../adminTypes.js";
import type { HealthOptions } from "../health.js";
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
  ctx: PageContext;
  /** Answers with a page, clearing a flash cookie that was shown. */
  page(status: number, body: SafeHtml): true;
}

/** A signed-in POST by an admin, its CSRF token checked, being routed. */
export interface ActionRequest {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  rel: string;
  form: URLSearchParams;
  ctx: PageContext;
  page(status: number, body: SafeHtml): true;
  /** Redirects back to the form's page with a flash message. */
  done(text: string, kind?: "ok" | "err"): true;
  /** Redirects to `location`, setting `cookies`. */
  redirect(location: string, cookies?: string[]): true;
  /** Logs an action and writes its audit row (who, what, when, from where) before it is answered. */
  record(what: string, target: string | null, detail?: Record<string, unknown>): Promise<void>;
}
