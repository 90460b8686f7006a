/**
 * The dashboard's options and the handle `createDashboard` returns: types
 * only, each option with its default. `handler.ts` re-exports them.
 */

import type { Logger } from "../../core/logger.js";
import type { Duration } from "../../core/validate.js";
import type { Skipq } from "../../skipq.js";
import type { HealthOptions } from "../health.js";
import type { SkipqMetrics } from "../metrics.js";
import type { DashboardAuth, ThrottleOptions } from "./auth.js";
import type { LiveHub } from "./live.js";
import type { Redactor } from "./redact.js";
import type { DashboardHandler, FetchHandler } from "./web.js";

export interface DashboardOptions {
  /** The client whose schema the dashboard shows. Default: one created from `connectionString` (and closed by `close()`). */
  skipq?: Skipq;
  /** Used when `skipq` is not given. Default: `DATABASE_URL`. */
  connectionString?: string;
  /**
   * Used when `skipq` is not given: where the pages' reads go (a standby, or the host list with
   * `target_session_attrs=prefer-standby`); the header shows its replication lag. Writes (actions, sign-in)
   * stay on `connectionString`. Default: `SKIPQ_READ_DATABASE_URL`, else none.
   */
  readConnectionString?: string | undefined;
  /** Schema, when `skipq` is not given. Default: `SKIPQ_SCHEMA`, else "skipq". */
  schema?: string;
  /**
   * Credentials. Default: from `SKIPQ_DASHBOARD_TOKEN`, `SKIPQ_DASHBOARD_USER` and
   * `SKIPQ_DASHBOARD_PASSWORD`; with none, `createDashboard` throws. `false` turns
   * authentication off: then only requests whose connection peer is loopback
   * and whose Host header is a loopback name or address with the server's port
   * (or in `allowedHosts`) are answered, everything else gets 403.
   */
  auth?: DashboardAuth | false;
  /**
   * With `auth: false` only: Host header values answered besides loopback ones, e.g. `["dev.internal"]`
   * (on the server's port) or `["dev.internal:8080"]` (a local proxy's). Default none.
   */
  allowedHosts?: string[];
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

export interface Dashboard {
  /** The request handler. Requests outside `basePath` go to `next`, or get a 404. */
  handle: DashboardHandler;
  /**
   * The same as a fetch handler, `(Request, { remoteAddress, localPort? }) => Promise<Response>`, for Hono,
   * Next.js route handlers and other web-standard servers. `remoteAddress` is required: the connection's
   * peer address (or one only your own proxy writes), never a client's header; it keys the sign-in throttle
   * and decides whether `auth: false` answers.
   */
  fetch: FetchHandler;
  readonly metrics: SkipqMetrics | undefined;
  /** The live feed's hub (undefined when `live: false`): how many viewers, snapshots and statements. */
  readonly live: LiveHub | undefined;
  /** Closes the client the dashboard created (never one passed in). */
  close(): Promise<void>;
}
