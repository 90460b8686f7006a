/**
 * The pruner: retention. Deletes completed jobs, and separately dead and
 * cancelled ones, once older than their configured ages, in small batches
 * (each its own short transaction), so the jobs table stays small and claims
 * stay fast without long locks or bloat bursts.
 *
 * Invariants: it never deletes a pending or running job; a job with an
 * idempotency key lives at least `keyRetention` after it finished (so a
 * repeated enqueue with that key is still refused); one pass at a time across
 * all processes (its own advisory lock, taken per batch). All ages are
 * measured on the database clock.
 */
import type { Skipq } from "../core/client.js";
import { childLogger, type Logger } from "../core/logger.js";
import { assertInt, type Duration, toMs } from "../core/validate.js";
import { flowStatements } from "../db/sql/flow.js";
import { prunerStatements } from "../db/sql/pruner.js";

export interface PrunerOptions {
  /** Delete completed jobs this long after they completed. Default "1d". */
  completedAfter?: Duration;
  /** Delete dead and cancelled jobs this long after they ended. Default "30d". */
  deadAfter?: Duration;
  /**
   * Keep any finished job that has an idempotency key at least this long, so
   * the key keeps refusing duplicates that long after the job finished. Default "1d".
   */
  keyRetention?: Duration;
  /** Rows deleted per transaction. Default 500. */
  batchSize?: number;
  /** Most batches per pass (the rest waits for the next pass). Default 100. */
  maxBatches?: number;
  /** Time between passes. Default "1m". */
  interval?: Duration;
}

export interface PruneResult {
  /** False when another process's pass held the pruner lock. */
  leader: boolean;
  completed: number;
  dead: number;
  cancelled: number;
}

export class Pruner {
  private readonly sql;
  private readonly flow;
  private readonly ages: Record<"completed" | "dead" | "cancelled", number>;
  private readonly keyMs: number;
  private readonly batchSize: number;
  private readonly maxBatches: number;
  private readonly intervalMs: number;
  private readonly logger: Logger;
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<unknown> | undefined;

  constructor(
    private readonly client: Skipq,
    options: PrunerOptions = {},
  ) {
    this.sql = prunerStatements(client.schemaSql);
    this.flow = flowStatements(client.schemaSql);
    const completed = toMs("completedAfter", options.completedAfter ?? "1d");
    const dead = toMs("deadAfter", options.deadAfter ?? "30d");
    this.ages = { completed, dead, cancelled: dead };
    this.keyMs = toMs("keyRetention", options.keyRetention ?? "1d");
    this.batchSize = assertInt("batchSize", options.batchSize ?? 500, 1, 100_000);
    this.maxBatches = assertInt("maxBatches", options.maxBatches ?? 100, 1, 1_000_000);
    this.intervalMs = toMs("interval", options.interval ?? "1m", { allowZero: false });
    this.logger = childLogger(client.logger, { role: "pruner" });
  }

  /** Starts periodic passes (the first after a random part of the interval). Idempotent. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(Math.random() * this.intervalMs);
  }

  /** Stops passes and waits for one in progress. Safe before start and twice. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.pass?.catch(() => undefined);
  }

  /** One pass: batches per status until a batch comes back short (or maxBatches). */
  async runOnce(): Promise<PruneResult> {
    const result: PruneResult = { leader: true, completed: 0, dead: 0, cancelled: 0 };
    let batches = 0;
    for (const status of ["completed", "dead", "cancelled"] as const) {
      for (;;) {
        if (batches++ >= this.maxBatches) return result;
        const { rows } = await this.client.pool.query(this.sql.jobPruneBatch, [
          status,
          this.ages[status],
          this.batchSize,
          this.client.schema,
          this.keyMs,
        ]);
        if (!rows[0].leader) return { ...result, leader: false };
        result[status] += rows[0].deleted;
        if (rows[0].deleted < this.batchSize) break;
      }
    }
    await this.client.pool.query(this.flow.flowHousekeeping);
    if (result.completed + result.dead + result.cancelled > 0) this.logger.info({ ...result }, "skipq: pruned jobs");
    return result;
  }

  private schedule(delay: number): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.pass = this.runOnce()
        .catch((error) => this.logger.warn({ err: error }, "skipq: prune pass failed; will retry"))
        .finally(() => this.schedule(this.intervalMs));
    }, delay);
    this.timer.unref();
  }
}
