/**
 * A worker's settings, checked once: every option validated with a message
 * that names it, defaults applied, and the pool the worker will use sized
 * (its own, the caller's, or the client's) — failing with PoolTooSmallError
 * before anything starts when a borrowed pool cannot hold what it needs.
 */
import type pg from "pg";
import { type BackoffOptions, defaultBackoff } from "../core/backoff.js";
import { PoolTooSmallError, SkipqError, ValidationError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { assertInt, assertName, toMs } from "../core/validate.js";
import { createPool, type ResolvedSettings, workerSessionSettings } from "../db/pool.js";
import { instanceId } from "../shared/instance.js";
import type { WorkerOptions } from "./types.js";

/** The shortest lease a worker accepts (see resolveSettings). */
const MIN_LOCK_TIMEOUT_MS = 500;

export interface WorkerSettings {
  id: string;
  queues: readonly string[];
  concurrency: number;
  prefetch: number;
  batchSize: number;
  lockTimeoutMs: number;
  heartbeatMs: number;
  pollMs: number;
  shutdownMs: number;
  abortGraceMs: number;
  jobTimeoutMs: number | undefined;
  agingMs: number | undefined;
  backoff: BackoffOptions;
  outcomeBatchSize: number;
  presenceMs: number;
  maxResultBytes: number;
  progressMs: number;
  attemptLogLines: number;
}

export function workerSettings(options: WorkerOptions): WorkerSettings {
  const queues = (options.queues ?? ["default"]).map((q) => assertName("queue", q));
  if (queues.length === 0) throw new SkipqError("SKIPQ_INVALID_ARGUMENT", "queues must name at least one queue");
  const concurrency = assertInt("concurrency", options.concurrency ?? 10, 1, 10_000);
  const prefetch = assertInt("prefetch", options.prefetch ?? 1000, 0, 10_000);
  const lockTimeoutMs = toMs("lockTimeout", options.lockTimeout ?? "30s", { allowZero: false });
  if (lockTimeoutMs < MIN_LOCK_TIMEOUT_MS) {
    throw new ValidationError(
      `lockTimeout must be at least ${MIN_LOCK_TIMEOUT_MS} ms, got ${lockTimeoutMs} ms: it is the lease, renewed every lockTimeout / 3, and it bounds every statement on the worker's connections (statement_timeout), so a shorter one expires while its job runs; the default is 30s`,
    );
  }
  const heartbeatMs = toMs("heartbeatInterval", options.heartbeatInterval ?? lockTimeoutMs / 3, { allowZero: false });
  if (heartbeatMs >= lockTimeoutMs) {
    throw new SkipqError(
      "SKIPQ_INVALID_ARGUMENT",
      `heartbeatInterval (${heartbeatMs} ms) must be shorter than lockTimeout (${lockTimeoutMs} ms), or leases expire between heartbeats`,
    );
  }
  return {
    id: options.workerId ?? instanceId(),
    queues,
    concurrency,
    prefetch,
    batchSize: assertInt("batchSize", options.batchSize ?? Math.min(concurrency + prefetch, 1000), 1, 1000),
    lockTimeoutMs,
    heartbeatMs,
    pollMs: toMs("pollInterval", options.pollInterval ?? "1s", { allowZero: false }),
    shutdownMs: toMs("shutdownTimeout", options.shutdownTimeout ?? "10s"),
    abortGraceMs: toMs("abortGrace", options.abortGrace ?? "1s"),
    jobTimeoutMs:
      options.jobTimeout === undefined ? undefined : toMs("jobTimeout", options.jobTimeout, { allowZero: false }),
    agingMs:
      options.priorityAging === undefined
        ? undefined
        : toMs("priorityAging", options.priorityAging, { allowZero: false }),
    backoff: { ...defaultBackoff, ...options.backoff },
    outcomeBatchSize: assertInt("outcomeBatchSize", options.outcomeBatchSize ?? 2000, 1, 10_000),
    presenceMs: toMs("presenceInterval", options.presenceInterval ?? "10s", { allowZero: false }),
    attemptLogLines: assertInt("attemptLogLines", options.attemptLogLines ?? 100, 0, 10_000),
    progressMs: toMs("progressInterval", options.progressInterval ?? "1s", { allowZero: false }),
    maxResultBytes: assertInt("maxResultBytes", options.maxResultBytes ?? 64 * 1024, 2, 64 * 1024 * 1024),
  };
}

/** Connections a worker keeps for its own statements: claim, outcomes, heartbeat, maintenance. */
const RESERVED = 4;

/** The worker pool's read timeout beyond its lease-bounded statement_timeout (the server's own error arrives first). */
const READ_TIMEOUT_MARGIN_MS = 5000;

export interface WorkerPool {
  pool: pg.Pool;
  owned: boolean;
  /** Claims that may be in flight at once. */
  maxClaims: number;
}

/**
 * The worker's pool. Its own (when the client has a connection string) gets a
 * second claim connection, so two claims can be in flight and their commits
 * share WAL flushes; a borrowed pool keeps one claim at a time, within a size
 * checked here.
 */
export function workerPool(
  host: { connectionString: string | undefined; pool: pg.Pool; sessionSettings: ResolvedSettings },
  options: WorkerOptions,
  settings: Pick<WorkerSettings, "concurrency" | "lockTimeoutMs">,
  logger: Logger,
): WorkerPool {
  const { concurrency, lockTimeoutMs } = settings;
  if (options.pool) {
    const needed = RESERVED + concurrency;
    const max = poolMax(options.pool);
    if (max < needed) {
      throw new PoolTooSmallError(
        needed,
        max,
        `claim 1 + outcomes 1 + heartbeat 1 + maintenance 1 + ${concurrency} for handlers that may share this pool`,
      );
    }
    return { pool: options.pool, owned: false, maxClaims: 1 };
  }
  if (host.connectionString) {
    // Its statements are bounded by the lease on the server, and a few seconds later on this side too: a
    // statement the server never answers (packets dropped, no RST) fails and its connection is discarded.
    const pool = createPool(host.connectionString, RESERVED + 1, logger, "skipq-worker", {
      session: workerSessionSettings(host.sessionSettings, lockTimeoutMs),
      queryTimeoutMs: lockTimeoutMs + READ_TIMEOUT_MARGIN_MS,
    });
    return { pool, owned: true, maxClaims: 2 };
  }
  const max = poolMax(host.pool);
  if (max < RESERVED) throw new PoolTooSmallError(RESERVED, max, "claim 1 + outcomes 1 + heartbeat 1 + maintenance 1");
  return { pool: host.pool, owned: false, maxClaims: 1 };
}

function poolMax(pool: pg.Pool): number {
  return (pool as pg.Pool & { options: { max: number } }).options.max;
}
