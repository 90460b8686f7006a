/**
 * The worker: its lifecycle, and the wiring of its parts — handlers (kinds,
 * middleware), held jobs (each leased job's local life), the fetcher (claims)
 * and its slots (buffer, running handlers), the executor (batch.ts for a
 * batch), the completer, leases, the listener and its messages
 * (notifications.ts), presence and the maintainer (loops.ts). The stop's
 * draining is in drain.ts, the start's schema wait in schemaWait.ts.
 *
 * Invariants: a claim is committed before its handlers start; it never holds a
 * transaction open while a handler runs; every outcome, heartbeat and release
 * presents the job's lease, so a worker that lost its lease changes nothing;
 * at stop, buffered jobs go back at once and running ones get
 * `shutdownTimeout`, then their signals abort, then (after `abortGrace`) their
 * jobs are released without consuming the attempt. Batch kinds (registerBatch)
 * run in batch.ts, one slot per batch.
 */

import { EventEmitter } from "node:events";
import type pg from "pg";
import type { JobDefinition, PayloadOf, ResultOf } from "../core/job.js";
import { childLogger, type Logger } from "../core/logger.js";
import { pauseTarget } from "../core/pause.js";
import { defaultErrorRedactor } from "../core/secrets.js";
import { assertKey, type Duration } from "../core/validate.js";
import { JobFeatureStore } from "../db/jobFeatureStore.js";
import { JobStore } from "../db/jobStore.js";
import { type Listener, workerListener } from "../db/listener.js";
import type { ResolvedSettings } from "../db/pool.js";
import type { Store } from "../db/store.js";
import type { Enqueuer } from "../enqueue/enqueuer.js";
import type { Maintainer } from "../maintenance/maintainer.js";
import { ParentsLoader } from "../workflow/parents.js";
import { completeSpawning, prepareSpawn } from "../workflow/spawning.js";
import { Claimer } from "./claimer.js";
import { Completer } from "./completer.js";
import type { CompleteTxParts } from "./completeTx.js";
import { drainJobs } from "./drain.js";
import { Executor } from "./executor.js";
import { Fetcher } from "./fetcher.js";
import { Handlers } from "./handlers.js";
import { HeldJobs } from "./heldJobs.js";
import { Leases } from "./leases.js";
import { workerMaintainer, workerPresence } from "./loops.js";
import { listenerConnected, type NotificationTargets, routeNotification } from "./notifications.js";
import type { Presence } from "./presence.js";
import { waitForSchema } from "./schemaWait.js";
import { type WorkerSettings, workerPool, workerSettings } from "./settings.js";
import type {
  BatchHandler,
  BatchHandlerOptions,
  Handler,
  Job,
  WorkerEvents,
  WorkerMiddleware,
  WorkerOptions,
  WorkerStats,
} from "./types.js";

/** The worker's vocabulary (handlers, contexts, options, events), for those who import it from here. */
export type * from "./types.js";

/** What a worker needs of the client that makes it. */
export interface WorkerHost {
  store: Store;
  pool: pg.Pool;
  connectionString: string | undefined;
  logger: Logger;
  /** The client's enqueuer, for ctx.spawn (workflows). */
  enqueuer?: Enqueuer;
  /** Sent with the connections the worker opens (its pool, its listener). */
  sessionSettings: ResolvedSettings;
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
  /** Leader election, reaper and retention, when `maintenance` is on. */
  readonly maintainer: Maintainer | undefined;
  readonly pool: pg.Pool;
  /** Chooses and runs the claim statement (plain, aging, or limited). */
  readonly claimer: Claimer;

  private readonly settings: WorkerSettings;
  private readonly store: Store;
  /** Kinds, their handlers, and middleware. */
  private readonly handlers: Handlers;
  /** Every job whose lease this worker holds (buffered or running), and its transitions; a job handed back is released through the completer. */
  private readonly held = new HeldJobs((running) => this.completer.record(running, "released", undefined));
  private readonly fetcher: Fetcher;
  private readonly completer: Completer;
  private readonly leases: Leases;
  private readonly presence: Presence | undefined;
  private readonly logger: Logger;
  private readonly ownsPool: boolean;
  private state: "idle" | "running" | "stopping" | "stopped" = "idle";
  private loop: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private hardStop: (() => void) | undefined;

  constructor(
    host: WorkerHost,
    private readonly options: WorkerOptions = {},
  ) {
    super();
    const s = workerSettings(options);
    this.settings = s;
    this.handlers = new Handlers(Math.floor(s.lockTimeoutMs / 2));
    this.id = s.id;
    this.queues = s.queues;
    this.concurrency = s.concurrency;
    this.prefetch = s.prefetch;
    this.batchSize = s.batchSize;
    this.logger = childLogger(host.logger, { worker: this.id });
    const { pool, owned, maxClaims } = workerPool(host, options, s, this.logger);
    this.pool = pool;
    this.ownsPool = owned;
    this.store = host.store.withPool(pool);
    const jobs = new JobStore(this.store);
    const warn = (context: string) => (error: unknown) => this.emit("warning", error, context);
    const redactError =
      options.redactError === false ? (text: string) => text : (options.redactError ?? defaultErrorRedactor);

    this.claimer = new Claimer({
      jobs,
      queues: s.queues,
      workerId: s.id,
      leaseMs: s.lockTimeoutMs,
      agingMs: s.agingMs,
      refreshMs: 5000,
      // A job put behind the floors without a '!ready' (a plain SQL insert in a transaction longer than the
      // floors' margin, an aborted claim's rows) waits at most this long.
      sweepEveryMs: Math.max(1000, 10 * s.pollMs),
      logger: this.logger,
    });
    const features = new JobFeatureStore(this.store);
    const enqueuer = () => host.enqueuer;
    this.completer = new Completer({
      jobs,
      features,
      logger: this.logger,
      stats: this.stats,
      backoff: s.backoff,
      outcomeBatchSize: s.outcomeBatchSize,
      lockTimeoutMs: s.lockTimeoutMs,
      stopped: () => this.state === "stopped",
      onStale: (ids) => this.emit("staleOutcome", ids),
      onWarning: warn("outcome"),
      redactError,
      workerId: s.id,
      // Under limits a slot is free only once its outcome is recorded, and a full backlog blocks claims
      // until written: claim again now, not at the next poll.
      onFlushed: () => this.fetcher.wakeup.wake(),
      onDue: (delayMs) => this.fetcher.noteDue(delayMs),
      completeSpawning: (id, lease, result, rows) =>
        completeSpawning({ pool, jobs, features, enqueuer }, id, lease, result, rows),
    });
    this.leases = new Leases({
      jobs,
      features,
      progressMs: s.progressMs,
      held: this.held,
      leaseMs: s.lockTimeoutMs,
      heartbeatMs: s.heartbeatMs,
      logger: this.logger,
      stats: this.stats,
      onLost: (running) => this.emit("leaseLost", running.job),
      onWarning: warn("heartbeat"),
    });
    const parents = new ParentsLoader(jobs);
    const completeTxParts: CompleteTxParts = {
      jobs,
      features,
      enqueuer,
      maxResultBytes: s.maxResultBytes,
      workerId: s.id,
      stats: this.stats,
      settleProgress: (running) => this.leases.settleProgress(running),
    };
    const executor = new Executor({
      handlers: this.handlers,
      held: this.held,
      logger: this.logger,
      jobTimeoutMs: s.jobTimeoutMs,
      hooks: options.hooks,
      leases: this.leases,
      completer: this.completer,
      completeTx: completeTxParts,
      onProgress: (job, value) => this.emit("progress", job, value),
      pauseKey: (job, until, key) => this.pauseKey(job, until, key),
      maxResultBytes: s.maxResultBytes,
      attemptLogLines: s.attemptLogLines,
      redactError,
      parents: (job) => parents.load(job.id),
      prepareSpawn: (children, then) => prepareSpawn(enqueuer, children, then),
      onStart: (job) => this.emit("jobStart", job),
      onEnd: (job, outcome, durationMs, error, perJobMs) => {
        this.fetcher.noteHandlerMs(perJobMs ?? durationMs);
        this.emit("jobEnd", job, outcome, durationMs, error);
      },
    });
    this.fetcher = new Fetcher({
      claimer: this.claimer,
      queues: s.queues,
      concurrency: s.concurrency,
      prefetch: s.prefetch,
      leaseMs: s.lockTimeoutMs,
      batchSize: s.batchSize,
      maxClaims,
      pollMs: s.pollMs,
      nextDue: () => jobs.nextDueMs(s.queues),
      held: this.held,
      stats: this.stats,
      logger: this.logger,
      hooks: options.hooks,
      running: () => this.state === "running" || this.state === "idle",
      completer: this.completer,
      handlers: this.handlers,
      executor,
      onClaimed: (jobs, info) => this.emit("claimed", jobs, info),
      onIdle: () => this.emit("idle"),
      onWarning: warn("claim"),
    });

    const targets: NotificationTargets = {
      queues: s.queues,
      fetcher: this.fetcher,
      claimer: this.claimer,
      leases: this.leases,
      onWarning: (error) => this.emit("warning", error, "limits"),
    };
    this.listener = workerListener({
      listen: options.listen ?? true,
      url: options.listenConnectionString ?? host.connectionString,
      sessionSettings: host.sessionSettings,
      channel: this.store.schema.channel,
      logger: this.logger,
      onNotify: (message) => routeNotification(targets, message),
      onConnectionChange: (connected) => {
        if (connected) listenerConnected(targets);
        this.emit("listener", connected);
      },
    });
    const loopParts = { options, settings: s, store: this.store, logger: this.logger };
    this.maintainer = workerMaintainer(loopParts, (jobs) => this.emit("reaped", jobs));
    this.presence = workerPresence(loopParts, () => this.kinds);
  }

  /** Registers the handler for a job kind (typed by its definition). Returns this, for chaining. */
  register<J extends JobDefinition<unknown> | string>(job: J, handler: Handler<PayloadOf<J>, ResultOf<J>>): this {
    this.handlers.register(job as JobDefinition<unknown> | string, handler);
    return this;
  }

  /**
   * Registers a batch handler for a job kind (docs/jobs.md, "Batch handlers"): one call for up to
   * `options.size` claimed jobs of that kind; a partial batch is handed over after `options.waitMs`
   * (default 0: whatever the claims so far returned). A batch occupies one of the worker's `concurrency`
   * slots. Outcomes are per job (`jobs[i].fail(err)`, `jobs[i].retry(delay)`, an array of results) or for
   * all (return nothing: all completed; throw: all failed, each by its own retry policy). Middleware and
   * the single-job context's extras (ctx.completeTx, spawn, progress, parents, pauseKey) do not apply.
   * Returns this, for chaining.
   */
  registerBatch<J extends JobDefinition<unknown> | string>(
    job: J,
    options: BatchHandlerOptions,
    handler: BatchHandler<PayloadOf<J>, ResultOf<J>>,
  ): this {
    this.handlers.registerBatch(job as JobDefinition<unknown> | string, options, handler);
    return this;
  }

  /**
   * Adds middleware around every handler of this worker (docs/jobs.md, "Middleware"): tracing, tenant
   * context, auditing. The first added is the outermost. Returns this, for chaining.
   */
  use(middleware: WorkerMiddleware): this {
    this.handlers.use(middleware);
    return this;
  }

  /** Kinds this worker has handlers for. */
  get kinds(): string[] {
    return this.handlers.kinds;
  }

  /** Jobs whose handlers are running now. */
  get running(): number {
    return this.fetcher.slots.activeCount;
  }

  /** Claimed jobs waiting in the prefetch buffer. */
  get buffered(): number {
    return this.fetcher.slots.bufferedCount;
  }

  /** Outcomes recorded but not yet written (at `completer.maxBacklog` the worker claims nothing more). */
  get unwrittenOutcomes(): number {
    return this.completer.backlog;
  }

  /** The reaper, when maintenance runs here. */
  get reaper() {
    return this.maintainer?.reaper;
  }

  /** Starts claiming. Idempotent; resolves once the worker is running (the listener may still be connecting). */
  async start(): Promise<void> {
    if (this.state !== "idle") return;
    this.state = "running";
    if ((this.options.checkSchema ?? true) && !(await this.schemaCurrent())) return;
    void this.listener?.start();
    await this.claimer.start();
    // stop() while start() waited: its shutdown closed what existed; start nothing more.
    if (this.state !== "running") return;
    await this.maintainer?.start();
    if (this.state !== "running") return;
    this.presence?.start();
    this.leases.start();
    this.loop = this.fetcher.loop();
  }

  /** The schema is current (a database still starting is waited for: schemaWait.ts); false if stopped meanwhile. */
  private async schemaCurrent(): Promise<boolean> {
    try {
      return await waitForSchema({
        pool: this.pool,
        schema: this.store.schema.name,
        logger: this.logger,
        wakeup: this.fetcher.wakeup,
        running: () => this.state === "running",
        onWarning: (error) => this.emit("warning", error, "start"),
      });
    } catch (error) {
      this.state = "idle";
      throw error;
    }
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
    this.fetcher.wakeup.wake();
    this.stopping = this.shutdown();
    return this.stopping;
  }

  /**
   * One claim and its handlers, start to recorded outcome: for tests and
   * scripts. Returns the number of jobs claimed.
   */
  async runOnce(): Promise<number> {
    const jobs = await this.fetcher.claim(this.fetcher.claimSize);
    this.fetcher.slots.startBuffered();
    await Promise.all(jobs.map((running) => running.done));
    await this.completer.flush();
    return jobs.length;
  }

  private pauseKey(job: Job, until: Date | Duration, key: string | null | undefined): Promise<Date> {
    const k = key === undefined ? job.concurrencyKey : key === null ? null : assertKey(key, "key");
    return this.claimer.pauseKey(job.queue, k, pauseTarget(until));
  }

  private async shutdown(): Promise<void> {
    await this.loop;
    await drainJobs({
      fetcher: this.fetcher,
      completer: this.completer,
      held: this.held,
      logger: this.logger,
      shutdownMs: this.settings.shutdownMs,
      abortGraceMs: this.settings.abortGraceMs,
      onHardStop: (hardStop) => {
        this.hardStop = hardStop;
      },
    });
    this.leases.stop();
    this.state = "stopped";
    await this.closeResources();
    this.emit("stopped");
  }

  private async closeResources(): Promise<void> {
    this.leases.stop();
    await this.claimer.stop();
    await this.listener?.stop();
    await this.maintainer?.stop();
    await this.presence?.stop();
    if (this.ownsPool) await this.pool.end().catch(() => undefined);
  }
}
