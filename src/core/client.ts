/**
 * `Skipq`: the handle an application holds. It owns (or borrows) a pg pool
 * and a schema, and enqueues jobs — alone, in bulk, or inside the caller's
 * own transaction so the job commits or rolls back with their data.
 * Invariant: every argument is validated before any SQL is sent.
 */
import type pg from "pg";
import { type MigrateResult, migrate } from "../db/migrate.js";
import { createPool } from "../db/pool.js";
import { type JobStatements, jobStatements, type Statement } from "../db/sql/jobs.js";
import { enqueueSpan, type TraceHeaders, withTraceContext } from "../ops/telemetry.js";
import { Worker, type WorkerOptions } from "../worker/worker.js";
import { ValidationError } from "./errors.js";
import { type JobDefinition, type PayloadOf, validatePayload } from "./job.js";
import { defaultLogger, type Logger } from "./logger.js";
import { Notifier } from "./notifier.js";
import {
  assertDate,
  assertIdempotencyKey,
  assertInt,
  assertKey,
  assertName,
  assertSchema,
  type Duration,
  encodePayload,
  quoteIdent,
  toMs,
} from "./validate.js";

/** Anything with node-postgres's `query(config)`: a Pool, a Client, a PoolClient, or a driver adapter. */
export interface Queryable {
  // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
  query(config: { text: string; values?: unknown[]; name?: string }): Promise<{ rows: any[]; rowCount: number | null }>;
}

export interface SkipqOptions {
  /** PostgreSQL connection string; skipq creates and owns a pool. Default: `DATABASE_URL`. */
  connectionString?: string;
  /** An existing pg pool to use instead (skipq never ends it). */
  pool?: pg.Pool;
  /** Size of the pool skipq creates. Default 10. */
  poolSize?: number;
  /** Schema holding skipq's tables. Default "skipq". */
  schema?: string;
  /** Largest encoded payload accepted, in bytes. Default 1 MiB. */
  maxPayloadBytes?: number;
  /** Use named prepared statements on the hot path. Turn off behind PgBouncer < 1.21 in transaction mode. Default true. */
  preparedStatements?: boolean;
  /** pino-compatible logger. Default: warnings and errors as JSON on stderr. */
  logger?: Logger;
}

export interface EnqueueOptions {
  /** Queue name. Default: the job definition's queue, else "default". */
  queue?: string;
  /** Higher runs first, -32768..32767. Default: the definition's, else 0. */
  priority?: number;
  /** Attempts before the job is dead. Default: the definition's, else 10. */
  maxAttempts?: number;
  /** Run no earlier than this time (compared with the database clock). */
  runAt?: Date;
  /** Run no earlier than this long from now (database clock), e.g. "10s". Not with runAt. */
  delay?: Duration;
  /** At most one job per (queue, idempotencyKey): a repeat returns the existing job. */
  idempotencyKey?: string;
  /** Small string metadata carried to the handler (`ctx.job.headers`), e.g. a trace context. At most 32 entries. */
  headers?: Record<string, string>;
  /**
   * A tenant or customer key: per-key concurrency and rate limits and key
   * pauses (see docs/flow-control.md) apply to jobs sharing it within a queue.
   * 1-256 characters, no control characters. Default: none (only queue-wide limits apply).
   */
  concurrencyKey?: string;
}

export interface EnqueueResult {
  /** The job's id (a bigint, as a string). */
  id: string;
  /** False when an existing job with the same idempotency key was returned instead. */
  created: boolean;
}

export type JobRef<P> = JobDefinition<P> | string;

export interface BulkItem<P = unknown> extends EnqueueOptions {
  job: JobRef<P>;
  payload: P;
}

interface Row {
  i: number;
  queue: string;
  kind: string;
  payload: string;
  priority: number;
  maxAttempts: number;
  runAt: string | null;
  delayMs: number;
  key: string | null;
  headers: string | null;
  concurrencyKey: string | null;
}

/** A row's values as the single-insert statements take them ($1–$10). */
function insertValues(row: Row): unknown[] {
  return [
    row.queue,
    row.kind,
    row.payload,
    row.priority,
    row.maxAttempts,
    row.runAt,
    row.delayMs,
    row.key,
    row.headers,
    row.concurrencyKey,
  ];
}

interface PendingSingle {
  row: Row;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

const DEFAULT_MAX_PAYLOAD = 1024 * 1024;
/** Single-enqueue statements in flight per client; calls made meanwhile are sent together in the next. */
const MAX_SINGLE_STATEMENTS = 2;
const BULK_CHUNK = 5000;

export class Skipq {
  readonly schema: string;
  /** The quoted schema, safe to splice into SQL. */
  readonly schemaSql: string;
  /** NOTIFY channel for this schema; notifications carry the queue name only. */
  readonly channel: string;
  readonly pool: pg.Pool;
  readonly connectionString: string | undefined;
  readonly maxPayloadBytes: number;
  readonly preparedStatements: boolean;
  readonly logger: Logger;
  /** @internal */
  readonly sql: JobStatements;
  /** @internal Wakes workers after enqueues that committed on skipq's own pool (coalesced NOTIFY). */
  readonly notifier: Notifier;
  private readonly ownsPool: boolean;
  private readonly singles: PendingSingle[] = [];
  private singlesInFlight = 0;

  constructor(options: SkipqOptions = {}) {
    this.schema = assertSchema(options.schema ?? "skipq");
    this.schemaSql = quoteIdent(this.schema);
    this.channel = `skipq:${this.schema}`;
    this.maxPayloadBytes = assertInt(
      "maxPayloadBytes",
      options.maxPayloadBytes ?? DEFAULT_MAX_PAYLOAD,
      2,
      256 * 1024 * 1024,
    );
    this.preparedStatements = options.preparedStatements ?? true;
    this.logger = options.logger ?? defaultLogger;
    this.sql = jobStatements(this.schemaSql, this.schema);
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
      this.pool = createPool(this.connectionString, options.poolSize ?? 10, this.logger, "skipq");
      this.ownsPool = true;
    }
    this.notifier = new Notifier(
      this.pool,
      (queues) => this.statement(this.sql.queueNotifyAfterCommit, [this.channel, queues]),
      this.logger,
    );
  }

  /** Applies pending migrations; safe from many processes at once. */
  migrate(): Promise<MigrateResult> {
    return migrate(this.pool, this.schema);
  }

  /**
   * Enqueue one job. It commits on its own before this resolves. Concurrent calls share statements: while
   * `MAX_SINGLE_STATEMENTS` inserts are in flight, new calls wait and go together in the next one (a lone
   * call goes at once). Workers are woken right after the commit by the coalescing notifier.
   */
  enqueue<J extends JobRef<unknown>>(
    job: J,
    payload: PayloadOf<J>,
    options: EnqueueOptions = {},
  ): Promise<EnqueueResult> {
    return enqueueSpan(options.queue, 1, async (span, traceHeaders) => {
      const row = await this.prepare(job as JobRef<unknown>, payload, options, 0, traceHeaders);
      const result = await new Promise<EnqueueResult>((resolve, reject) => {
        this.singles.push({ row, resolve, reject });
        this.sendSingles();
      });
      span.setAttribute("messaging.message.id", result.id);
      return result;
    });
  }

  private sendSingles(): void {
    while (this.singlesInFlight < MAX_SINGLE_STATEMENTS && this.singles.length > 0) {
      const batch = this.singles.splice(0, BULK_CHUNK);
      this.singlesInFlight++;
      this.insertSingles(batch).finally(() => {
        this.singlesInFlight--;
        this.sendSingles();
      });
    }
  }

  private async insertSingles(batch: PendingSingle[]): Promise<void> {
    if (batch.length > 1) {
      try {
        const results = await this.insertRows(
          this.pool,
          batch.map((b, i) => ({ ...b.row, i })),
          false,
        );
        for (const [i, b] of batch.entries()) b.resolve(results[i] as EnqueueResult);
        return;
      } catch {
        // One statement for all failed: retry each alone, so a failure reaches only its own caller.
      }
    }
    await Promise.all(
      batch.map(async (b) => {
        try {
          b.resolve(await this.insertQuiet(b.row));
        } catch (error) {
          b.reject(error);
        }
      }),
    );
  }

  private async insertQuiet(row: Row): Promise<EnqueueResult> {
    const { rows } = await this.pool.query(this.statement(this.sql.jobInsertQuiet, insertValues(row)));
    if (rows[0]) {
      if (rows[0].due) this.notifier.nudge(row.queue);
      return { id: rows[0].id, created: true };
    }
    const existing = await this.pool.query(this.statement(this.sql.jobFindByKey, [row.queue, row.key]));
    // The conflicting job was deleted between the two statements (pruned); try once more.
    if (!existing.rows[0]) return this.insertQuiet(row);
    return { id: existing.rows[0].id, created: false };
  }

  /** Enqueue one job inside the caller's transaction: it exists if and only if that transaction commits. */
  enqueueTx<J extends JobRef<unknown>>(
    tx: Queryable,
    job: J,
    payload: PayloadOf<J>,
    options: EnqueueOptions = {},
  ): Promise<EnqueueResult> {
    return enqueueSpan(options.queue, 1, async (span, traceHeaders) => {
      const result = await this.insertOne(tx, job as JobRef<unknown>, payload, options, traceHeaders);
      span.setAttribute("messaging.message.id", result.id);
      return result;
    });
  }

  private async insertOne(
    tx: Queryable,
    job: JobRef<unknown>,
    payload: unknown,
    options: EnqueueOptions,
    traceHeaders: TraceHeaders,
  ): Promise<EnqueueResult> {
    const row = await this.prepare(job as JobRef<unknown>, payload, options, 0, traceHeaders);
    const { rows } = await tx.query(this.statement(this.sql.jobInsert, [...insertValues(row), this.channel]));
    if (rows[0]) return { id: rows[0].id, created: true };
    const existing = await tx.query(this.statement(this.sql.jobFindByKey, [row.queue, row.key]));
    if (!existing.rows[0]) {
      // The conflicting job was deleted between the two statements (pruned); try once more.
      return this.insertOne(tx, job, payload, options, traceHeaders);
    }
    return { id: existing.rows[0].id, created: false };
  }

  /** Enqueue many jobs: one round trip per 5,000, all or nothing. Results are in input order. */
  enqueueMany(items: ReadonlyArray<BulkItem>): Promise<EnqueueResult[]> {
    return enqueueSpan(undefined, Array.isArray(items) ? items.length : 0, (_, traceHeaders) =>
      this.insertMany(items, traceHeaders),
    );
  }

  private async insertMany(items: ReadonlyArray<BulkItem>, traceHeaders: TraceHeaders): Promise<EnqueueResult[]> {
    const rows = await this.prepareMany(items, traceHeaders);
    if (rows.length <= BULK_CHUNK) return this.insertRows(this.pool, rows, false);
    const client = await this.pool.connect();
    try {
      await client.query("BEGIN");
      const results = await this.insertRows(client, rows, false);
      await client.query("COMMIT");
      for (const queue of dueQueues(rows)) this.notifier.nudge(queue);
      return results;
    } catch (error) {
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.release();
    }
  }

  /** `enqueueMany` inside the caller's transaction. */
  enqueueManyTx(tx: Queryable, items: ReadonlyArray<BulkItem>): Promise<EnqueueResult[]> {
    return enqueueSpan(undefined, Array.isArray(items) ? items.length : 0, async (_, traceHeaders) =>
      this.insertRows(tx, await this.prepareMany(items, traceHeaders), true),
    );
  }

  /** A worker for this schema; register handlers, then `start()`. */
  worker(options?: WorkerOptions): Worker {
    return new Worker(this, options);
  }

  /** Ends the pool if skipq created it. */
  async close(): Promise<void> {
    await this.notifier.idle();
    if (this.ownsPool) await this.pool.end();
  }

  /** @internal A statement as a pg query config, named when prepared statements are on. */
  statement(statement: Statement, values: unknown[]): { text: string; values: unknown[]; name?: string } {
    return this.preparedStatements
      ? { name: statement.name, text: statement.text, values }
      : { text: statement.text, values };
  }

  private async prepareMany(items: ReadonlyArray<BulkItem>, traceHeaders: TraceHeaders): Promise<Row[]> {
    if (!Array.isArray(items)) throw new TypeError("enqueueMany expects an array of { job, payload, ...options }");
    const rows: Row[] = new Array(items.length);
    for (let i = 0; i < items.length; i++) {
      const item = items[i] as BulkItem;
      rows[i] = await this.prepare(item.job, item.payload, item, i, traceHeaders);
    }
    return rows;
  }

  /**
   * Inserts rows in chunks. `notifyInTx`: NOTIFY inside `tx` (it fires when the caller commits);
   * otherwise the caller nudges the notifier after its own commit (a single chunk on the pool commits here).
   */
  private async insertRows(tx: Queryable, rows: Row[], notifyInTx: boolean): Promise<EnqueueResult[]> {
    const results: EnqueueResult[] = new Array(rows.length);
    const queues = new Set<string>();
    for (let start = 0; start < rows.length; start += BULK_CHUNK) {
      const chunk = rows.slice(start, start + BULK_CHUNK);
      const json = `[${chunk
        .map(
          (r) =>
            `{"i":${r.i},"queue":${JSON.stringify(r.queue)},"kind":${JSON.stringify(r.kind)},"payload":${r.payload},"priority":${r.priority},"max_attempts":${r.maxAttempts},"run_at":${r.runAt === null ? "null" : JSON.stringify(r.runAt)},"delay_ms":${r.delayMs},"key":${r.key === null ? "null" : JSON.stringify(r.key)},"headers":${r.headers ?? "null"},"ckey":${r.concurrencyKey === null ? "null" : JSON.stringify(r.concurrencyKey)}}`,
        )
        .join(",")}]`;
      // Without idempotency keys there is nothing to conflict on: the plain INSERT skips the speculative
      // insertion ON CONFLICT costs for every row.
      const keyed = chunk.some((r) => r.key !== null);
      const { rows: inserted } = await tx.query(
        this.statement(keyed ? this.sql.jobInsertMany : this.sql.jobInsertManyKeyless, [json]),
      );
      // Identity ids follow input order (ORDER BY i), so the n-th keyless input owns the n-th keyless id.
      const keyless: string[] = [];
      const byKey = new Map<string, string>();
      inserted.sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1));
      for (const r of inserted) {
        if (r.idempotency_key == null) keyless.push(r.id);
        else byKey.set(`${r.queue}\u0000${r.idempotency_key}`, r.id);
      }
      let next = 0;
      const claimedKeys = new Set<string>();
      for (const r of chunk) {
        if (r.runAt === null && r.delayMs === 0) queues.add(r.queue);
        if (r.key === null) {
          results[r.i] = { id: keyless[next++] as string, created: true };
          continue;
        }
        const composite = `${r.queue}\u0000${r.key}`;
        const id = byKey.get(composite);
        if (id !== undefined && !claimedKeys.has(composite)) {
          claimedKeys.add(composite);
          results[r.i] = { id, created: true };
        } else if (id !== undefined) {
          results[r.i] = { id, created: false };
        } else {
          const existing = await tx.query(this.statement(this.sql.jobFindByKey, [r.queue, r.key]));
          results[r.i] = { id: existing.rows[0]?.id, created: false };
        }
      }
    }
    if (queues.size > 0 && notifyInTx) {
      await tx.query(this.statement(this.sql.queueNotify, [this.channel, [...queues]]));
    } else if (tx === this.pool) {
      for (const queue of queues) this.notifier.nudge(queue);
    }
    return results;
  }

  private async prepare(
    job: JobRef<unknown>,
    payload: unknown,
    options: EnqueueOptions,
    i: number,
    traceHeaders: TraceHeaders,
  ): Promise<Row> {
    const definition = typeof job === "string" ? { kind: assertName("kind", job) } : job;
    if (typeof definition !== "object" || definition === null || typeof definition.kind !== "string") {
      throw new TypeError("job must be a kind string or a definition from defineJob()");
    }
    const def = definition as Partial<JobDefinition<unknown>> & { kind: string };
    const value = def.schema ? await validatePayload(def, payload) : payload;
    const queue = assertName("queue", options.queue ?? def.queue ?? "default");
    const priority = assertInt("priority", options.priority ?? def.priority ?? 0, -32768, 32767);
    const maxAttempts = assertInt("maxAttempts", options.maxAttempts ?? def.maxAttempts ?? 10, 1, 1_000_000);
    if (options.runAt !== undefined && options.delay !== undefined) {
      throw new ValidationError("pass either runAt or delay, not both");
    }
    const runAt = options.runAt === undefined ? null : assertDate("runAt", options.runAt).toISOString();
    const delayMs = options.delay === undefined ? 0 : toMs("delay", options.delay);
    const key = options.idempotencyKey === undefined ? null : assertIdempotencyKey(options.idempotencyKey);
    const own = options.headers === undefined ? null : encodeHeaders(options.headers);
    // The enqueue span's trace context rides along so the execution span can link to it.
    const traced = withTraceContext(options.headers, traceHeaders);
    const headers = traced === options.headers || traced === undefined ? own : encodeHeaders(traced);
    const concurrencyKey = options.concurrencyKey === undefined ? null : assertKey(options.concurrencyKey);
    return {
      i,
      queue,
      kind: def.kind,
      payload: encodePayload(value, this.maxPayloadBytes),
      priority,
      maxAttempts,
      runAt,
      delayMs,
      key,
      headers,
      concurrencyKey,
    };
  }
}

/** Queues with a job runnable now (the ones whose workers a NOTIFY should wake). */
function dueQueues(rows: Row[]): Set<string> {
  const queues = new Set<string>();
  for (const r of rows) if (r.runAt === null && r.delayMs === 0) queues.add(r.queue);
  return queues;
}

function encodeHeaders(headers: Record<string, string>): string {
  if (typeof headers !== "object" || headers === null || Array.isArray(headers))
    throw new ValidationError("headers must be an object of strings");
  const entries = Object.entries(headers);
  if (entries.length > 32) throw new ValidationError(`headers may hold at most 32 entries, got ${entries.length}`);
  for (const [key, value] of entries) {
    if (typeof value !== "string" || key.length > 128 || value.length > 1024) {
      throw new ValidationError(
        `header ${JSON.stringify(key)} must be a string of at most 1024 characters, with a name of at most 128`,
      );
    }
  }
  return encodePayload(headers, 64 * 1024);
}
