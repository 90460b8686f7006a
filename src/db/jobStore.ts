/**
 * The job store: typed calls for every job statement the worker, the claimer
 * and the maintainer run, over a `Store`. It shapes values into the
 * statements' parameters and rows into results; it decides nothing about
 * when to call them.
 *
 * Invariants: every transition after a claim presents the job's lease (the
 * random token drawn at the claim), and each "many" call returns the ids whose lease
 * still matched, so callers can count stale outcomes; claimed rows come back
 * in claim order. The rows' shapes and their encoding into parameters are
 * jobRows.ts's (re-exported here for the worker and workflows).
 */
import type pg from "pg";
import type { PauseTarget } from "../core/pause.js";
import {
  type ClaimedRow,
  type ClaimTypes,
  type FloorArgs,
  type InsertRow,
  insertValues,
  type ParentRow,
  rowsJson,
  type Settlement,
  sameShape,
} from "./jobRows.js";
import type { Queryable } from "./queryable.js";
import { type LimitedClaimParams, limitedClaimText } from "./sql/flow.js";
import type { Store } from "./store.js";

export type {
  ClaimedRow,
  ClaimTypes,
  FloorArgs,
  InsertRow,
  ParentRefs,
  ParentRow,
  Settlement,
} from "./jobRows.js";

export class JobStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.jobs;
  }

  /**
   * Claims up to `limit` runnable jobs of `queues` that have no limits (the plain or the aging claim), in
   * claim order. `types`: the row parsers (the worker keeps timestamps as text).
   */
  async claim(
    p: { queues: readonly string[]; limit: number; workerId: string; leaseMs: number; agingMs: number | undefined },
    types?: ClaimTypes,
  ): Promise<ClaimedRow[]> {
    const config =
      p.agingMs === undefined
        ? this.store.config(this.sql.jobClaimBatch, [p.queues, p.limit, p.workerId, p.leaseMs])
        : this.store.config(this.sql.jobClaimBatchAged, [p.queues, p.limit, p.workerId, p.leaseMs, p.agingMs]);
    const { rows } = await this.store.pool.query<ClaimedRow>(types ? { ...config, types } : config);
    return rows;
  }

  /**
   * The worker's claim: `claim`, reading each queue and level from the worker's floors (worker/floors.ts);
   * rows carry `aged` (taken by the aged scan).
   */
  async claimFrom(
    p: {
      queues: readonly string[];
      limit: number;
      workerId: string;
      leaseMs: number;
      agingMs: number | undefined;
      floors: FloorArgs;
    },
    types?: ClaimTypes,
  ): Promise<Array<ClaimedRow & { aged: boolean }>> {
    const f = p.floors;
    const config = this.store.config(this.sql.jobClaimFrom, [
      p.queues,
      p.limit,
      p.workerId,
      p.leaseMs,
      p.agingMs ?? null,
      f.queues,
      f.levels,
      f.runAt,
      f.ids,
    ]);
    const { rows } = await this.store.pool.query<ClaimedRow & { aged: boolean }>(types ? { ...config, types } : config);
    return rows;
  }

  /** The limited claim (sql/flow.ts): claim locks, then a claim within every limit. One round trip. */
  async claimLimited(p: Omit<LimitedClaimParams, "schema" | "schemaName">, types?: ClaimTypes): Promise<ClaimedRow[]> {
    const text = limitedClaimText({ ...p, schema: this.store.schema.sql, schemaName: this.store.schema.name });
    // No values: the simple protocol, so the lock statements and the claim run as one implicit transaction.
    const results = (await this.store.pool.query(types ? { text, types } : text)) as unknown as
      | pg.QueryResult
      | pg.QueryResult[];
    const last = Array.isArray(results) ? results[results.length - 1] : results;
    return (last?.rows ?? []) as ClaimedRow[];
  }

  /** Milliseconds until the earliest pending job of `queues` that is not due yet falls due; null when none. */
  async nextDueMs(queues: readonly string[]): Promise<number | null> {
    const { rows } = await this.store.query<{ due_ms: number | null }>(this.store.sql.wakeups.jobNextDue, [queues]);
    return rows[0]?.due_ms ?? null;
  }

  /** Of `queues`, those the limited claim must serve (limits set, or a key paused now). */
  async limitedQueues(queues: readonly string[]): Promise<Set<string>> {
    return (await this.flowQueues(queues)).limited;
  }

  /** Of `queues`, those the limited claim serves, and those of them that are fair (skipq_claim_fair). */
  async flowQueues(queues: readonly string[]): Promise<{ limited: Set<string>; fair: Set<string> }> {
    const { rows } = await this.store.query<{ name: string; fair: boolean }>(this.store.sql.flow.queuesLimited, [
      queues,
    ]);
    return { limited: new Set(rows.map((r) => r.name)), fair: new Set(rows.filter((r) => r.fair).map((r) => r.name)) };
  }

  /**
   * The fair claim (skipq_claim_fair, db/sql/fairFunction.ts): up to `limit` jobs of the fair queues among
   * `queues`, round robin across their concurrency keys, within their limits. `sweep`: read every key from
   * its start (rows put behind its floor).
   */
  async claimFair(
    p: { queues: readonly string[]; limit: number; workerId: string; leaseMs: number; sweep: boolean },
    types?: ClaimTypes,
  ): Promise<ClaimedRow[]> {
    const config = this.store.config(this.store.sql.flow.jobClaimFair, [
      p.queues,
      p.limit,
      p.workerId,
      p.leaseMs,
      p.sweep,
    ]);
    const { rows } = await this.store.pool.query<ClaimedRow>(types ? { ...config, types } : config);
    return rows;
  }

  /**
   * Records successes (`ids[i]` under `leases[i]`; jobs with a result go through the feature store's
   * completeManyWithResults); returns the ids whose lease still matched. `db`: a transaction (a handler's
   * spawns commit with its outcome).
   */
  async completeMany(ids: readonly string[], leases: readonly string[], db?: Queryable): Promise<string[]> {
    const { rows } = await this.store.query<{ id: string }>(this.sql.jobCompleteMany, [ids, leases], db);
    return rows.map((r) => r.id);
  }

  /** Records every other outcome; returns the ids whose lease still matched, with the status each got. */
  async settleMany(settlements: readonly Settlement[]): Promise<Array<{ id: string; status: string }>> {
    const { rows } = await this.store.query<{ id: string; status: string }>(this.sql.jobSettleMany, [
      settlements.map((s) => s.id),
      settlements.map((s) => s.lease),
      settlements.map((s) => s.outcome),
      settlements.map((s) => s.error),
      settlements.map((s) => s.delayMs),
      settlements.map((s) => s.fingerprint),
      settlements.map((s) => s.entry ?? null),
    ]);
    return rows;
  }

  /** Extends leases by `leaseMs`; returns the leases still held (a lease names one claim; an id can be held twice). */
  async heartbeatMany(jobs: ReadonlyArray<{ id: string; lease: string }>, leaseMs: number): Promise<string[]> {
    const { rows } = await this.store.query<{ lease: string }>(this.sql.jobHeartbeatMany, [
      jobs.map((j) => j.id),
      jobs.map((j) => j.lease),
      leaseMs,
    ]);
    return rows.map((r) => r.lease);
  }

  /** Of `ids` (jobs whose leases are gone), those cancelled by an operator. */
  async cancelledAmong(ids: readonly string[]): Promise<Set<string>> {
    const { rows } = await this.store.query<{ id: string }>(this.sql.jobCancelledAmong, [ids]);
    return new Set(rows.map((r) => r.id));
  }

  /**
   * Pauses `key` of `queue` (null: the whole queue) until a time, or for `ms` on the database clock;
   * a later pause never shortens an earlier one. Workers are told on the schema's channel. Returns the end.
   */
  async pauseKey(queue: string, key: string | null, until: PauseTarget): Promise<Date> {
    const { rows } = await this.store.query<{ paused_until: Date }>(this.store.sql.flow.queueKeyPause, [
      queue,
      key ?? "",
      "ms" in until ? until.ms : 0,
      this.store.schema.channel,
      "at" in until ? until.at.toISOString() : null,
    ]);
    return (rows[0] as { paused_until: Date }).paused_until;
  }

  /**
   * Inserts one job on `db`; notifies on commit when `notify` (the caller's transaction). Null when its key
   * exists. `behind`: due further back than the claim floors' margin (wake with '!ready:<queue>').
   */
  async insertOne(
    db: Queryable,
    row: InsertRow,
    notify: boolean,
  ): Promise<{ id: string; due: boolean; behind: boolean } | null> {
    const values = insertValues(row);
    const { rows } = notify
      ? await this.store.query(this.sql.jobInsert, [...values, this.store.schema.channel], db)
      : await this.store.query(this.sql.jobInsertQuiet, values, db);
    const r = rows[0];
    if (!r) return null;
    return notify ? { id: r.id, due: r.notified !== null, behind: false } : { id: r.id, due: r.due, behind: r.behind };
  }

  /**
   * Inserts up to 5,000 rows in one statement; returns, in input order, each row's id and whether it was
   * inserted (false: its idempotency key was taken — by an earlier job, or an earlier row of `rows`).
   */
  async insertMany(db: Queryable, rows: readonly InsertRow[]): Promise<Array<{ id: string; created: boolean }>> {
    if (rows.some((r) => r.key !== null)) {
      const { rows: out } = await this.store.query<{ id: string; created: boolean }>(
        this.sql.jobInsertManyKeyed,
        [rowsJson(rows)],
        db,
      );
      return out.map((r) => ({ id: r.id, created: r.created }));
    }
    // Without keys every row is inserted, and the identity hands out ids in input order.
    const first = rows[0] as InsertRow;
    const { rows: inserted } = rows.every((r) => sameShape(r, first))
      ? await this.store.query<{ id: string }>(
          this.sql.jobInsertManyShared,
          [
            first.queue,
            first.kind,
            first.priority,
            first.maxAttempts,
            first.runAt,
            first.delayMs,
            first.headers,
            first.concurrencyKey,
            `[${rows.map((r) => r.payload).join(",")}]`,
          ],
          db,
        )
      : await this.store.query<{ id: string }>(this.sql.jobInsertMany, [rowsJson(rows)], db);
    return inserted
      .map((r) => r.id)
      .sort((a, b) => a.length - b.length || (a < b ? -1 : a > b ? 1 : 0))
      .map((id) => ({ id, created: true }));
  }

  /** Workflows: inserts rows as waiting jobs (up to 5,000); in input order, each one's id and whether it was inserted. */
  async insertWaiting(db: Queryable, rows: readonly InsertRow[]): Promise<Array<{ id: string; created: boolean }>> {
    const { rows: out } = await this.store.query<{ id: string; created: boolean }>(
      this.store.sql.workflows.jobInsertWaiting,
      [rowsJson(rows)],
      db,
    );
    return out.map((r) => ({ id: r.id, created: r.created }));
  }

  /** Workflows: the parents `ids` that exist, live ones locked until `db`'s transaction ends. */
  async parentsLock(db: Queryable, ids: readonly string[]): Promise<Map<string, { kind: string; status: string }>> {
    const { rows } = await this.store.query<{ id: string; kind: string; status: string }>(
      this.store.sql.workflows.parentsLock,
      [ids],
      db,
    );
    return new Map(rows.map((r) => [r.id, { kind: r.kind, status: r.status }]));
  }

  /** Workflows: child `children[i]` waits for `parents[i]`; returns how many children became pending at once. */
  async link(db: Queryable, children: readonly string[], parents: readonly string[]): Promise<number> {
    const { rows } = await this.store.query<{ released: number }>(
      this.store.sql.workflows.jobLink,
      [children, parents],
      db,
    );
    return rows[0]?.released ?? 0;
  }

  /** Workflows: the parents of jobs `ids`, with their outcomes and results (`child_id` says whose). */
  async parentsOf(ids: readonly string[]): Promise<Array<ParentRow & { child_id: string }>> {
    const { rows } = await this.store.query<ParentRow & { child_id: string }>(this.store.sql.workflows.jobParents, [
      ids,
    ]);
    return rows;
  }

  /** The job holding an idempotency key, if any. */
  async findByKey(db: Queryable, queue: string, key: string): Promise<string | undefined> {
    const { rows } = await this.store.query<{ id: string }>(this.sql.jobFindByKey, [queue, key], db);
    return rows[0]?.id;
  }

  /** Wakes the workers of `queues` when `db`'s transaction commits. */
  async notify(db: Queryable, queues: readonly string[]): Promise<void> {
    await this.store.query(this.sql.queueNotify, [this.store.schema.channel, queues], db);
  }

  /** Wakes the workers of `queues` now (their jobs committed already); commits asynchronously. */
  async notifyCommitted(queues: readonly string[]): Promise<void> {
    await this.store.query(this.sql.queueNotifyAfterCommit, [this.store.schema.channel, queues]);
  }
}
