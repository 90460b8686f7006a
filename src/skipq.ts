/**
 * `Skipq`: the handle an application holds. It owns (or borrows) a pg pool
 * and the schema's store, applies migrations, enqueues jobs — alone, in bulk,
 * or inside the caller's own transaction so the job commits or rolls back with
 * their data — and makes workers. A batch's insert and progress are
 * workflow/batches.ts's; waiting is enqueue/waiter.ts's.
 * Invariant: every argument is validated before any SQL is sent (enqueue/prepare.ts).
 */
import type pg from "pg";
import { ValidationError } from "./core/errors.js";
import type { PayloadOf, ResultOf } from "./core/job.js";
import { defaultLogger, type Logger } from "./core/logger.js";
import { assertMiddleware } from "./core/middleware.js";
import { assertInt, type Duration, toMs } from "./core/validate.js";
import { copyJobs } from "./db/copy.js";
import { JobFeatureStore } from "./db/jobFeatureStore.js";
import { JobStore } from "./db/jobStore.js";
import { type MigrateResult, migrate } from "./db/migrate.js";
import { createPool, type ResolvedSettings, resolveSessionSettings, type SessionSettings } from "./db/pool.js";
import type { Queryable } from "./db/queryable.js";
import { Schema } from "./db/schema.js";
import { Store } from "./db/store.js";
import { WorkflowStore } from "./db/workflowStore.js";
import { EnqueueInterceptor, type EnqueueMiddleware } from "./enqueue/enqueueMiddleware.js";
import { Enqueuer } from "./enqueue/enqueuer.js";
import { Notifier } from "./enqueue/notifier.js";
import type { BulkItem, CheckedItem, CheckedItems, EnqueueOptions, EnqueueResult, JobRef } from "./enqueue/options.js";
import { assertItems } from "./enqueue/prepare.js";
import { Waiter, type WaitOptions, type WaitResult } from "./enqueue/waiter.js";
import { moveFinishedJobs } from "./maintenance/history.js";
import { enqueueSpan } from "./shared/telemetry.js";
import { Worker, type WorkerOptions } from "./worker/worker.js";
import { type BatchResult, type BatchStatus, batchStatus, insertBatch } from "./workflow/batches.js";
import { type BatchOptions, batchItems } from "./workflow/graph.js";

export type { Queryable } from "./db/queryable.js";
export type { EnqueueCall, EnqueueMiddleware } from "./enqueue/enqueueMiddleware.js";
export type { BulkItem, CheckedItem, CheckedItems, EnqueueOptions, EnqueueResult, JobRef } from "./enqueue/options.js";
export type { FinishedStatus, WaitOptions, WaitResult } from "./enqueue/waiter.js";
export type { BatchResult, BatchStatus } from "./workflow/batches.js";

export interface SkipqOptions {
  /**
   * PostgreSQL connection string; skipq creates and owns a pool. Default: `DATABASE_URL`. libpq's multi-host
   * syntax works here and wherever skipq connects: `postgres://u@h1:5432,h2:5432/db?target_session_attrs=read-write`
   * (also `primary`, `standby`, `read-only`, `prefer-standby`, `any`; `connect_timeout=<s>` per host). Each new
   * connection tries the hosts in order and keeps the first that fits; a malformed list throws ValidationError.
   */
  connectionString?: string | undefined;
  /** An existing pg pool to use instead (skipq never ends it). */
  pool?: pg.Pool | undefined;
  /**
   * Where reads may go: a standby, or the cluster's host list with `target_session_attrs=prefer-standby`.
   * `Admin` reads (listings, job pages, statistics), the dashboard's pages, `skipq stats` and the metrics'
   * gauges use a pool on it; writes, claims, LISTEN and the health checks (which inspect the primary's sessions)
   * stay on `connectionString`/`pool`. What it shows lags by the replica's replay lag (`Admin.replica()`, shown
   * on the dashboard). Default: none (reads go where writes go).
   */
  readConnectionString?: string | undefined;
  /** Size of the pool skipq creates. Default 10. */
  poolSize?: number | undefined;
  /** Schema holding skipq's tables. Default: `SKIPQ_SCHEMA`, else "skipq". */
  schema?: string | undefined;
  /** Largest encoded payload accepted, in bytes. Default 1 MiB. */
  maxPayloadBytes?: number | undefined;
  /** Use named prepared statements on the hot path. Turn off behind PgBouncer < 1.21 in transaction mode. Default true. */
  preparedStatements?: boolean | undefined;
  /** pino-compatible logger. Default: warnings and errors as JSON on stderr. */
  logger?: Logger | undefined;
  /**
   * `waitFor` and `enqueueAndWait` are woken by a notification (LISTEN on one connection, opened on first
   * use; only with `connectionString`), and read every waited-for job this often in case one was missed.
   * Default "1s".
   */
  waitPollInterval?: Duration | undefined;
  /**
   * PostgreSQL settings sent with every connection skipq opens (its pools and LISTEN connections; never a
   * pool you pass in), by PostgreSQL name, so a network partition never stalls anything forever. Given keys
   * are merged over the defaults (`null` drops one). `false` sends none: needed behind PgBouncer unless its
   * `ignore_startup_parameters` lists `options` — then set the same on the pooler or the role
   * (docs/deployment.md). Default `{ tcp_user_timeout: 10000, tcp_keepalives_idle: 10,
   * tcp_keepalives_interval: 5, tcp_keepalives_count: 3, idle_in_transaction_session_timeout: 60000 }`;
   * a worker's own pool also bounds `statement_timeout` and `idle_in_transaction_session_timeout` by its lease.
   */
  sessionSettings?: SessionSettings | false | undefined;
}

const DEFAULT_MAX_PAYLOAD = 1024 * 1024;

/** The schema option, else SKIPQ_SCHEMA (as the CLI reads it; empty counts as unset), else "skipq". */
function schemaOf(option: string | undefined): Schema {
  if (option !== undefined) return new Schema(option);
  const fromEnv = process.env.SKIPQ_SCHEMA;
  if (fromEnv === undefined || fromEnv.trim() === "") return new Schema("skipq");
  try {
    return new Schema(fromEnv);
  } catch (error) {
    throw new ValidationError(`${(error as Error).message} (from SKIPQ_SCHEMA)`);
  }
}

export class Skipq {
  readonly schema: string;
  /** The quoted schema, safe to splice into your own SQL (e.g. `INSERT INTO ${skipq.schemaSql}.jobs …`). */
  readonly schemaSql: string;
  /** NOTIFY channel of this schema (docs/protocol.md); notifications carry a queue name. */
  readonly channel: string;
  readonly pool: pg.Pool;
  readonly connectionString: string | undefined;
  readonly maxPayloadBytes: number;
  readonly preparedStatements: boolean;
  readonly logger: Logger;
  /** The settings sent with each connection skipq opens (`false`: none). */
  readonly sessionSettings: ResolvedSettings;
  /** @internal The schema's statements over this client's pool. */
  readonly store: Store;
  /** @internal The same over the read pool (`readConnectionString`); `store` itself when there is none. */
  readonly readStore: Store;
  /** @internal Typed job statements over `store`. */
  readonly jobs: JobStore;
  /** @internal Wakes workers after enqueues that committed on skipq's own pool (coalesced NOTIFY). */
  readonly notifier: Notifier;
  /** @internal Validates and inserts jobs (workers use it for ctx.spawn). */
  readonly enqueuer: Enqueuer;
  /** @internal Typed workflow statements over `store` (batches). */
  readonly workflows: WorkflowStore;
  private readonly interceptor = new EnqueueInterceptor();
  private readonly ownsPool: boolean;
  private readonly waitPollMs: number;
  private waiter: Waiter | undefined;
  private closing: Promise<void> | undefined;

  constructor(options: SkipqOptions = {}) {
    const schema = schemaOf(options.schema);
    this.schema = schema.name;
    this.schemaSql = schema.sql;
    this.channel = schema.channel;
    this.maxPayloadBytes = assertInt(
      "maxPayloadBytes",
      options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD,
      2,
      256 * 1024 * 1024,
    );
    this.preparedStatements = options.preparedStatements ?? true;
    this.logger = options.logger ?? defaultLogger;
    this.waitPollMs = toMs("waitPollInterval", options.waitPollInterval ?? "1s", { allowZero: false });
    this.sessionSettings = resolveSessionSettings(options.sessionSettings);
    this.connectionString = options.connectionString ?? (options.pool ? undefined : process.env.DATABASE_URL);
    if (options.pool) {
      this.pool = options.pool;
      this.ownsPool = false;
    } else {
      if (!this.connectionString) {
        throw new ValidationError(
          "no database: pass connectionString or pool, or set DATABASE_URL (e.g. postgres://user@127.0.0.1:5432/db)",
        );
      }
      this.pool = createPool(this.connectionString, options.poolSize ?? 10, this.logger, "skipq", {
        session: this.sessionSettings,
      });
      this.ownsPool = true;
    }
    this.store = new Store(schema, this.pool, { prepared: this.preparedStatements });
    this.readStore = options.readConnectionString
      ? this.store.withPool(
          createPool(options.readConnectionString, options.poolSize ?? 10, this.logger, "skipq-read", {
            session: this.sessionSettings,
          }),
        )
      : this.store;
    this.jobs = new JobStore(this.store);
    this.workflows = new WorkflowStore(this.store);
    this.notifier = new Notifier((queues) => this.jobs.notifyCommitted(queues), this.logger);
    this.enqueuer = new Enqueuer(
      this.jobs,
      new JobFeatureStore(this.store),
      this.pool,
      this.notifier,
      this.maxPayloadBytes,
    );
  }

  /**
   * Applies pending migrations; safe from many processes at once. After an upgrade from the single-table
   * layout (schema 7 or older) it also moves finished jobs to history, in short batches that never hold up
   * workers (any process may share or resume that work; the maintainer finishes it if this is interrupted).
   */
  async migrate(): Promise<MigrateResult> {
    const result = await migrate(this.pool, this.schema);
    // A finished row someone holds locked is skipped; a few more rounds, then the maintainer takes over.
    for (let round = 0; round < 10; round++) {
      const moved = await moveFinishedJobs(this.store, { widthMs: 86_400_000, keepMs: 30 * 86_400_000 });
      if (moved.done) break;
    }
    return result;
  }

  /**
   * Enqueue one job. It commits on its own before this resolves. Concurrent calls share statements, and
   * workers are woken right after the commit by the coalescing notifier.
   */
  enqueue<J extends JobRef<unknown>>(
    job: J,
    payload: PayloadOf<J>,
    options: EnqueueOptions = {},
  ): Promise<EnqueueResult> {
    return this.interceptor.one(job, payload, options, "enqueue", (job, payload, options) =>
      enqueueSpan(options.queue, 1, async (span, traceHeaders) => {
        const row = await this.enqueuer.prepare(job, payload, options, 0, traceHeaders);
        const result =
          row.parents === null
            ? await this.enqueuer.single(row)
            : ((await this.enqueuer.withParents(this.pool, [row], false))[0] as EnqueueResult);
        span.setAttribute("messaging.message.id", result.id);
        return result;
      }),
    );
  }

  /** Enqueue one job inside the caller's transaction: it exists if and only if that transaction commits. */
  enqueueTx<J extends JobRef<unknown>>(
    tx: Queryable,
    job: J,
    payload: PayloadOf<J>,
    options: EnqueueOptions = {},
  ): Promise<EnqueueResult> {
    return this.interceptor.one(job, payload, options, "enqueueTx", (job, payload, options) =>
      enqueueSpan(options.queue, 1, async (span, traceHeaders) => {
        const row = await this.enqueuer.prepare(job, payload, options, 0, traceHeaders);
        const result =
          row.parents === null
            ? await this.enqueuer.insertOne(tx, row, true)
            : ((await this.enqueuer.withParents(tx, [row], true))[0] as EnqueueResult);
        span.setAttribute("messaging.message.id", result.id);
        return result;
      }),
    );
  }

  /**
   * Enqueue many jobs: one round trip per 5,000, all or nothing. Results are in input order.
   * With `{ returning: false }`: the fast path — one COPY, all or nothing, no ids back (resolves with the
   * count), no idempotency keys.
   */
  enqueueMany<T extends ReadonlyArray<BulkItem>>(
    items: T & CheckedItems<T>,
    options?: { returning?: true },
  ): Promise<EnqueueResult[]>;
  enqueueMany<T extends ReadonlyArray<BulkItem>>(
    items: T & CheckedItems<T>,
    options: { returning: false },
  ): Promise<{ count: number }>;
  enqueueMany(
    items: ReadonlyArray<BulkItem>,
    options: { returning?: boolean } = {},
  ): Promise<EnqueueResult[] | { count: number }> {
    const insert = (items: ReadonlyArray<BulkItem>) =>
      enqueueSpan(undefined, Array.isArray(items) ? items.length : 0, async (_, traceHeaders) => {
        if (options.returning !== false)
          return this.enqueuer.many(await this.enqueuer.prepareMany(items, traceHeaders));
        assertItems(items);
        const due = await copyJobs(this.pool, this.store.schema, items.length, (i) =>
          this.enqueuer.prepareItem(items, i, traceHeaders),
        );
        for (const queue of due) this.notifier.nudge(queue);
        return { count: items.length };
      });
    return this.interceptor.many(items, "enqueueMany", insert, (out, i) => (Array.isArray(out) ? out[i] : undefined));
  }

  /** `enqueueMany` inside the caller's transaction. */
  enqueueManyTx<T extends ReadonlyArray<BulkItem>>(tx: Queryable, items: T & CheckedItems<T>): Promise<EnqueueResult[]>;
  enqueueManyTx(tx: Queryable, items: ReadonlyArray<BulkItem>): Promise<EnqueueResult[]> {
    const insert = (items: ReadonlyArray<BulkItem>) =>
      enqueueSpan(undefined, Array.isArray(items) ? items.length : 0, async (_, traceHeaders) => {
        const rows = await this.enqueuer.prepareMany(items, traceHeaders);
        return rows.some((r) => r.parents !== null)
          ? this.enqueuer.withParents(tx, rows, true)
          : this.enqueuer.insertRows(tx, rows, true);
      });
    return this.interceptor.many(items, "enqueueManyTx", insert, (out, i) => out[i]);
  }

  /**
   * Workflows: enqueue `jobs` as a batch, in one transaction, with callbacks that depend on every one of
   * them: `onComplete` runs once all finished (whatever the outcome; its ctx.parents shows each),
   * `onSuccess` once all completed (cancelled if one dies or is cancelled). Follow it with `batchStatus`.
   */
  batch<T extends ReadonlyArray<BulkItem>, C extends BulkItem = BulkItem, S extends BulkItem = BulkItem>(
    jobs: T & CheckedItems<T>,
    options?: { onComplete?: C & CheckedItem<C>; onSuccess?: S & CheckedItem<S> },
  ): Promise<BatchResult>;
  batch(jobs: ReadonlyArray<BulkItem>, options: BatchOptions<BulkItem> = {}): Promise<BatchResult> {
    return enqueueSpan(undefined, Array.isArray(jobs) ? jobs.length : 0, async (_, traceHeaders) => {
      const rows = await this.enqueuer.prepareMany(batchItems(jobs, options), traceHeaders);
      return insertBatch(this, rows, jobs.length, {
        onComplete: options.onComplete !== undefined,
        onSuccess: options.onSuccess !== undefined,
      });
    });
  }

  /** Workflows: a batch's jobs counted by status (live and finished), and its callbacks' ids. */
  batchStatus(id: string | number): Promise<BatchStatus> {
    return batchStatus(this.workflows, id);
  }

  /**
   * Adds middleware around every enqueue of this client — `enqueue`, `enqueueTx`, `enqueueMany`,
   * `enqueueManyTx`, and so `enqueueAndWait` — (docs/jobs.md, "Middleware"): `(call, next) => …` may change
   * `call.payload` or `call.options` (headers, a tenant key) before `next()`, which validates and inserts the
   * job and resolves with its `{ id, created }`. The first added is the outermost. Returns this.
   */
  useEnqueue(middleware: EnqueueMiddleware): this {
    assertMiddleware("useEnqueue", middleware);
    this.interceptor.middleware.push(middleware);
    return this;
  }

  /**
   * Resolves with `{ status, result, error }` once job `id` is completed, dead or cancelled — at once when it
   * already is. Woken by a notification from the statement that finishes the job, with polling as the
   * fallback. Rejects with WaitTimeoutError after `timeout` (the job is not touched), with the signal's
   * reason when `signal` aborts, and with SKIPQ_NOT_FOUND for a job that does not exist (or whose enqueuing
   * transaction has not committed). See docs/jobs.md, "Waiting for a job".
   */
  waitFor<R = unknown>(id: string | number, options: WaitOptions = {}): Promise<WaitResult<R>> {
    return this.jobWaiter().wait<R>(id, options);
  }

  private jobWaiter(): Waiter {
    this.waiter ??= new Waiter({
      features: new JobFeatureStore(this.store),
      connectionString: this.connectionString,
      logger: this.logger,
      pollMs: this.waitPollMs,
      wake: (queue) => this.notifier.nudge(queue),
    });
    return this.waiter;
  }

  /** `enqueue`, then `waitFor` the job (with an idempotency key that exists: the existing job). */
  async enqueueAndWait<J extends JobRef<unknown>, R = ResultOf<J>>(
    job: J,
    payload: PayloadOf<J>,
    options: EnqueueOptions & WaitOptions = {},
  ): Promise<WaitResult<R>> {
    const { timeout, signal, ...enqueueOptions } = options;
    if (signal?.aborted) throw signal.reason;
    const waitOptions: WaitOptions = {};
    if (timeout !== undefined) waitOptions.timeout = timeout;
    if (signal !== undefined) waitOptions.signal = signal;
    const waiter = this.jobWaiter();
    // Listening before the job exists: a deletion of it is then announced to us, however soon it comes.
    await waiter.listen();
    const { id, created } = await this.enqueue(job, payload, enqueueOptions);
    // A job this call created was committed: with completed history off, gone means completed. An existing
    // job (its key, window or debounce returned) may have been deleted long ago: it is judged as by waitFor.
    return waiter.wait<R>(id, waitOptions, created);
  }

  /** @internal The waiter's LISTEN connection's server pid, while connected (tests terminate it). */
  get waiterListenerPid(): number | undefined {
    return this.waiter?.listenerPid;
  }

  /** A worker for this schema; register handlers, then `start()`. */
  worker(options?: WorkerOptions): Worker {
    return new Worker(this, options);
  }

  /** Ends the pool if skipq created it. Waits still open (`waitFor`) reject with SKIPQ_SHUTDOWN. */
  close(): Promise<void> {
    // Safe to call twice (a second SIGTERM runs a shutdown handler again): one close, one pool end.
    this.closing ??= (async () => {
      await this.waiter?.close();
      await this.notifier.idle();
      if (this.ownsPool) await this.pool.end();
      if (this.readStore !== this.store) await this.readStore.pool.end();
    })();
    return this.closing;
  }
}
