/**
 * The worker's types: what a handler sees (Job, JobContext), the options and
 * events of a Worker, and the record of a held job (Running) that the parts
 * of src/worker/ pass between them.
 */
import type { Context as TraceContext } from "@opentelemetry/api";
import type pg from "pg";
import type { BackoffOptions } from "../core/backoff.js";
import type { Logger } from "../core/logger.js";
import type { DetachedOutcome, Outcome } from "../core/outcome.js";
import type { ErrorRedactor } from "../core/secrets.js";
import type { Duration } from "../core/validate.js";
import type { InsertRow } from "../db/jobStore.js";
import type { Queryable } from "../db/queryable.js";
import type { BulkItem, CheckedItem, CheckedItems } from "../enqueue/enqueuer.js";
import type { LocalService, MaintenanceOptions } from "../maintenance/maintainer.js";
import type { LazyAbortController } from "../shared/lazyAbort.js";
import type { ParentOutcome } from "../workflow/parents.js";

export type { ParentOutcome };

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
  /**
   * A logger bound to this job (pino-style: `ctx.log.info({ rows }, "imported")`). It writes to the worker's
   * logger, and its info, warn and error lines are also kept with this attempt and stored with the job
   * (`skipq job <id>`, the dashboard, `getJob(id).attempt_logs`; see the worker's `attemptLogLines`).
   */
  log: Logger;
  /**
   * Pauses a concurrency key of this job's queue until a time (a Date, compared
   * with the database clock) or for a duration ("30s"): no worker starts a job
   * with that key meanwhile — e.g. on a provider's Retry-After. The key defaults
   * to this job's; pass null (or omit it for a job without a key) to pause the
   * whole queue. Then usually `throw new RetryIn(ms)` to run this job again later.
   */
  pauseKey(until: Date | Duration, key?: string | null): Promise<Date>;
  /**
   * Reports progress: a number from 0 to 100, or a small JSON object (at most 1 KiB encoded, e.g.
   * `{ done: 40, total: 120 }`). Emitted at once as the worker's `progress` event; stored with the job
   * (`getJob(id).progress`) by the next heartbeat, at most `progressInterval` later. Call it as often as
   * you like: the writes are coalesced. Resolves once noted; rejects with ValidationError on a bad value.
   */
  progress(value: number | Record<string, unknown>): Promise<void>;
  /**
   * Workflows: this job's parents (its `dependsOn`) by id, each with its kind, outcome and result (what its
   * handler returned). Empty for a job without parents.
   */
  parents: Readonly<Record<string, ParentOutcome>>;
  /**
   * Workflows: fan-out from a handler. The children (enqueueMany items) and, with `then`, a continuation
   * job depending on all of them (its onParentFailure applies) are enqueued in the transaction that records
   * this job's success: they exist if and only if that outcome commits (nothing, if the handler then throws
   * or the lease was lost). Validated now; may be called more than once.
   */
  spawn<T extends ReadonlyArray<BulkItem>, Then extends BulkItem = BulkItem>(
    children: T & CheckedItems<T>,
    options?: { then?: Then & CheckedItem<Then> },
  ): Promise<void>;
  /**
   * Completes this job inside your own transaction (docs/jobs.md, "Completion inside your transaction"):
   * `client` is the node-postgres client your transaction runs on (or a driver adapter, as for enqueueTx:
   * `postgresJsQueryable(tx)`, `kyselyQueryable(trx)`, `drizzleQueryable(tx, sql)`, `knexQueryable(trx)`,
   * `prismaQueryable(tx)`). The completion (with `result`, when given, stored as the job's result, and the
   * children of `ctx.spawn`) is written there, fenced by this attempt's lease: the job is completed exactly
   * when your transaction commits, and not at all if it rolls back. Rejects before you commit, writing
   * nothing, with LeaseLostError when the attempt no longer holds the job, and with AlreadyCompletedError
   * when this attempt already completed it. Once it resolves, the worker records no other outcome for the
   * attempt unless your transaction rolls back (then whatever the handler does next counts, as without
   * completeTx); commit or roll back before the handler returns. The lease is not extended after the call.
   */
  completeTx(client: Queryable, result?: unknown): Promise<void>;
}

/**
 * A job's handler. What it resolves with (anything but `undefined`) is stored as the job's result
 * (docs/jobs.md, "Results"): plain JSON, at most the worker's `maxResultBytes`.
 */
/**
 * Worker middleware (`worker.use`, docs/jobs.md): runs around every handler of the worker, with the job's
 * context; `next()` runs the rest of the chain and the handler, and resolves with the handler's return value
 * (which is stored as the job's result whatever the middleware returns). Throwing fails the attempt like a
 * handler's throw; returning without calling `next()` completes the job without running the handler.
 */
export type WorkerMiddleware = (ctx: JobContext, next: () => Promise<unknown>) => unknown | Promise<unknown>;

/** A job's handler: its resolved value is the job's result (of type `R` for a definition that declares one). */
export type Handler<P = unknown, R = unknown> = (payload: P, ctx: JobContext<P>) => R | Promise<R>;

/**
 * A job of a batch (`worker.registerBatch`, docs/jobs.md "Batch handlers"): the job's fields, and its own
 * outcome when it should differ from the batch's. Call these before the handler returns; the last call wins.
 */
export interface BatchJob<P = unknown> extends Job<P> {
  /**
   * Fails this job alone, as if its handler had thrown `error`: retried by its own retry policy (dead on its
   * last attempt), or as the error says (`FailPermanently`, `RetryIn`, `CancelJob`). Wins over the batch's
   * return value and over a throw.
   */
  fail(error: unknown): void;
  /** Runs this job alone again after `delay` (ms or "10s"), like throwing `RetryIn` from a single handler. */
  retry(delay: Duration): void;
}

/** The context of one batch call: one signal, one heartbeat, one logger for the whole batch. */
export interface BatchContext<P = unknown> {
  jobs: ReadonlyArray<BatchJob<P>>;
  /**
   * Aborts for the whole batch: on shutdown (after the soft timeout), on the worker's jobTimeout (which
   * times the batch call), and when any job of the batch is cancelled or loses its lease (that job's outcome
   * is then not recorded; a throw after such an abort releases the batch's other jobs unharmed).
   */
  signal: AbortSignal;
  /** Extends the lease of every job of the batch now (also done automatically). False when all are lost. */
  heartbeat(): Promise<boolean>;
  /** A logger bound to the batch (its kind and size). */
  log: Logger;
}

/**
 * A batch handler: resolves with nothing (every job completed), an array with one entry per job in order
 * (a result to store, `undefined` for none, or an Error to fail that job), or throws (every job fails, each
 * by its own retry policy). `jobs[i].fail()` / `jobs[i].retry()` override either for that job.
 */
export type BatchHandler<P = unknown, R = unknown> = (
  jobs: ReadonlyArray<BatchJob<P>>,
  ctx: BatchContext<P>,
) => BatchReturn<R> | Promise<BatchReturn<R>>;

/** What a batch handler returns: nothing, or one entry per job. */
// biome-ignore lint/suspicious/noConfusingVoidType: an async handler without a return statement resolves `void`, which must type-check as "nothing"
export type BatchReturn<R> = void | undefined | ReadonlyArray<R | Error | undefined>;

/** `worker.registerBatch` options. */
export interface BatchHandlerOptions {
  /** Most jobs per handler call (1 to 1000). A batch occupies one of the worker's `concurrency` slots. */
  size: number;
  /**
   * How long (ms) a partial batch may wait in the worker for more jobs of its kind before it is handed over.
   * Default 0: whatever the claims so far returned.
   */
  waitMs?: number | undefined;
}

export interface WorkerOptions {
  /** Queues to take jobs from. Default ["default"]. */
  queues?: string[] | undefined;
  /** Handlers running at once. Default 10. */
  concurrency?: number | undefined;
  /**
   * Most jobs taken per claim; a claim never takes more than the free slots plus the free prefetch room.
   * Default: concurrency + prefetch (at most 1000).
   */
  batchSize?: number | undefined;
  /**
   * Most jobs claimed ahead of free slots and held (leased, heartbeated) in a local buffer, so the next claim
   * overlaps running handlers and each claim commits more jobs. The worker buffers only about two claim
   * round trips' worth of work at its measured handler speed: fast handlers get up to this many, slow ones
   * next to none, and never more than the handlers can start within a quarter of the lease. A job enqueued
   * later with a higher priority waits behind at most this many. After a partition longer than the lease, the
   * jobs this worker held (running and buffered, at most concurrency + prefetch) are run again elsewhere;
   * buffered ones it could not confirm for a whole lease are handed back, not started (docs/deployment.md). 0 claims only for free
   * slots. Default 1000.
   */
  prefetch?: number | undefined;
  /** How long a claim (and each heartbeat) leases a job; an expired lease is reaped. At least 500 ms. Default "30s". */
  lockTimeout?: Duration | undefined;
  /** How often running jobs' leases are extended. Default lockTimeout / 3. */
  heartbeatInterval?: Duration | undefined;
  /**
   * Longest idle wait between claims when no notification arrives; an idle worker also wakes when a job it
   * knows of falls due (its own retries and snoozes, the next due job of its queues). Default "1s".
   */
  pollInterval?: Duration | undefined;
  /** On stop, how long in-flight handlers may finish before their signals abort. Default "10s". */
  shutdownTimeout?: Duration | undefined;
  /** After aborting, how long handlers get to settle before their jobs are released. Default "1s". */
  abortGrace?: Duration | undefined;
  /** Per-job time limit: the signal aborts, the job fails (retry) and the slot is freed. Default: none. */
  jobTimeout?: Duration | undefined;
  /**
   * Priority aging: a job runnable for longer than this is claimed before any
   * other, oldest first, as if it had top priority, so a flood of high-priority
   * work cannot starve it. Default: none (strict priority order).
   */
  priorityAging?: Duration | undefined;
  /** Retry backoff after a failure. Default { baseMs: 1000, maxMs: 3_600_000, jitter: 0.2 }. */
  backoff?: Partial<BackoffOptions> | undefined;
  /**
   * Run the maintainer in this process: it takes part in electing the schema's leader, which reaps
   * expired leases and applies retention (docs/architecture.md). false: none of it here. Default true.
   */
  maintenance?: boolean | MaintenanceOptions | undefined;
  /** Time between reaper passes (same as `maintenance.reaperInterval`). Default "5s". */
  reaperInterval?: Duration | undefined;
  /** A cron `Scheduler` this worker runs (started and stopped with it). Default: none. */
  scheduler?: LocalService | undefined;
  /** LISTEN for new jobs on a dedicated connection. Default true (needs a connection string). */
  listen?: boolean | undefined;
  /** Connection string for the LISTEN connection, e.g. a direct one when the pool goes through PgBouncer. Default: the client's. */
  listenConnectionString?: string | undefined;
  /** A pg pool for the worker's bookkeeping; must fit claim + outcomes + heartbeat + maintenance + one per handler. Default: skipq creates a pool of 5 (a second claim connection, so two claims can be in flight). */
  pool?: pg.Pool | undefined;
  /** Identifies this worker in locked_by. Default host:pid:random. */
  workerId?: string | undefined;
  /** Most outcomes recorded per statement. Default 2000. */
  outcomeBatchSize?: number | undefined;
  /**
   * Lines of `ctx.log` (info, warn, error) kept per attempt and stored with the job (docs/jobs.md, "Attempt
   * logs"); a job keeps its 10 most recent attempts' lines. 0 keeps none (ctx.log then only writes to the
   * worker's logger). Default 100.
   */
  attemptLogLines?: number | undefined;
  /**
   * Longest time a `ctx.progress()` value waits before it is written (with a heartbeat of the jobs that
   * have one). Default "1s".
   */
  progressInterval?: Duration | undefined;
  /**
   * Largest result a handler may return, encoded as JSON, in bytes (docs/jobs.md, "Results"). A larger
   * one, or one JSON cannot store unchanged, fails the attempt with ResultTooLargeError or
   * ResultNotJsonError. Default 65536 (64 KiB).
   */
  maxResultBytes?: number | undefined;
  /** Record this worker's id, queues and kinds in the workers table (for health checks), off the claim path. Default true. */
  presence?: boolean | undefined;
  /** Time between presence upserts; a worker not seen for three intervals counts as gone. Default "10s". */
  presenceInterval?: Duration | undefined;
  /** Check the schema version at start (refuse a database newer or older than this code). Default true. */
  checkSchema?: boolean | undefined;
  /**
   * Applied to every error text before it is stored in last_error (and so before the CLI or dashboard show
   * it). Default: the job's own secrets (string values under secret-looking keys of its payload and
   * headers), `key=value` pairs with secret-looking keys, and bearer tokens become `[redacted]`.
   * `false` stores errors as they are.
   */
  redactError?: ErrorRedactor | false | undefined;
  /** @internal Fault-injection hooks for the chaos suite. */
  hooks?: WorkerHooks | undefined;
}

/** @internal Named points where the chaos suite injects faults. */
export interface WorkerHooks {
  afterClaimCommit?: (jobs: ReadonlyArray<Job>) => void | Promise<void>;
  afterHandlerBeforeOutcome?: (job: Job) => void | Promise<void>;
}

/** How an attempt ended, and what each means for the job's status: core/outcome.ts. */
export type { DetachedOutcome, Outcome };

/**
 * Where a held job is in its local life (heldJobs.ts owns the transitions): waiting in the prefetch buffer,
 * running, lost (lease gone or cancelled) or handed back while it ran, or gone from the worker.
 */
export type HeldState = "buffered" | "running" | "lost" | "handed-back" | "finished";

/** How a non-empty claim went: its round trip, and the database time it took the jobs (all share it). */
export interface ClaimInfo {
  durationMs: number;
  claimedAt: Date;
}

export interface WorkerEvents {
  claimed: [jobs: ReadonlyArray<Job>, info: ClaimInfo];
  jobStart: [job: Job];
  jobEnd: [job: Job, outcome: Outcome, durationMs: number, error: unknown];
  /** A handler called `ctx.progress(value)` (emitted on every call; the stored value is written coalesced). */
  progress: [job: Job, value: unknown];
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

/** A job this worker holds the lease of: waiting in the prefetch buffer, or running. */
export interface Running {
  job: Job;
  lease: string;
  controller: LazyAbortController;
  startedAt: number;
  /** The claim span's context, for the execution span (OpenTelemetry). */
  trace: TraceContext | undefined;
  /** Where it is in its local life; only HeldJobs (heldJobs.ts) changes it. */
  readonly state: HeldState;
  /** Its outcome must not be written: lease lost, cancelled, or handed back (set by HeldJobs). */
  readonly detached: boolean;
  /** Its handler started: false while it waits in the prefetch buffer (set by HeldJobs). */
  readonly started: boolean;
  /** Why it is detached, as a sentence for an error ("its lease expired"); undefined while it is not. */
  readonly detachedReason: string | undefined;
  /**
   * When the database last confirmed this lease (performance.now() as the claim or heartbeat was sent):
   * a buffered job not confirmed for a whole lease is handed back, never started here.
   */
  confirmedAt: number;
  /** Resolves when the job is settled: its handler ended, or it left the buffer without running. */
  done: Promise<void>;
  settle: () => void;
  /** The last `ctx.progress()` value, encoded (set only for jobs that report progress). */
  progress?: string;
  /** `progress` is not written yet. */
  progressDirty?: boolean;
  /** Workflows: rows its handler spawned (one array per ctx.spawn call), enqueued with its success. */
  spawns?: InsertRow[][];
  /** The attempt's `ctx.log` lines (set once the handler reads `ctx.log`), stored with its outcome. */
  attemptLines?: AttemptLines;
  /**
   * ctx.completeTx wrote (or, with `xid` undefined, is writing) this job's completion in the caller's
   * transaction `xid`: no heartbeat touches the row while that transaction may hold it, and the handler's
   * own outcome counts only if it rolled back.
   */
  completedTx?: { xid: string | undefined };
}

/** The `ctx.log` lines of one attempt, before its outcome is known (see attemptLog.ts). */
export interface AttemptLines {
  startedAt: string;
  lines: Array<Record<string, unknown>>;
  dropped: number;
}

export interface WorkerStats {
  claimed: number;
  completed: number;
  failed: number;
  staleOutcomes: number;
  leasesLost: number;
  released: number;
}
