/**
 * Pools and connections skipq opens, and the session settings they carry so
 * that a network partition never stalls anything forever (docs/deployment.md).
 *
 * Every connection skipq opens itself sends PostgreSQL settings in its startup
 * packet (`options=-c name=value …`): the server's end then drops a peer that
 * stopped acknowledging (`tcp_user_timeout`, `tcp_keepalives_*`) — which
 * releases the row locks of a claim whose result it could not deliver — and
 * never keeps a transaction idle for long. Connection errors are logged or
 * surface on the next query, never thrown as events. Never sends settings on
 * a pool the application passed in.
 */
import os from "node:os";
import pg from "pg";
import { ValidationError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { attemptsOf, TargetClient } from "./connect.js";
import { type ConnectionTarget, parseConnectionString } from "./connectionString.js";

/**
 * PostgreSQL settings sent with each connection skipq opens (`-c name=value` in the startup packet), by their
 * PostgreSQL names. Times are in the setting's own unit: ms for `*_timeout`, seconds for `tcp_keepalives_*`.
 * `null` drops one of the defaults.
 */
export type SessionSettings = Readonly<Record<string, string | number | null>>;

/**
 * The defaults. A server sending a claim's rows to a host that vanished gives up after `tcp_user_timeout`
 * (the claim rolls back, its rows are claimable again) instead of the kernel's ~15 minutes; an idle peer that
 * vanished is found by keepalives within idle + interval × count (25 s); a transaction left open by a client
 * cut off mid-way is ended after a minute. Workers bound `statement_timeout` and
 * `idle_in_transaction_session_timeout` by their lease on their own pool (`workerSessionSettings`).
 * `jit` is off: skipq's statements are short index lookups whose plans PostgreSQL may still cost above
 * jit_above_cost (a claim it cannot see the queue of), and compiling one took 32 ms of a 40 ms claim
 * (docs/performance.md, "JIT").
 */
export const DEFAULT_SESSION_SETTINGS = {
  tcp_user_timeout: 10_000,
  tcp_keepalives_idle: 10,
  tcp_keepalives_interval: 5,
  tcp_keepalives_count: 3,
  idle_in_transaction_session_timeout: 60_000,
  jit: "off",
} as const;

/** Resolved settings: name → value as sent; `false`: send none (e.g. behind a pooler that refuses `options`). */
export type ResolvedSettings = Readonly<Record<string, string>> | false;

/** The defaults with `given` applied; validated (names and values that fit in `-c name=value`). */
export function resolveSessionSettings(given: SessionSettings | false | undefined): ResolvedSettings {
  if (given === false) return false;
  if (given !== undefined && (typeof given !== "object" || given === null || Array.isArray(given))) {
    throw new ValidationError(
      "sessionSettings must be an object of PostgreSQL settings (e.g. { tcp_user_timeout: 10000 }) or false",
    );
  }
  const out: Record<string, string> = {};
  for (const [name, value] of Object.entries({ ...DEFAULT_SESSION_SETTINGS, ...given })) {
    if (!/^[a-z_][a-z0-9_.]*$/.test(name)) {
      throw new ValidationError(
        `sessionSettings: "${name}" is not a PostgreSQL setting name (lower case, a-z 0-9 _ .)`,
      );
    }
    if (value === null) continue;
    const text = String(value);
    if (!/^[A-Za-z0-9_.:+-]+$/.test(text) || (typeof value === "number" && !Number.isFinite(value))) {
      throw new ValidationError(
        `sessionSettings.${name}: ${JSON.stringify(value)} is not a plain value (a number, or letters, digits and _ . : + -)`,
      );
    }
    out[name] = text;
  }
  return out;
}

/**
 * A worker's own pool: the client's settings with `statement_timeout` and
 * `idle_in_transaction_session_timeout` bounded by the lease — a claim that ran longer than a lease would hand
 * out leases already expired, and a transaction held open by a cut-off worker (a cron tick, say) keeps its
 * locks for at most a lease.
 */
export function workerSessionSettings(settings: ResolvedSettings, leaseMs: number): ResolvedSettings {
  if (settings === false) return false;
  const bounded = (name: string) => String(Math.min(Number(settings[name] ?? leaseMs) || leaseMs, leaseMs));
  return {
    ...settings,
    statement_timeout: bounded("statement_timeout"),
    idle_in_transaction_session_timeout: bounded("idle_in_transaction_session_timeout"),
  };
}

/** What pg needs to send `settings` and keep the client's end of the socket alive at the same pace. */
export function connectionOptions(
  settings: ResolvedSettings,
): Pick<pg.ClientConfig, "options" | "keepAlive" | "keepAliveInitialDelayMillis"> {
  if (settings === false) return { keepAlive: true };
  const options = Object.entries(settings)
    .map(([name, value]) => `-c ${name}=${value}`)
    .join(" ");
  const idle = Number(settings.tcp_keepalives_idle);
  return {
    ...(options ? { options } : {}),
    keepAlive: true,
    ...(idle > 0 ? { keepAliveInitialDelayMillis: idle * 1000 } : {}),
  };
}

/**
 * The client of every connection skipq opens: it reaches the first fitting host of a multi-host connection
 * string (connect.ts), and its refused `options` startup parameter (SQLSTATE 08P01 from a pooler that does not
 * pass it on: PgBouncer says only "unsupported startup parameter: options") says what to do.
 */
export class SessionClient extends TargetClient {
  // biome-ignore lint/suspicious/noExplicitAny: pg's connect is overloaded (callback or promise).
  override connect(callback?: any): any {
    const sent = (this as unknown as { connectionParameters: { options?: string } }).connectionParameters.options;
    const explain = (error: Error) => {
      if (sent && (error as { code?: string }).code === "08P01") {
        error.message = `${error.message} — skipq sends its session settings (tcp_user_timeout, keepalives, timeouts) in the startup parameter "options", which this server or pooler refused: pass sessionSettings: false (and set the same timeouts on the pooler or with ALTER ROLE … SET), or add "options" to PgBouncer's ignore_startup_parameters (docs/deployment.md)`;
      }
      return error;
    };
    if (callback) return super.connect((error: Error) => callback(error ? explain(error) : error));
    return super.connect().catch((error: Error) => {
      throw explain(error);
    });
  }
}

export interface PoolSettings {
  /** Sent with each connection. Default: none (`false`). */
  session?: ResolvedSettings;
  /**
   * Client-side read timeout on every statement, ms: a statement the server never answers (a link that drops
   * packets silently) fails after this, and its connection is discarded. Default: none.
   */
  queryTimeoutMs?: number;
}

/** The time a connection gets per host tried, ms, unless the URL sets connect_timeout. */
export const HOST_TIMEOUT_MS = 10_000;

/**
 * What a pool or client needs to reach `target`: the parsed string (each client of a pool reuses it), the time
 * per host, and a whole-connect bound of every host's allowance (pg-pool also waits that long for a free client).
 */
export function targetOptions(target: ConnectionTarget): Pick<
  pg.PoolConfig,
  "connectionString" | "connectionTimeoutMillis"
> & {
  target: ConnectionTarget;
  hostTimeoutMillis: number;
} {
  const perHost = target.connectTimeoutMs ?? HOST_TIMEOUT_MS;
  // The pool's own timer a little after the client's, so the client's error (every host and why) is the one seen.
  const whole = target.managed ? perHost * attemptsOf(target) + 1000 : perHost;
  return { connectionString: target.text, target, hostTimeoutMillis: perHost, connectionTimeoutMillis: whole };
}

/**
 * A pool whose idle-client errors (a terminated backend, a restarted server) are logged, never thrown. A
 * malformed connection string is a ValidationError here, before any connection is tried.
 */
export function createPool(
  connectionString: string,
  max: number,
  logger: Logger,
  name: string,
  settings: PoolSettings = {},
): pg.Pool {
  const target = parseConnectionString(connectionString);
  const pool = new pg.Pool({
    Client: SessionClient,
    ...targetOptions(target),
    max,
    application_name: `${name}:${os.hostname()}:${process.pid}`.slice(0, 63),
    ...connectionOptions(settings.session ?? false),
    ...(settings.queryTimeoutMs ? { query_timeout: settings.queryTimeoutMs } : {}),
  } as pg.PoolConfig);
  pool.on("error", (error) =>
    logger.warn({ err: error }, "skipq: an idle database connection failed; the pool will open a new one"),
  );
  // A checked-out client (reaper pass, migration, bulk enqueue) whose server goes away between
  // two queries emits 'error' with no listener, which kills the process (chaos D6: a PostgreSQL
  // restart crashed every worker). The next query on it fails instead, and release() drops it.
  pool.on("connect", (client) => client.on("error", () => undefined));
  // A server that stopped fitting the connection string's target_session_attrs under an open connection (a
  // primary turned read-only) is dropped when the connection comes back: the next one chooses a host again.
  // `_queryable` is what pg-pool itself reads at release to discard a broken client.
  pool.on("release", (_error, client) => {
    if ((client as unknown as TargetClient).unfit) (client as unknown as { _queryable: boolean })._queryable = false;
  });
  return pool;
}
