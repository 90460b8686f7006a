/**
 * The worker: claims jobs in batches, runs their handlers with bounded
 * concurrency, and records outcomes in batched, lease-fenced statements.
 * Claimed jobs wait in a small local buffer so a claim is in flight while
 * handlers run; the buffer holds about two claim round trips' worth of work at
 * the measured handler speed (at most `prefetch`), and starts jobs in claim order.
 *
 * Invariants: a claim is committed before its handlers start; at most
 * `concurrency` handlers run at once; at most `concurrency + prefetch` leases
 * are held; a buffered job is heartbeated like a running one and released (its
 * attempt not consumed) at stop; every outcome, heartbeat and release
 * presents the job's lease, so a worker that lost its lease changes nothing;
 * a handler's error, rejection or non-Error throw never escapes into the
 * process. It never holds a transaction open while a handler runs.
 */
import { createHash } from "node:crypto";
import { EventEmitter } from "node:events";
import os from "node:os";
import type { Context as TraceContext } from "@opentelemetry/api";
import type pg from "pg";
import { type BackoffOptions, backoffMs, defaultBackoff } from "../core/backoff.js";
import type { Skipq } from "../core/client.js";
import {
  CancelJob,
  FailPermanently,
  PayloadInvalidError,
  PoolTooSmallError,
  RetryIn,
  SkipqError,
  UnknownKindError,
} from "../core/errors.js";
import { type JobDefinition, type PayloadOf, validatePayload } from "../core/job.js";
import { childLogger, type Logger } from "../core/logger.js";
import { assertDate, assertInt, assertKey, assertName, type Duration, toMs } from "../core/validate.js";
import { assertSchemaCurrent } from "../db/migrate.js";
import { createPool } from "../db/pool.js";
import { Reaper } from "../maintenance/reaper.js";
import { claimSpan, endExecuteSpan, inSpan, startExecuteSpan } from "../ops/telemetry.js";
import { Claimer } from "./claimer.js";
import { LazyAbortController } from "./lazyAbort.js";
import { Listener } from "./listener.js";
import { Presence } from "./presence.js";

/** A claimed job as its handler sees it. */
export interface Job<P = unknown> {
  id: string;
  queue: string;
  kind: string;
  payload: P;
  priority: number;
  /** This attempt's number, from 1. */
  attempt: number;
  maxAttempts: number;
  runAt: Date;
  createdAt: Date;
  /** Metadata given at enqueue (e.g. a trace context); empty when none. */
  headers: Record<string, string>;
  /**
   * This claim's fencing token (unique per claim). Pass it to downstream
   * systems that can reject writes from a holder whose lease was taken over.
   */
  lease: string;
  /** The tenant key given at enqueue (`concurrencyKey`); null when none. */
  concurrencyKey: string | null;
}

export interface JobContext<P = unknown> {
  job: Job<P>;
  id: string;
  attempt: number;
  /** Aborts on shutdown (after the soft timeout), on a lost lease, on job timeout, or on cancellation. */
  signal: AbortSignal;
  /** Extends this job's lease now (it is also extended automatically). Resolves false when the lease is lost. */
  heartbeat(): Promise<boolean>;
  log: Logger;
  /**
   * Pauses a concurrency key of this job's queue until a time (a Date, compared
   * with the database clock) or for a duration ("30s"): no worker starts a job
   * with that key meanwhile — e.g. on a provider's Retry-After. The key defaults
   * to this job's; pass null (or omit it for a job without a key) to pause the
   * whole queue. Then usually `throw new RetryIn(ms)` to run this job again later.
   */
  pauseKey(until: Date | Duration, key?: string | null): Promise<Date>;
}

export type Handler<P = unknown> = (payload: P, ctx: JobContext<P>) => unknown | Promise<unknown>;

export interface WorkerOptions {
  /** Queues to take jobs from. Default ["default"]. */
  queues?: string[];
  /** Handlers running at once. Default 10. */
  concurrency?: number;
  /**
   * Most jobs taken per claim; a claim never takes more than the free slots plus the free prefetch room.
   * Default: concurrency + prefetch (at most 1000).
   */
  batchSize?: number;
  /**
   * Most jobs claimed ahead of free slots and held (leased, heartbeated) in a local buffer, so the next claim
   * overlaps running handlers and each claim commits more jobs. The worker buffers only about two claim
   * round trips' worth of work at its measured handler speed: fast handlers get up to this many, slow ones
   * next to none. A job enqueued later with a higher priority waits behind at most this many. 0 claims only
   * for free slots. Default 1000.
   */
  prefetch?: number;
  /** How long a claim (and each heartbeat) leases a job; an expired lease is reaped. Default "30s". */
  lockTimeout?: Duration;
  /** How often running jobs' leases are extended. Default lockTimeout / 3. */
  heartbeatInterval?: Duration;
  /** Longest idle wait between claims when no notification arrives. Default "1s". */
  pollInterval?: Duration;
  /** On stop, how long in-flight handlers may finish before their signals abort. Default "10s". */
  shutdownTimeout?: Duration;
  /** After aborting, how long handlers get to settle before their jobs are released. Default "1s". */
  abortGrace?: Duration;
  /** Per-job time limit: the signal aborts, the job fails (retry) and the slot is freed. Default: none. */
  jobTimeout?: Duration;
  /**
   * Priority aging: a job runnable for longer than this is claimed before any
   * other, oldest first, as if it had top priority, so a flood of high-priority
   * work cannot starve it. Default: none (strict priority order).
   */
  priorityAging?: Duration;
  /** Retry backoff after a failure. Default { baseMs: 1000, maxMs: 3_600_000, jitter: 0.2 }. */
  backoff?: Partial<BackoffOptions>;
  /** Run the reaper in this process (one pass at a time across all). Default true. */
  maintenance?: boolean;
  /** Time between reaper passes. Default "5s". */
  reaperInterval?: Duration;
  /** LISTEN for new jobs on a dedicated connection. Default true (needs a connection string). */
  listen?: boolean;
  /** Connection string for the LISTEN connection, e.g. a direct one when the pool goes through PgBouncer. Default: the client's. */
  listenConnectionString?: string;
  /** A pg pool for the worker's bookkeeping; must fit claim + outcomes + heartbeat + maintenance + one per handler. Default: skipq creates a pool of 5 (a second claim connection, so two claims can be in flight). */
  pool?: pg.Pool;
  /** Identifies this worker in locked_by. Default host:pid:random. */
  workerId?: string;
  /** Most outcomes recorded per statement. Default 2000. */
  outcomeBatchSize?: number;
  /** Record this worker's id, queues and kinds in the workers table (for health checks), off the claim path. Default true. */
  presence?: boolean;
  /** Time between presence upserts; a worker not seen for three intervals counts as gone. Default "10s". */
  presenceInterval?: Duration;
  /** Check the schema version at start (refuse a database newer or older than this code). Default true. */
  checkSchema?: boolean;
  /** @internal Fault-injection hooks for the chaos suite. */
  hooks?: WorkerHooks;
}

/** @internal Named points where the chaos suite injects faults. */
export interface WorkerHooks {
  afterClaimCommit?: (jobs: ReadonlyArray<Job>) => void | Promise<void>;
  afterHandlerBeforeOutcome?: (job: Job) => void | Promise<void>;
}

export type Outcome = "completed" | "retry" | "dead" | "snoozed" | "cancelled" | "released" | "lease-lost";

/** How a non-empty claim went: its round trip, and the database time it took the jobs (all share it). */
export interface ClaimInfo {
  durationMs: number;
  claimedAt: Date;
}

export interface WorkerEvents {
  claimed: [jobs: ReadonlyArray<Job>, info: ClaimInfo];
  jobStart: [job: Job];
  jobEnd: [job: Job, outcome: Outcome, durationMs: number, error: unknown];
  /** Outcomes the database rejected because the job's lease had moved on. */
  staleOutcome: [ids: string[]];
  leaseLost: [job: Job];
  reaped: [jobs: ReadonlyArray<{ id: string; status: string }>];
  listener: [connected: boolean];
  idle: [];
  stopped: [];
  /** A database error the worker survived (it retries). */
  warning: [error: unknown, context: string];
}

interface Running {
  job: Job;
  lease: string;
  controller: LazyAbortController;
  startedAt: number;
  /** The claim span's context, for the execution span (OpenTelemetry). */
  trace: TraceContext | undefined;
  /** Set when the outcome must not be written: lease lost, or released at shutdown. */
  detached: boolean;
  /** False while the job waits in the prefetch buffer. */
  started: boolean;
  /** Resolves when the job is settled: its handler ended, or it left the buffer without running. */
  done: Promise<void>;
  settle: () => void;
}

interface Settlement {
  id: string;
  lease: string;
  action: "retry" | "snooze" | "release" | "dead" | "cancel";
  error: string | null;
  delayMs: number;
  fingerprint: string | null;
}

export interface WorkerStats {
  claimed: number;
  completed: number;
  failed: number;
  staleOutcomes: number;
  leasesLost: number;
  released: number;
}

const MAX_ERROR_CHARS = 8192;

/** The text stored in last_error: message and stack, NUL bytes stripped, truncated. */
export function formatError(error: unknown): string {
  let text: string;
  if (error instanceof Error) {
    text = error.stack?.includes(error.message) ? error.stack : `${error.name}: ${error.message}\n${error.stack ?? ""}`;
  } else {
    try {
      text = `non-Error thrown: ${typeof error === "string" ? error : (JSON.stringify(error) ?? String(error))}`;
    } catch {
      text = `non-Error thrown: ${String(error)}`;
    }
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: PostgreSQL text cannot hold NUL.
  text = text.replace(/\u0000/g, "");
  if (text.length > MAX_ERROR_CHARS)
    text = `${text.slice(0, MAX_ERROR_CHARS)}… [truncated ${text.length - MAX_ERROR_CHARS} chars]`;
  // A cut in the middle of a surrogate pair would be invalid UTF-8.
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

/**
 * Groups failures that are "the same error": the job kind plus the first line
 * of the message with numbers, hex, UUIDs and quoted values masked, hashed.
 */
export function errorFingerprint(kind: string, error: unknown): string {
  const message =
    error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : "non-Error";
  const normalised = (message.split("\n")[0] ?? "")
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, "<uuid>")
    .replace(/0x[0-9a-f]+|\b[0-9a-f]{12,}\b/gi, "<hex>")
    .replace(/"[^"]*"|'[^']*'/g, "<str>")
    .replace(/\d+(\.\d+)?/g, "<n>")
    .slice(0, 500);
  return createHash("sha256").update(`${kind}\u0000${normalised}`).digest("hex").slice(0, 16);
}

/** Resolves on the next wake(), or after `ms`; a wake() with nobody waiting is remembered once. */
class Wakeup {
  private resolve: (() => void) | undefined;
  private pending = false;
  wake(): void {
    if (this.resolve) {
      const r = this.resolve;
      this.resolve = undefined;
      r();
    } else this.pending = true;
  }
  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.resolve = undefined;
        resolve();
      }, ms);
      this.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

export class Worker extends EventEmitter<WorkerEvents> {
  readonly id: string;
  readonly queues: readonly string[];
  readonly concurrency: number;
  readonly batchSize: number;
  readonly prefetch: number;
  readonly stats: WorkerStats = { claimed: 0, completed: 0, failed: 0, staleOutcomes: 0, leasesLost: 0, released: 0 };
  /** The LISTEN connection, when enabled (tests terminate it). */
  readonly listener: Listener | undefined;
  readonly reaper: Reaper | undefined;
  readonly pool: pg.Pool;
  private readonly presence: Presence | undefined;
  /** Chooses and runs the claim statement (plain, aging, or limited). */
  readonly claimer: Claimer;

  private readonly handlers = new Map<string, { definition?: JobDefinition<unknown>; handler: Handler<never> }>();
  /** Every job whose lease this worker holds: running, or waiting in `buffer`. */
  private readonly inFlight = new Map<string, Running>();
  /** Claimed jobs not started yet, in claim order. */
  private readonly buffer: Running[] = [];
  private active = 0;
  /** Claims in flight, the jobs they asked for, and how many may be in flight at once. */
  private readonly claiming = new Set<Promise<void>>();
  private claimsInFlight = 0;
  private requested = 0;
  private readonly maxClaims: number;
  private claimFailures = 0;
  private sawEmpty = false;
  /** Notifications received; a claim that came back short idles only if none arrived while it ran. */
  private notifications = 0;
  /** Moving averages of handler duration and claim round trip (ms), for the prefetch target. */
  private handlerMs: number | undefined;
  private claimMs = 1;
  private readonly lockTimeoutMs: number;
  private readonly heartbeatMs: number;
  private readonly pollMs: number;
  private readonly shutdownMs: number;
  private readonly abortGraceMs: number;
  private readonly jobTimeoutMs: number | undefined;
  private readonly backoff: BackoffOptions;
  private readonly outcomeBatchSize: number;
  private readonly logger: Logger;
  private readonly ownsPool: boolean;
  private readonly queueSet: Set<string>;
  private readonly wakeup = new Wakeup();
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  private loop: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private hardStop: (() => void) | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  private completions: Array<[string, string]> = [];
  private settlements: Settlement[] = [];
  private flushing: Promise<void> | undefined;
  private flushScheduled = false;

  constructor(
    private readonly client: Skipq,
    private readonly options: WorkerOptions = {},
  ) {
    super();
    this.queues = (options.queues ?? ["default"]).map((q) => assertName("queue", q));
    if (this.queues.length === 0) throw new SkipqError("SKIPQ_INVALID_ARGUMENT", "queues must name at least one queue");
    this.queueSet = new Set(this.queues);
    this.concurrency = assertInt("concurrency", options.concurrency ?? 10, 1, 10_000);
    this.prefetch = assertInt("prefetch", options.prefetch ?? 1000, 0, 10_000);
    this.batchSize = assertInt(
      "batchSize",
      options.batchSize ?? Math.min(this.concurrency + this.prefetch, 1000),
      1,
      1000,
    );
    this.lockTimeoutMs = toMs("lockTimeout", options.lockTimeout ?? "30s", { allowZero: false });
    this.heartbeatMs = toMs("heartbeatInterval", options.heartbeatInterval ?? this.lockTimeoutMs / 3, {
      allowZero: false,
    });
    if (this.heartbeatMs >= this.lockTimeoutMs) {
      throw new SkipqError(
        "SKIPQ_INVALID_ARGUMENT",
        `heartbeatInterval (${this.heartbeatMs} ms) must be shorter than lockTimeout (${this.lockTimeoutMs} ms), or leases expire between heartbeats`,
      );
    }
    this.pollMs = toMs("pollInterval", options.pollInterval ?? "1s", { allowZero: false });
    this.shutdownMs = toMs("shutdownTimeout", options.shutdownTimeout ?? "10s");
    this.abortGraceMs = toMs("abortGrace", options.abortGrace ?? "1s");
    this.jobTimeoutMs =
      options.jobTimeout === undefined ? undefined : toMs("jobTimeout", options.jobTimeout, { allowZero: false });
    this.backoff = { ...defaultBackoff, ...options.backoff };
    this.outcomeBatchSize = assertInt("outcomeBatchSize", options.outcomeBatchSize ?? 2000, 1, 10_000);
    this.id = options.workerId ?? `${os.hostname()}:${process.pid}:${Math.random().toString(36).slice(2, 8)}`;
    this.logger = childLogger(client.logger, { worker: this.id });

    const reserved = 4; // claim, outcomes, heartbeat, maintenance
    // A pool of our own gets a second claim connection, so two claims can be in flight (their commits
    // share WAL flushes). A borrowed pool keeps one claim at a time, within the size we checked.
    this.maxClaims = options.pool || !client.connectionString ? 1 : 2;
    if (options.pool) {
      const max = (options.pool as pg.Pool & { options: { max: number } }).options.max;
      const needed = reserved + this.concurrency;
      if (max < needed) {
        throw new PoolTooSmallError(
          needed,
          max,
          `claim 1 + outcomes 1 + heartbeat 1 + maintenance 1 + ${this.concurrency} for handlers that may share this pool`,
        );
      }
      this.pool = options.pool;
      this.ownsPool = false;
    } else if (client.connectionString) {
      this.pool = createPool(client.connectionString, reserved + 1, this.logger, "skipq-worker");
      this.ownsPool = true;
    } else {
      const max = (client.pool as pg.Pool & { options: { max: number } }).options.max;
      if (max < reserved)
        throw new PoolTooSmallError(reserved, max, "claim 1 + outcomes 1 + heartbeat 1 + maintenance 1");
      this.pool = client.pool;
      this.ownsPool = false;
    }

    const listenUrl = options.listenConnectionString ?? client.connectionString;
    if ((options.listen ?? true) && listenUrl) {
      this.listener = new Listener({
        connectionString: listenUrl,
        channel: client.channel,
        logger: this.logger,
        onNotify: (queue) => {
          // "!..." payloads are control messages (cancel, flow settings); queue names cannot start with "!".
          if (queue.startsWith("!")) {
            this.control(queue);
            return;
          }
          if (!this.queueSet.has(queue)) return;
          this.notifications++;
          this.wakeup.wake();
        },
        onConnectionChange: (connected) => this.emit("listener", connected),
      });
    } else if (options.listen ?? true) {
      this.logger.info(
        {},
        "skipq: LISTEN is off (the client was given a pool, not a connection string); pass listenConnectionString for instant wake-ups — polling covers meanwhile",
      );
    }
    this.claimer = new Claimer({
      client,
      pool: this.pool,
      queues: this.queues,
      workerId: this.id,
      leaseMs: this.lockTimeoutMs,
      agingMs:
        options.priorityAging === undefined
          ? undefined
          : toMs("priorityAging", options.priorityAging, { allowZero: false }),
      refreshMs: 5000,
      logger: this.logger,
    });
    if (options.maintenance ?? true) {
      this.reaper = new Reaper({
        pool: this.pool,
        schema: client.schema,
        schemaSql: client.schemaSql,
        intervalMs: toMs("reaperInterval", options.reaperInterval ?? "5s", { allowZero: false }),
        logger: this.logger,
        onReaped: (jobs) => this.emit("reaped", jobs),
      });
    }
    if (options.presence ?? true) {
      this.presence = new Presence({
        pool: this.pool,
        schemaSql: client.schemaSql,
        workerId: this.id,
        queues: this.queues,
        kinds: () => this.kinds,
        intervalMs: toMs("presenceInterval", options.presenceInterval ?? "10s", { allowZero: false }),
        logger: this.logger,
      });
    }
  }

  /** Registers the handler for a job kind (typed by its definition). Returns this, for chaining. */
  register<J extends JobDefinition<unknown> | string>(job: J, handler: Handler<PayloadOf<J>>): this {
    const definition = typeof job === "string" ? undefined : (job as JobDefinition<unknown>);
    const kind = assertName("kind", typeof job === "string" ? job : definition?.kind);
    if (typeof handler !== "function")
      throw new SkipqError("SKIPQ_INVALID_ARGUMENT", `handler for "${kind}" must be a function`);
    this.handlers.set(
      kind,
      definition ? { definition, handler: handler as Handler<never> } : { handler: handler as Handler<never> },
    );
    return this;
  }

  /** Kinds this worker has handlers for. */
  get kinds(): string[] {
    return [...this.handlers.keys()];
  }

  /** Jobs whose handlers are running now. */
  get running(): number {
    return this.active;
  }

  /** Claimed jobs waiting in the prefetch buffer. */
  get buffered(): number {
    return this.buffer.length;
  }

  /** Starts claiming. Idempotent; resolves once the worker is running (the listener may still be connecting). */
  async start(): Promise<void> {
    if (this.state !== "idle") return;
    this.state = "running";
    if (this.options.checkSchema ?? true) {
      // A database that is down or still starting is waited for (capped backoff), not a crash:
      // an orchestrator restarting workers that die at start would only make a crash loop.
      for (let failures = 1; ; failures++) {
        try {
          await assertSchemaCurrent(this.pool, this.client.schema);
          break;
        } catch (error) {
          if (!isUnavailable(error)) {
            this.state = "idle";
            throw error;
          }
          this.emit("warning", error, "start");
          if (failures === 1 || failures % 20 === 0) {
            this.logger.warn({ err: error, failures }, "skipq: database unavailable at start; retrying with backoff");
          }
          await this.wakeup.wait(Math.min(5000, 100 * 2 ** Math.min(failures, 10)) * (0.5 + Math.random() / 2));
          // stop() during the wait: its shutdown closes what exists; nothing was started.
          if (this.state !== "running") return;
        }
      }
    }
    void this.listener?.start();
    await this.claimer.start();
    this.reaper?.start();
    this.presence?.start();
    this.heartbeatTimer = setInterval(() => void this.heartbeatAll(), this.heartbeatMs);
    this.heartbeatTimer.unref();
    this.loop = this.fetchLoop();
  }

  /**
   * Graceful stop: no new claims; in-flight handlers get `shutdownTimeout` to
   * finish, then their signals abort; after `abortGrace`, jobs still running are
   * released to pending without consuming the attempt. A second call skips to
   * the hard stop. Safe before start.
   */
  stop(): Promise<void> {
    if (this.stopping) {
      this.hardStop?.();
      return this.stopping;
    }
    if (this.state === "idle") {
      this.state = "stopped";
      this.stopping = this.closeResources();
      return this.stopping;
    }
    this.state = "stopping";
    this.wakeup.wake();
    this.stopping = this.shutdown();
    return this.stopping;
  }

  /**
   * One claim and its handlers, start to recorded outcome: for tests and
   * scripts. Returns the number of jobs claimed.
   */
  async runOnce(): Promise<number> {
    const jobs = await this.claim(this.batchSize);
    this.startBuffered();
    await Promise.all(jobs.map((running) => running.done));
    await this.flush();
    return jobs.length;
  }

  /**
   * Keeps up to `maxClaims` claims in flight while there is room for half a claim's worth of jobs:
   * with handlers that finish fast, a claim (one commit) is always on the way while the last batch runs.
   */
  private async fetchLoop(): Promise<void> {
    while (this.state === "running") {
      const cap = this.concurrency + this.prefetchTarget();
      const fullClaim = Math.min(this.batchSize, cap);
      if (this.claimFailures > 0 && this.claimsInFlight === 0) {
        await this.wakeup.wait(Math.min(5000, 50 * 2 ** Math.min(this.claimFailures, 10)) * (0.5 + Math.random() / 2));
      } else if (this.sawEmpty && this.claimsInFlight === 0) {
        this.sawEmpty = false;
        if (this.inFlight.size === 0) this.emit("idle");
        await this.wakeup.wait(this.pollMs);
        continue;
      }
      if (this.state !== "running") break;
      const room = Math.min(this.batchSize, cap - this.inFlight.size - this.requested);
      // Slots idle with nothing buffered or coming: claim whatever fits now. Otherwise wait until half a
      // claim's worth of room is free, so slots freeing one by one never turn into one-job claims.
      const starving = this.buffer.length === 0 && this.active < this.concurrency && this.claimsInFlight === 0;
      if (this.claimsInFlight >= this.maxClaims || room <= 0 || (!starving && room < Math.ceil(fullClaim / 2))) {
        await this.wakeup.wait(this.pollMs);
        continue;
      }
      this.claimsInFlight++;
      this.requested += room;
      const notificationsBefore = this.notifications;
      const claiming: Promise<void> = this.claim(room)
        .then(
          (claimed) => {
            this.claimFailures = 0;
            // A notification during the claim may announce a job its snapshot missed: claim again, don't idle.
            if (claimed.length < room && this.notifications === notificationsBefore) this.sawEmpty = true;
            this.startBuffered();
          },
          (error) => {
            this.claimFailures++;
            this.emit("warning", error, "claim");
            if (this.claimFailures === 1 || this.claimFailures % 20 === 0) {
              this.logger.warn(
                { err: error, failures: this.claimFailures },
                "skipq: claim failed; retrying with backoff",
              );
            }
          },
        )
        .finally(() => {
          this.claimsInFlight--;
          this.requested -= room;
          this.claiming.delete(claiming);
          this.wakeup.wake();
        });
      this.claiming.add(claiming);
    }
    await Promise.all([...this.claiming]);
  }

  /**
   * Jobs to hold beyond the slots: enough for the handlers to stay busy for two claim round trips
   * (at the measured speeds), at most `prefetch`. Before any handler has finished: `concurrency`.
   */
  private prefetchTarget(): number {
    if (this.prefetch === 0) return 0;
    if (this.handlerMs === undefined) return Math.min(this.prefetch, this.concurrency);
    const perJobMs = Math.max(this.handlerMs, 0.01);
    return Math.min(this.prefetch, Math.ceil((2 * this.claimMs * this.concurrency) / perJobMs));
  }

  private async claim(limit: number): Promise<Running[]> {
    const startedAt = performance.now();
    const rows = await this.claimer.claim(limit);
    this.claimMs = 0.8 * this.claimMs + 0.2 * (performance.now() - startedAt);
    if (rows.length === 0) return [];
    const durationMs = performance.now() - startedAt;
    const trace = claimSpan(startedAt, this.queues, rows.length);
    this.stats.claimed += rows.length;
    const jobs: Running[] = [];
    for (const row of rows) {
      const job: Job = {
        id: row.id,
        queue: row.queue,
        kind: row.kind,
        payload: row.payload,
        priority: row.priority,
        attempt: row.attempts,
        maxAttempts: row.max_attempts,
        runAt: row.run_at,
        createdAt: row.created_at,
        headers: row.headers ?? {},
        lease: row.lease,
        concurrencyKey: row.concurrency_key,
      };
      let settle: () => void = () => undefined;
      const done = new Promise<void>((resolve) => {
        settle = resolve;
      });
      const running: Running = {
        job,
        lease: row.lease,
        controller: new LazyAbortController(),
        startedAt: 0,
        trace,
        detached: false,
        started: false,
        done,
        settle,
      };
      this.inFlight.set(job.id, running);
      jobs.push(running);
    }
    this.emit(
      "claimed",
      jobs.map((r) => r.job),
      { durationMs, claimedAt: (rows[0] as (typeof rows)[number]).locked_at },
    );
    if (this.options.hooks?.afterClaimCommit) await this.options.hooks.afterClaimCommit(jobs.map((r) => r.job));
    this.buffer.push(...jobs);
    return jobs;
  }

  /** Starts buffered jobs, in claim order, while slots are free; none once stopping (shutdown releases them). */
  private startBuffered(): void {
    while (this.active < this.concurrency && this.buffer.length > 0) {
      if (this.state === "stopping" || this.state === "stopped") return;
      const running = this.buffer.shift() as Running;
      if (running.detached) {
        // Its lease was lost while it waited: nothing ran, nothing to record.
        this.inFlight.delete(running.job.id);
        running.settle();
        continue;
      }
      running.started = true;
      this.active++;
      void this.execute(running).finally(() => {
        this.active--;
        running.settle();
        this.startBuffered();
        this.wakeup.wake();
      });
    }
  }

  private async execute(running: Running): Promise<void> {
    const { job, controller } = running;
    running.startedAt = performance.now();
    this.emit("jobStart", job);
    let outcome: Outcome = "completed";
    let failure: unknown;
    let timer: NodeJS.Timeout | undefined;
    const span = startExecuteSpan(job, running.trace);
    try {
      const entry = this.handlers.get(job.kind);
      if (!entry) throw new UnknownKindError(job.kind, this.kinds);
      let payload = job.payload;
      if (entry.definition?.schema) {
        try {
          payload = await validatePayload(entry.definition, job.payload);
        } catch (error) {
          throw error instanceof PayloadInvalidError ? new FailPermanently(error.message, { cause: error }) : error;
        }
      }
      const logger = this.logger;
      let log: Logger | undefined;
      const ctx: JobContext = {
        job: { ...job, payload },
        id: job.id,
        attempt: job.attempt,
        // Made on first use: most handlers read neither.
        get signal() {
          return controller.signal;
        },
        heartbeat: () => this.heartbeatOne(running),
        pauseKey: (until, key) => this.pauseKey(job, until, key),
        get log() {
          log ??= childLogger(logger, { jobId: job.id, kind: job.kind, attempt: job.attempt });
          return log;
        },
      };
      const result = inSpan(span, () => Promise.resolve().then(() => (entry.handler as Handler)(payload, ctx)));
      // A handler that rejects after we stopped waiting must never become an unhandled rejection.
      result.catch(() => undefined);
      if (this.jobTimeoutMs === undefined) {
        await result;
      } else {
        const limit = this.jobTimeoutMs;
        await Promise.race([
          result,
          new Promise((_, reject) => {
            timer = setTimeout(() => {
              const error = new SkipqError("SKIPQ_JOB_TIMEOUT", `job ran longer than jobTimeout (${limit} ms)`);
              controller.abort(error);
              reject(error);
            }, limit);
          }),
        ]);
      }
    } catch (error) {
      failure = error;
      outcome = this.classify(error, controller);
    } finally {
      clearTimeout(timer);
    }
    try {
      if (this.options.hooks?.afterHandlerBeforeOutcome) await this.options.hooks.afterHandlerBeforeOutcome(job);
    } catch (error) {
      this.logger.warn({ err: error }, "skipq: afterHandlerBeforeOutcome hook failed");
    }
    this.inFlight.delete(job.id);
    const tookMs = performance.now() - running.startedAt;
    this.handlerMs = this.handlerMs === undefined ? tookMs : 0.8 * this.handlerMs + 0.2 * tookMs;
    if (running.detached) {
      const code = controller.reason instanceof SkipqError ? controller.reason.code : undefined;
      outcome = code === "SKIPQ_LEASE_LOST" ? "lease-lost" : code === "SKIPQ_CANCEL" ? "cancelled" : "released";
    } else {
      this.record(running, outcome, failure);
    }
    endExecuteSpan(span, outcome, failure);
    this.emit("jobEnd", job, outcome, performance.now() - running.startedAt, failure);
  }

  private classify(error: unknown, signal: { aborted: boolean; reason: unknown }): Outcome {
    if (error instanceof RetryIn) return "snoozed";
    if (error instanceof FailPermanently) return "dead";
    if (error instanceof CancelJob) return "cancelled";
    if (signal.aborted && signal.reason instanceof SkipqError && signal.reason.code === "SKIPQ_SHUTDOWN")
      return "released";
    return "retry";
  }

  private record(running: Running, outcome: Outcome, error: unknown): void {
    const { job, lease } = running;
    switch (outcome) {
      case "completed":
        this.completions.push([job.id, lease]);
        break;
      case "snoozed":
        this.settlements.push({
          id: job.id,
          lease,
          action: "snooze",
          error: null,
          delayMs: (error as RetryIn).delayMs,
          fingerprint: null,
        });
        break;
      case "dead":
        this.settlements.push({
          id: job.id,
          lease,
          action: "dead",
          error: formatError(error),
          delayMs: 0,
          fingerprint: errorFingerprint(job.kind, error),
        });
        break;
      case "cancelled":
        this.settlements.push({
          id: job.id,
          lease,
          action: "cancel",
          error: formatError(error),
          delayMs: 0,
          fingerprint: null,
        });
        break;
      case "released":
        this.stats.released++;
        this.settlements.push({ id: job.id, lease, action: "release", error: null, delayMs: 0, fingerprint: null });
        break;
      default:
        this.stats.failed++;
        this.settlements.push({
          id: job.id,
          lease,
          action: "retry",
          error: formatError(error),
          delayMs: backoffMs(job.attempt, this.backoff),
          fingerprint: errorFingerprint(job.kind, error),
        });
    }
    this.scheduleFlush();
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // Let the completions of this tick gather into one statement.
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush();
    });
  }

  /** Writes buffered outcomes; one flush at a time, retried on connection errors. */
  private async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (this.completions.length === 0 && this.settlements.length === 0) return;
    this.flushing = this.flushNow().finally(() => {
      this.flushing = undefined;
    });
    await this.flushing;
    // Under limits a slot is free only once the outcome is recorded: claim again now, not at the next poll.
    if (this.claimer.limited.size > 0) this.wakeup.wake();
    if (this.completions.length > 0 || this.settlements.length > 0) await this.flush();
  }

  private async flushNow(): Promise<void> {
    const completions = this.completions.splice(0, this.outcomeBatchSize);
    const settlements = this.settlements.splice(0, this.outcomeBatchSize);
    for (let attempt = 1; ; attempt++) {
      try {
        // Settlements first: a job that failed before another completed is recorded before it.
        if (settlements.length > 0) {
          const sql = this.client.sql.jobSettleMany;
          const { rows } = await this.pool.query(
            this.client.statement(sql, [
              settlements.map((s) => s.id),
              settlements.map((s) => s.lease),
              settlements.map((s) => s.action),
              settlements.map((s) => s.error),
              settlements.map((s) => s.delayMs),
              settlements.map((s) => s.fingerprint),
            ]),
          );
          this.noteStale(
            settlements.map((s) => s.id),
            rows,
          );
          settlements.length = 0;
        }
        if (completions.length > 0) {
          const sql = this.client.sql.jobCompleteMany;
          const { rows } = await this.pool.query(
            this.client.statement(sql, [completions.map((c) => c[0]), completions.map((c) => c[1])]),
          );
          this.stats.completed += rows.length;
          this.noteStale(
            completions.map((c) => c[0]),
            rows,
          );
          completions.length = 0;
        }
        return;
      } catch (error) {
        this.emit("warning", error, "outcome");
        // Outcomes are retried until their leases would have expired anyway; then the reaper takes over.
        if (attempt * 250 > this.lockTimeoutMs || this.state === "stopped") {
          this.logger.error(
            { err: error, jobs: completions.length + settlements.length },
            "skipq: could not record outcomes; their leases will expire and the jobs run again",
          );
          return;
        }
        if (attempt === 1) this.logger.warn({ err: error }, "skipq: recording outcomes failed; retrying");
        await new Promise((r) => setTimeout(r, Math.min(2000, 50 * 2 ** attempt)));
      }
    }
  }

  private noteStale(sent: string[], rows: Array<{ id: string }>): void {
    if (rows.length === sent.length) return;
    const accepted = new Set(rows.map((r) => r.id));
    const stale = sent.filter((id) => !accepted.has(id));
    this.stats.staleOutcomes += stale.length;
    this.logger.warn(
      { jobs: stale },
      "skipq: outcomes rejected because the jobs' leases had moved on (expired and reclaimed, or cancelled)",
    );
    this.emit("staleOutcome", stale);
  }

  private async heartbeatAll(): Promise<void> {
    const held = [...this.inFlight.values()].filter((r) => !r.detached);
    if (held.length === 0) return;
    try {
      const sql = this.client.sql.jobHeartbeatMany;
      const { rows } = await this.pool.query(
        this.client.statement(sql, [held.map((r) => r.job.id), held.map((r) => r.lease), this.lockTimeoutMs]),
      );
      if (rows.length === held.length) return;
      const alive = new Set(rows.map((r: { id: string }) => r.id));
      for (const running of held) if (!alive.has(running.job.id)) this.loseLease(running);
    } catch (error) {
      this.emit("warning", error, "heartbeat");
      this.logger.warn({ err: error }, "skipq: heartbeat failed; will retry at the next interval");
    }
  }

  private async heartbeatOne(running: Running): Promise<boolean> {
    if (running.detached) return false;
    const sql = this.client.sql.jobHeartbeatMany;
    const { rows } = await this.pool.query(
      this.client.statement(sql, [[running.job.id], [running.lease], this.lockTimeoutMs]),
    );
    if (rows.length === 1) return true;
    this.loseLease(running);
    return false;
  }

  private loseLease(running: Running): void {
    if (running.detached || !this.inFlight.has(running.job.id)) return;
    running.detached = true;
    this.stats.leasesLost++;
    this.logger.warn(
      { jobId: running.job.id },
      "skipq: lease lost (expired and reaped, or cancelled); aborting the handler, its outcome will not be recorded",
    );
    running.controller.abort(new SkipqError("SKIPQ_LEASE_LOST", `the lease on job ${running.job.id} was lost`));
    this.emit("leaseLost", running.job);
  }

  /** Control messages on the schema's channel: "!cancel:<id>" aborts that job here at once; "!flow" re-reads limits. */
  private control(message: string): void {
    if (message === "!flow") {
      void this.claimer.refresh().then(() => this.wakeup.wake());
      return;
    }
    if (!message.startsWith("!cancel:")) return;
    const running = this.inFlight.get(message.slice("!cancel:".length));
    if (!running || running.detached) return;
    // The operator's cancel already ended the job (status cancelled, lease cleared): only the handler is left to stop.
    running.detached = true;
    this.logger.info({ jobId: running.job.id }, "skipq: job cancelled by an operator; aborting its handler");
    running.controller.abort(new SkipqError("SKIPQ_CANCEL", `job ${running.job.id} was cancelled`));
  }

  private pauseKey(job: Job, until: Date | Duration, key: string | null | undefined): Promise<Date> {
    const k = key === undefined ? job.concurrencyKey : key === null ? null : assertKey(key, "key");
    return this.claimer.pauseKey(
      job.queue,
      k,
      until instanceof Date ? { at: assertDate("until", until) } : { ms: toMs("until", until, { allowZero: false }) },
    );
  }

  private async shutdown(): Promise<void> {
    await this.loop;
    // Buffered jobs never started: hand them back at once, their attempt not consumed.
    for (const running of this.buffer.splice(0)) {
      running.detached = true;
      this.inFlight.delete(running.job.id);
      this.record(running, "released", undefined);
      running.settle();
    }
    await this.reaper?.stop();
    const hard = new Promise<void>((resolve) => {
      this.hardStop = resolve;
    });
    const settled = () => Promise.all([...this.inFlight.values()].map((r) => r.done)).then(() => undefined);
    if (this.inFlight.size > 0) {
      this.logger.info(
        { running: this.inFlight.size, timeoutMs: this.shutdownMs },
        "skipq: stopping; waiting for running jobs",
      );
      await Promise.race([settled(), delay(this.shutdownMs), hard]);
    }
    if (this.inFlight.size > 0) {
      const reason = new SkipqError("SKIPQ_SHUTDOWN", "the worker is shutting down");
      for (const running of this.inFlight.values()) running.controller.abort(reason);
      await Promise.race([settled(), delay(this.abortGraceMs)]);
    }
    // Handlers that ignored their signal: release their jobs now; their late outcomes are fenced out.
    for (const running of [...this.inFlight.values()]) {
      if (running.detached) continue;
      running.detached = true;
      this.record(running, "released", undefined);
    }
    await this.flush();
    clearInterval(this.heartbeatTimer);
    this.state = "stopped";
    await this.closeResources();
    this.emit("stopped");
  }

  private async closeResources(): Promise<void> {
    clearInterval(this.heartbeatTimer);
    this.claimer.stop();
    await this.listener?.stop();
    await this.reaper?.stop();
    await this.presence?.stop();
    if (this.ownsPool) await this.pool.end().catch(() => undefined);
  }
}

/**
 * Errors that mean "the database is not reachable right now" (refused, reset,
 * shutting down, starting up, out of connections), by code, never by message:
 * worth waiting for, unlike a wrong schema or bad credentials.
 */
function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EHOSTUNREACH|ENETUNREACH|EPIPE|EAI_AGAIN)$/.test(code)) return true;
  // SQLSTATE class 08 (connection exception), 57P01-57P03 (admin shutdown, crash shutdown, cannot connect now), 53300 (too many connections).
  return code.startsWith("08") || code === "57P01" || code === "57P02" || code === "57P03" || code === "53300";
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}
