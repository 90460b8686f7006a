/**
 * Enqueue: turns calls into validated rows and inserts them — one job, many
 * (chunks of 5,000, one statement each, all or nothing), or inside the caller's
 * transaction. Concurrent single enqueues share statements. Workers are woken
 * by a NOTIFY that fires on commit: in the caller's transaction, or by the
 * coalescing notifier after skipq's own commit.
 *
 * Invariants: every argument is validated before any SQL is sent; results are
 * in input order; a row whose idempotency key exists returns the existing job
 * with `created: false` and inserts nothing.
 */
import { createHash } from "node:crypto";
import type pg from "pg";
import { ValidationError } from "../core/errors.js";
import { type JobDefinition, type PayloadOf, validatePayload } from "../core/job.js";
import {
  assertDate,
  assertIdempotencyKey,
  assertInt,
  assertKey,
  assertName,
  type Duration,
  encodeHeaders,
  encodePayload,
  toMs,
} from "../core/validate.js";
import type { JobFeatureStore } from "../db/jobFeatureStore.js";
import type { InsertRow, JobStore } from "../db/jobStore.js";
import type { Queryable } from "../db/queryable.js";
import { FLOOR_MARGIN_MS } from "../db/sql/jobs.js";
import { withTransaction } from "../db/transaction.js";
import { type TraceHeaders, withTraceContext } from "../shared/telemetry.js";
import { insertWithParents, type ParentFailurePolicy, type ParentRef, parentRefs } from "../workflow/graph.js";
import type { Notifier } from "./notifier.js";

export interface EnqueueOptions {
  /** Queue name. Default: the job definition's queue, else "default". */
  queue?: string | undefined;
  /** Higher runs first, -32768..32767. Default: the definition's, else 0. */
  priority?: number | undefined;
  /** Attempts before the job is dead. Default: the definition's, else 10. */
  maxAttempts?: number | undefined;
  /** Run no earlier than this time (compared with the database clock). */
  runAt?: Date | undefined;
  /** Run no earlier than this long from now (database clock), e.g. "10s". Not with runAt. */
  delay?: Duration | undefined;
  /** At most one job per (queue, idempotencyKey): a repeat returns the existing job. */
  idempotencyKey?: string | undefined;
  /** Small string metadata carried to the handler (`ctx.job.headers`), e.g. a trace context. At most 32 entries. */
  headers?: Record<string, string> | undefined;
  /**
   * A tenant or customer key: per-key concurrency and rate limits and key
   * pauses (see docs/flow-control.md) apply to jobs sharing it within a queue.
   * 1-256 characters, no control characters. Default: none (only queue-wide limits apply).
   */
  concurrencyKey?: string | undefined;
  /**
   * Workflows: the jobs this one waits for. It is created `waiting` and runs once every parent completed
   * (see onParentFailure); its handler sees their results in `ctx.parents`. Job ids, or in enqueueMany
   * `{ item: i }` for the i-th job of the same call. An unknown parent or a cycle is a ValidationError and
   * nothing is written. Default: none.
   */
  dependsOn?: readonly ParentRef[] | undefined;
  /**
   * Workflows: when a parent dies or is cancelled — "cancel" this job (and its own dependents, the reason
   * naming the parent), "run" it anyway (ctx.parents shows the failure), or "wait" until the parent is
   * retried by hand and completes. Only with dependsOn. Default "cancel".
   */
  onParentFailure?: ParentFailurePolicy | undefined;
  /**
   * A uniqueness window (docs/jobs.md): at most one job per `key` (in this queue) per `period`; an enqueue
   * while a job holds the key returns that job with `created: false`. `key` defaults to a hash of kind,
   * queue and payload. `states`: "all" (default) counts the holder whatever its state; "live" only while it
   * is pending or running, so a new job may start as soon as it finished. Not with `idempotencyKey` or
   * `debounce`; not in `enqueueMany`.
   */
  unique?: { key?: string; period: Duration; states?: "all" | "live" } | undefined;
  /**
   * Debounce (docs/jobs.md): while a job with `key` (in this queue) is still pending, an enqueue replaces
   * its payload and options and moves it to run `delay` from now (`created: false`); once it is running, an
   * enqueue starts a new pending job. `key` defaults to the kind. Not with `runAt`, `delay`,
   * `idempotencyKey` or `unique`; not in `enqueueMany`.
   */
  debounce?: { key?: string; delay: Duration } | undefined;
}

export interface EnqueueResult {
  /** The job's id (a bigint, as a string). */
  id: string;
  /**
   * False when an existing job was returned instead: one with the same idempotency key, or the holder of a
   * uniqueness window, or the debounced job this call updated.
   */
  created: boolean;
}

export type JobRef<P> = JobDefinition<P> | string;

export interface BulkItem<P = unknown> extends EnqueueOptions {
  job: JobRef<P>;
  payload: P;
}

/**
 * Bulk items checked one by one: `enqueueMany`, `enqueueManyTx`, `batch` and `ctx.spawn` take
 * `T & CheckedItems<T>`, so each item's payload must match its own job's definition (a string kind
 * takes any payload). TypeScript infers `T` from the array literal; nothing changes at run time.
 */
export type CheckedItems<T extends ReadonlyArray<BulkItem>> = {
  readonly [K in keyof T]: CheckedItem<T[K]>;
};

/** One bulk item, its payload checked against its job's definition (see CheckedItems). */
export type CheckedItem<I> = I extends { job: infer J }
  ? { [K in keyof I]: K extends "payload" ? PayloadOf<J> : I[K] }
  : I;

interface PendingSingle {
  row: InsertRow;
  resolve: (result: EnqueueResult) => void;
  reject: (error: unknown) => void;
}

/** Single-enqueue statements in flight per client; calls made meanwhile are sent together in the next. */
const MAX_SINGLE_STATEMENTS = 2;
export const BULK_CHUNK = 5000;

export class Enqueuer {
  private readonly singles: PendingSingle[] = [];
  private singlesInFlight = 0;

  constructor(
    private readonly jobs: JobStore,
    private readonly features: JobFeatureStore,
    private readonly pool: pg.Pool,
    private readonly notifier: Notifier,
    private readonly maxPayloadBytes: number,
  ) {}

  /** One job on skipq's pool; concurrent calls share statements (a lone call goes at once). */
  single(row: InsertRow): Promise<EnqueueResult> {
    // Unique and debounced jobs have statements of their own, never shared with other enqueues.
    if (row.unique || row.debounce) return this.insertOne(this.pool, row, false);
    return new Promise<EnqueueResult>((resolve, reject) => {
      this.singles.push({ row, resolve, reject });
      this.sendSingles();
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
    // A lone enqueue (nothing else in flight: a quiet producer) carries its NOTIFY in its own statement,
    // one round trip instead of two; under load the coalescing notifier sends one NOTIFY for many commits,
    // so concurrent commits share WAL flushes instead of queueing on the notify lock.
    const lone = batch.length === 1 && this.singlesInFlight === 1;
    await Promise.all(
      batch.map(async (b) => {
        try {
          b.resolve(await this.insertOne(this.pool, b.row, lone));
        } catch (error) {
          b.reject(error);
        }
      }),
    );
  }

  /**
   * One row on `db`. `inTx`: `db` is the caller's transaction, so the NOTIFY goes in it (fires on commit);
   * otherwise the row commits here and the notifier wakes workers after.
   */
  async insertOne(db: Queryable, row: InsertRow, inTx: boolean): Promise<EnqueueResult> {
    if (row.unique || row.debounce) return this.insertFeatured(db, row, inTx);
    const inserted = await this.jobs.insertOne(db, row, inTx);
    if (inserted) {
      if (!inTx && inserted.due) this.notifier.nudge(inserted.behind ? `!ready:${row.queue}` : row.queue);
      return { id: inserted.id, created: true };
    }
    const existing = await this.jobs.findByKey(db, row.queue, row.key as string);
    // The conflicting job was deleted between the two statements (pruned); try once more.
    if (existing === undefined) return this.insertOne(db, row, inTx);
    return { id: existing, created: false };
  }

  /**
   * Workflows: rows some of which wait for parents, on `db`. `inTx`: `db` is the caller's transaction;
   * otherwise a transaction of skipq's pool, so the rows and their links commit together.
   */
  withParents(db: Queryable, rows: InsertRow[], inTx: boolean): Promise<EnqueueResult[]> {
    const insert = (tx: Queryable) =>
      insertWithParents(this.jobs, tx, rows, (d, plain) => this.insertRows(d, plain, true), BULK_CHUNK);
    return inTx ? insert(db) : withTransaction(this.pool, insert);
  }

  /** A unique or debounced job (docs/jobs.md): inserted, or the job holding its key returned. */
  private async insertFeatured(db: Queryable, row: InsertRow, inTx: boolean): Promise<EnqueueResult> {
    const inserted: { id: string; created?: boolean; due: boolean } | null = row.debounce
      ? await this.features.insertDebounced(db, row)
      : await this.features.insertUnique(db, row);
    if (inserted) {
      if (inserted.due) {
        const wake = wakeFor(row) ?? row.queue;
        if (inTx) await this.jobs.notify(db, [wake]);
        else this.notifier.nudge(wake);
      }
      return { id: inserted.id, created: inserted.created ?? true };
    }
    const holder = await this.features.findUnique(db, row.queue, (row.unique as { key: string }).key);
    // The holder's window was deleted between the two statements (expired and pruned): try once more.
    if (holder === undefined) return this.insertFeatured(db, row, inTx);
    return { id: holder, created: false };
  }

  /** Many rows on skipq's pool: one transaction when they span several chunks. */
  async many(rows: InsertRow[]): Promise<EnqueueResult[]> {
    if (rows.some((r) => r.parents !== null)) return this.withParents(this.pool, rows, false);
    if (rows.length <= BULK_CHUNK) return this.insertRows(this.pool, rows, false);
    const results = await withTransaction(this.pool, (tx) => this.insertRows(tx, rows, true, false));
    for (const queue of dueQueues(rows)) this.notifier.nudge(queue);
    return results;
  }

  /**
   * Inserts rows in chunks. `inTx`: `db` is a transaction that commits later, so the NOTIFY goes in it
   * (`notify` false: the caller nudges after its own commit); otherwise each chunk commits on its own and
   * the notifier wakes workers.
   */
  async insertRows(db: Queryable, rows: InsertRow[], inTx: boolean, notify = true): Promise<EnqueueResult[]> {
    const results: EnqueueResult[] = new Array(rows.length);
    for (let start = 0; start < rows.length; start += BULK_CHUNK) {
      const chunk = rows.slice(start, start + BULK_CHUNK);
      const inserted = await this.jobs.insertMany(db, chunk);
      for (const [k, r] of chunk.entries()) {
        const row = inserted[k] as { id: string; created: boolean };
        results[r.i] = row.created
          ? row
          : { id: (await this.jobs.findByKey(db, r.queue, r.key as string)) as string, created: false };
      }
    }
    const queues = dueQueues(rows);
    if (queues.size > 0 && inTx && notify) await this.jobs.notify(db, [...queues]);
    else if (!inTx) for (const queue of queues) this.notifier.nudge(queue);
    return results;
  }

  async prepareMany(items: ReadonlyArray<BulkItem>, traceHeaders: TraceHeaders): Promise<InsertRow[]> {
    assertItems(items);
    const rows: InsertRow[] = new Array(items.length);
    for (let i = 0; i < items.length; i++) rows[i] = await this.prepareItem(items, i, traceHeaders);
    return rows;
  }

  /**
   * Item `i` of an enqueueMany call (an array: see assertItems), validated and encoded. The COPY path calls
   * this as it streams, so validation overlaps the database's work; a bad item aborts the copy's transaction.
   */
  prepareItem(items: ReadonlyArray<BulkItem>, i: number, traceHeaders: TraceHeaders): Promise<InsertRow> {
    const item = items[i] as BulkItem;
    if (item?.unique !== undefined || item?.debounce !== undefined)
      throw new ValidationError(
        `item ${i}: unique and debounce are for enqueue and enqueueTx (each needs its own statement), not enqueueMany`,
      );
    return this.prepare(item.job, item.payload, item, i, traceHeaders, items.length);
  }

  /**
   * Validates one call and encodes it as a row; throws before any SQL on bad input. `items`: the size of the
   * call this row is part of (enqueueMany), so dependsOn may name its other items.
   */
  async prepare(
    job: JobRef<unknown>,
    payload: unknown,
    options: EnqueueOptions,
    i: number,
    traceHeaders: TraceHeaders,
    items?: number,
  ): Promise<InsertRow> {
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
    const row: InsertRow = {
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
      parents: parentRefs(options, i, items),
    };
    if (options.unique !== undefined || options.debounce !== undefined) addKeyedOptions(row, options, value);
    return row;
  }
}

/** enqueueMany's input must be an array (of `{ job, payload, ...options }`). */
export function assertItems(items: unknown): asserts items is ReadonlyArray<BulkItem> {
  if (!Array.isArray(items)) throw new TypeError("enqueueMany expects an array of { job, payload, ...options }");
}

/** Validates `unique` or `debounce` (docs/jobs.md) and adds it to `row`. */
function addKeyedOptions(row: InsertRow, options: EnqueueOptions, payload: unknown): void {
  const { unique, debounce } = options;
  if (unique !== undefined && debounce !== undefined)
    throw new ValidationError("pass either unique or debounce, not both");
  if (row.key !== null)
    throw new ValidationError(
      `pass either idempotencyKey or ${unique !== undefined ? "unique" : "debounce"}, not both (they keep different keys: docs/jobs.md)`,
    );
  if (options.dependsOn !== undefined)
    throw new ValidationError(
      `${unique !== undefined ? "unique" : "debounce"} cannot be combined with dependsOn: a waiting job is released by its parents, not by its key`,
    );
  if (unique !== undefined) {
    if (typeof unique !== "object" || unique === null)
      throw new ValidationError('unique must be an object like { period: "1h" } or { key: "report-42", period: "1h" }');
    const states = unique.states ?? "all";
    if (states !== "all" && states !== "live")
      throw new ValidationError(`unique.states must be "all" or "live", got ${JSON.stringify(unique.states)}`);
    row.unique = {
      key:
        unique.key === undefined ? defaultUniqueKey(row.kind, row.queue, payload) : assertKey(unique.key, "unique.key"),
      periodMs: toMs("unique.period", unique.period, { allowZero: false }),
      live: states === "live",
    };
    return;
  }
  if (typeof debounce !== "object" || debounce === null)
    throw new ValidationError('debounce must be an object like { delay: "2s" } or { key: "user-7", delay: "2s" }');
  if (options.runAt !== undefined || options.delay !== undefined)
    throw new ValidationError("debounce sets when the job runs (delay after the last enqueue): pass no runAt or delay");
  row.debounce = {
    key: debounce.key === undefined ? row.kind : assertKey(debounce.key, "debounce.key"),
    delayMs: toMs("debounce.delay", debounce.delay),
  };
}

/**
 * A uniqueness key from kind, queue and payload: SHA-256 of the three, the payload as JSON with object keys
 * sorted, so `{ a, b }` and `{ b, a }` are the same job. Hex, prefixed, well within a key's 256 characters.
 */
export function defaultUniqueKey(kind: string, queue: string, payload: unknown): string {
  const hash = createHash("sha256")
    .update(`${kind}\n${queue}\n${canonicalJson(payload)}`)
    .digest("hex");
  return `sha256:${hash}`;
}

/** JSON with every object's keys in sorted order (the value already passed the payload rules). */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}

/** Queues with a job runnable now (the ones whose workers a NOTIFY should wake). */
/**
 * The wake-ups rows due now need: their queue names, or '!ready:<queue>' for a row whose explicit runAt is
 * further back than the claim floors' margin (workers then read the queue afresh: worker/floors.ts). Rows due
 * later send none: polling finds them.
 */
function dueQueues(rows: readonly InsertRow[]): Set<string> {
  const queues = new Set<string>();
  for (const r of rows) {
    const wake = wakeFor(r);
    if (wake !== undefined) queues.add(wake);
  }
  return queues;
}

/** The wake-up one row needs (see dueQueues); undefined when it is not due yet. */
function wakeFor(r: InsertRow): string | undefined {
  if (r.runAt === null) return r.delayMs === 0 ? r.queue : undefined;
  const at = Date.parse(r.runAt);
  if (at > Date.now()) return undefined;
  return at < Date.now() - FLOOR_MARGIN_MS ? `!ready:${r.queue}` : r.queue;
}
