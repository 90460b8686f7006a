/**
 * The claimer: chooses and runs a worker's claim statement.
 *
 * When none of the worker's queues has limits or paused keys (the common
 * case) it runs the plain prepared claim (one index scan, SKIP LOCKED), or
 * its priority-aging twin. Otherwise it runs the limited claim (sql/flow.ts):
 * claim locks of the limited queues, then a claim that counts running jobs and
 * recent starts. Which queues are limited is cached and refreshed on a timer
 * and on a '!flow' notification; a stale cache is safe, because the plain
 * claim itself skips limited queues (read in the database at every claim).
 */
import type pg from "pg";
import type { Skipq } from "../core/client.js";
import type { Logger } from "../core/logger.js";
import { flowStatements, limitedClaimText } from "../db/sql/flow.js";

/** A claimed row as the claim statements return it. */
export interface ClaimedRow {
  id: string;
  queue: string;
  kind: string;
  payload: unknown;
  priority: number;
  attempts: number;
  max_attempts: number;
  lease: string;
  run_at: Date;
  created_at: Date;
  headers: Record<string, string> | null;
  concurrency_key: string | null;
  locked_at: Date;
}

export interface ClaimerOptions {
  client: Skipq;
  pool: pg.Pool;
  queues: readonly string[];
  workerId: string;
  leaseMs: number;
  /** Priority aging threshold in ms; undefined for none. */
  agingMs: number | undefined;
  /** How often the set of limited queues is re-read, ms. */
  refreshMs: number;
  logger: Logger;
}

export class Claimer {
  /** Queues (of this worker's) that have limits or a paused key, as of the last refresh. */
  limited: ReadonlySet<string> = new Set();
  private timer: NodeJS.Timeout | undefined;
  private refreshed = false;
  private readonly flow;

  constructor(private readonly options: ClaimerOptions) {
    this.flow = flowStatements(options.client.schemaSql);
  }

  /** Reads the limited queues, then re-reads them every refreshMs. Idempotent; never throws. */
  async start(): Promise<void> {
    if (this.timer) return;
    this.timer = setInterval(() => void this.refresh(), this.options.refreshMs);
    this.timer.unref();
    await this.refresh();
  }

  /** Safe before start and twice. */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Re-reads which of this worker's queues are limited. A failure keeps the old set (safe either way). */
  async refresh(): Promise<void> {
    try {
      const { rows } = await this.options.pool.query<{ name: string }>(this.flow.queuesLimited, [this.options.queues]);
      this.limited = new Set(rows.map((r) => r.name));
      this.refreshed = true;
    } catch (error) {
      this.options.logger.warn({ err: error }, "skipq: could not read queue limits; will retry");
    }
  }

  /** Claims up to `limit` jobs in one round trip. */
  async claim(limit: number): Promise<ClaimedRow[]> {
    const o = this.options;
    if (!this.refreshed) await this.refresh(); // e.g. worker.runOnce() without start()
    if (this.limited.size === 0) {
      const { sql } = o.client;
      const query =
        o.agingMs === undefined
          ? o.client.statement(sql.jobClaimBatch, [o.queues, limit, o.workerId, o.leaseMs])
          : o.client.statement(sql.jobClaimBatchAged, [o.queues, limit, o.workerId, o.leaseMs, o.agingMs]);
      return inClaimOrder((await o.pool.query(query)).rows, o.agingMs);
    }
    const text = limitedClaimText({
      schema: o.client.schemaSql,
      schemaName: o.client.schema,
      freeQueues: o.queues.filter((q) => !this.limited.has(q)),
      limitedQueues: o.queues.filter((q) => this.limited.has(q)),
      limit,
      workerId: o.workerId,
      leaseMs: o.leaseMs,
      agingMs: o.agingMs ?? null,
      lookahead: Math.min(5000, Math.max(100, limit * 10)),
    });
    // No values: the simple protocol, so the lock statements and the claim run as one implicit transaction.
    const results = (await o.pool.query(text)) as unknown as pg.QueryResult | pg.QueryResult[];
    const last = Array.isArray(results) ? results[results.length - 1] : results;
    return inClaimOrder((last?.rows ?? []) as ClaimedRow[], o.agingMs);
  }

  /** Pauses `key` of `queue` (null: the whole queue) until `until` (database clock for durations). */
  async pauseKey(queue: string, key: string | null, until: { at: Date } | { ms: number }): Promise<Date> {
    const { rows } = await this.options.pool.query(this.flow.queueKeyPause, [
      queue,
      key ?? "",
      "ms" in until ? until.ms : 0,
      this.options.client.channel,
      "at" in until ? until.at.toISOString() : null,
    ]);
    this.limited = new Set([...this.limited, queue]);
    return rows[0].paused_until;
  }
}

/**
 * Puts claimed rows back in the order the claim picked them: an UPDATE's
 * RETURNING does not keep its input's order, and the worker starts (and
 * prefetches) jobs in this order. Aged jobs first, oldest first; then priority,
 * run_at, id — with "aged" judged against the claim's own locked_at, the
 * database clock the claim itself used.
 */
export function inClaimOrder(rows: ClaimedRow[], agingMs: number | undefined): ClaimedRow[] {
  const aged = (r: ClaimedRow) => agingMs !== undefined && r.run_at.getTime() <= r.locked_at.getTime() - agingMs;
  return rows.sort((a, b) => {
    const agedA = aged(a);
    if (agedA !== aged(b)) return agedA ? -1 : 1;
    if (!agedA && a.priority !== b.priority) return b.priority - a.priority;
    const byRunAt = a.run_at.getTime() - b.run_at.getTime();
    if (byRunAt !== 0) return byRunAt;
    return a.id.length - b.id.length || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);
  });
}
