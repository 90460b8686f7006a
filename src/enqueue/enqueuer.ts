/**
 * Enqueue: inserts validated rows — one job, many (chunks of 5,000, one
 * statement each, all or nothing), or inside the caller's transaction.
 * Concurrent single enqueues share statements. Workers are woken by a NOTIFY
 * that fires on commit: in the caller's transaction, or by the coalescing
 * notifier after skipq's own commit. What a call takes is options.ts's; how
 * it becomes a row (validation, encoding) is prepare.ts's.
 *
 * Invariants: every argument is validated before any SQL is sent; results are
 * in input order; a row whose idempotency key exists returns the existing job
 * with `created: false` and inserts nothing.
 */
import type pg from "pg";
import type { JobFeatureStore } from "../db/jobFeatureStore.js";
import type { InsertRow, JobStore } from "../db/jobStore.js";
import type { Queryable } from "../db/queryable.js";
import { FLOOR_MARGIN_MS } from "../db/sql/jobs.js";
import { withTransaction } from "../db/transaction.js";
import type { TraceHeaders } from "../shared/telemetry.js";
import { insertWithParents } from "../workflow/graph.js";
import type { Notifier } from "./notifier.js";
import type { BulkItem, EnqueueOptions, EnqueueResult, JobRef } from "./options.js";
import { assertItems, prepareBulkItem, prepareRow } from "./prepare.js";

export type { BulkItem, CheckedItem, CheckedItems, EnqueueOptions, EnqueueResult, JobRef } from "./options.js";

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

  /** Item `i` of an enqueueMany call, validated and encoded (prepare.ts's prepareBulkItem). */
  prepareItem(items: ReadonlyArray<BulkItem>, i: number, traceHeaders: TraceHeaders): Promise<InsertRow> {
    return prepareBulkItem(items, i, traceHeaders, this.maxPayloadBytes);
  }

  /** One call validated and encoded as a row (prepare.ts's prepareRow); throws before any SQL on bad input. */
  prepare(
    job: JobRef<unknown>,
    payload: unknown,
    options: EnqueueOptions,
    i: number,
    traceHeaders: TraceHeaders,
    items?: number,
  ): Promise<InsertRow> {
    return prepareRow(job, payload, options, i, traceHeaders, this.maxPayloadBytes, items);
  }
}

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
