/**
 * The pruner: retention. Deletes completed jobs, and separately dead and
 * cancelled ones, once older than their configured ages, in small batches
 * (each its own short transaction), so the jobs table stays small and claims
 * stay fast without long locks or bloat bursts; and delivered outbox events
 * after `outboxAfter`. A task of the maintainer's leader; `skipq prune` and
 * `Admin.prune` run the same statements.
 *
 * Invariants: it never deletes a pending or running job; a job with an
 * idempotency key lives at least `keyRetention` after it finished (so a
 * repeated enqueue with that key is still refused). All ages are measured on
 * the database clock.
 */
import type { Logger } from "../core/logger.js";
import { assertInt, type Duration, toMs } from "../core/validate.js";
import type { Store } from "../db/store.js";
import { Service } from "./service.js";

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
  /** Delete outbox events this long after they were delivered. Default "7d". */
  outboxAfter?: Duration;
  /** Rows deleted per transaction. Default 500. */
  batchSize?: number;
  /** Most batches per pass (the rest waits for the next pass). Default 100. */
  maxBatches?: number;
  /** Time between passes. Default "1m". */
  interval?: Duration;
}

export interface PruneResult {
  /** False when this process was not the maintenance leader, so the pass did nothing. */
  leader: boolean;
  completed: number;
  dead: number;
  cancelled: number;
}

type Terminal = "completed" | "dead" | "cancelled";

export class Pruner {
  private readonly store: Store;
  private readonly ages: Record<Terminal, number>;
  private readonly keyMs: number;
  private readonly outboxMs: number;
  private readonly batchSize: number;
  private readonly maxBatches: number;
  private readonly logger: Logger;
  private readonly service: Service<PruneResult>;

  /**
   * `source`: a Skipq client (its store and logger) or, inside the maintainer, a store.
   * `isLeader`: prune only while this says so (the maintainer's lease). Default: always.
   */
  constructor(
    source: { store: Store; logger: Logger },
    options: PrunerOptions = {},
    private readonly isLeader: () => boolean = () => true,
  ) {
    this.store = source.store;
    const completed = toMs("completedAfter", options.completedAfter ?? "1d");
    const dead = toMs("deadAfter", options.deadAfter ?? "30d");
    this.ages = { completed, dead, cancelled: dead };
    this.keyMs = toMs("keyRetention", options.keyRetention ?? "1d");
    this.outboxMs = toMs("outboxAfter", options.outboxAfter ?? "7d");
    this.batchSize = assertInt("batchSize", options.batchSize ?? 500, 1, 100_000);
    this.maxBatches = assertInt("maxBatches", options.maxBatches ?? 100, 1, 1_000_000);
    this.logger = source.logger;
    this.service = new Service({
      name: "retention",
      intervalMs: toMs("interval", options.interval ?? "1m", { allowZero: false }),
      run: () => this.pass(),
      logger: this.logger,
      firstPass: "spread",
    });
  }

  /** Starts periodic passes (the first after a random part of the interval). Idempotent. */
  start(): void {
    this.service.start();
  }

  /** Stops passes and waits for one in progress. Safe before start and twice. */
  stop(): Promise<void> {
    return this.service.stop();
  }

  /** One pass: batches per status until a batch comes back short (or maxBatches). */
  runOnce(): Promise<PruneResult> {
    return this.service.runOnce();
  }

  private async pass(): Promise<PruneResult> {
    if (!this.isLeader()) return { leader: false, completed: 0, dead: 0, cancelled: 0 };
    const result = await prune(this.store, this.ages, this.keyMs, this.batchSize, this.maxBatches);
    await this.pruneOutbox();
    await this.store.query(this.store.sql.flow.flowHousekeeping);
    if (result.completed + result.dead + result.cancelled > 0) this.logger.info({ ...result }, "skipq: pruned jobs");
    return result;
  }

  private async pruneOutbox(): Promise<void> {
    for (let batches = 0; batches < this.maxBatches; batches++) {
      const { rowCount } = await this.store.query(this.store.sql.outbox.outboxPrune, [this.outboxMs, this.batchSize]);
      if ((rowCount ?? 0) < this.batchSize) return;
    }
  }
}

/**
 * Deletes terminal jobs older than their status's age (`ages`; a status absent is kept), keyed ones only once
 * also older than `keyMs`, in batches of `batchSize`. Shared by the Pruner and `Admin.prune`.
 */
export async function prune(
  store: Store,
  ages: Partial<Record<Terminal, number>>,
  keyMs: number,
  batchSize: number,
  maxBatches = Number.POSITIVE_INFINITY,
): Promise<PruneResult> {
  const result: PruneResult = { leader: true, completed: 0, dead: 0, cancelled: 0 };
  let batches = 0;
  for (const status of ["completed", "dead", "cancelled"] as const) {
    const age = ages[status];
    if (age === undefined) continue;
    for (;;) {
      if (batches++ >= maxBatches) return result;
      const { rows } = await store.query<{ deleted: number }>(store.sql.retention.jobPruneBatch, [
        status,
        age,
        batchSize,
        keyMs,
      ]);
      const deleted = rows[0]?.deleted ?? 0;
      result[status] += deleted;
      if (deleted < batchSize) break;
    }
  }
  return result;
}
