/**
 * The pruner: retention, a task of the maintainer's leader. Finished jobs
 * live in job_history, partitioned by outcome and finish time; a pass makes
 * the coming partitions, drops the completed ones older than `completedAfter`
 * and the failed (dead, cancelled) ones older than `deadAfter` — whole
 * partitions, never row by row — expires idempotency keys `keyRetention`
 * after their job finished, deletes uniqueness windows that ended, deletes delivered outbox events after
 * `outboxAfter`, workflow edges and batches whose jobs finished (after the
 * longer of the two history retentions), and finishes moving an upgraded schema's finished rows out of
 * the jobs table.
 *
 * Invariants: it never touches a pending or running job; a key stays taken
 * at least `keyRetention` after its job finished, whatever happened to the
 * job's history row; a history row lives at least its retention (and at most
 * one partition width longer). All ages are measured on the database clock.
 */

import { ValidationError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { assertInt, type Duration, toMs } from "../core/validate.js";
import { FlowStore } from "../db/flowStore.js";
import { type HistoryParent, HistoryStore } from "../db/historyStore.js";
import { JobFeatureStore } from "../db/jobFeatureStore.js";
import { OutboxStore } from "../db/outboxStore.js";
import type { Store } from "../db/store.js";
import { WorkflowStore } from "../db/workflowStore.js";
import { Service } from "../shared/service.js";
import { ensurePartitions, moveFinishedJobs } from "./history.js";

export interface PrunerOptions {
  /** Keep completed jobs this long after they completed; 0 keeps no completed history at all. Default "1d". */
  completedAfter?: Duration;
  /** Keep dead and cancelled jobs this long after they ended. Default "30d". */
  deadAfter?: Duration;
  /**
   * An idempotency key stays taken at least this long after its job finished, so a repeated
   * enqueue with it is still refused. Default "1d".
   */
  keyRetention?: Duration;
  /** Delete outbox events this long after they were delivered. Default "7d". */
  outboxAfter?: Duration;
  /** Width of a history partition: whole hours, at most 7 days. Default "1d". */
  partition?: Duration;
  /** Rows deleted per statement where rows are deleted (keys, outbox, DEFAULT partitions). Default 1000. */
  batchSize?: number;
  /** Most statements per kind of row deletion per pass (the rest waits for the next pass). Default 100. */
  maxBatches?: number;
  /** Time between passes. Default "1m". */
  interval?: Duration;
}

export interface PruneResult {
  /** False when this process was not the maintenance leader, so the pass did nothing. */
  leader: boolean;
  /** History partitions dropped whole. */
  partitionsDropped: string[];
  /** Finished jobs deleted: in dropped partitions, and row by row from the DEFAULT partitions. */
  completed: number;
  /** Dead and cancelled jobs deleted (they share partitions). */
  dead: number;
  /** Idempotency keys released. */
  keys: number;
}

const HOUR = 3_600_000;

export class Pruner {
  readonly completedMs: number;
  readonly deadMs: number;
  readonly keyMs: number;
  readonly partitionMs: number;
  private readonly store: Store;
  private readonly history: HistoryStore;
  private readonly features: JobFeatureStore;
  private readonly outbox: OutboxStore;
  private readonly workflows: WorkflowStore;
  private readonly flow: FlowStore;
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
    this.history = new HistoryStore(source.store);
    this.features = new JobFeatureStore(source.store);
    this.outbox = new OutboxStore(source.store);
    this.workflows = new WorkflowStore(source.store);
    this.flow = new FlowStore(source.store);
    this.completedMs = toMs("completedAfter", options.completedAfter ?? "1d");
    this.deadMs = toMs("deadAfter", options.deadAfter ?? "30d");
    this.keyMs = toMs("keyRetention", options.keyRetention ?? "1d");
    this.outboxMs = toMs("outboxAfter", options.outboxAfter ?? "7d");
    this.partitionMs = toMs("partition", options.partition ?? "1d", { allowZero: false, max: 7 * 24 * HOUR });
    if (this.partitionMs % HOUR !== 0)
      throw new ValidationError(
        `partition must be a whole number of hours (e.g. "1h", "6h", "1d"), got ${JSON.stringify(options.partition)}`,
      );
    this.batchSize = assertInt("batchSize", options.batchSize ?? 1000, 1, 100_000);
    this.maxBatches = assertInt("maxBatches", options.maxBatches ?? 100, 1, 1_000_000);
    this.logger = source.logger;
    this.service = new Service({
      name: "retention",
      intervalMs: toMs("interval", options.interval ?? "1m", { allowZero: false }),
      run: () => this.pass(),
      logger: this.logger,
    });
  }

  /** Starts periodic passes (the first at once: partitions and the upgrade's move should not wait). Idempotent. */
  start(): void {
    this.service.start();
  }

  /** Stops passes and waits for one in progress. Safe before start and twice. */
  stop(): Promise<void> {
    return this.service.stop();
  }

  /** One pass. */
  runOnce(): Promise<PruneResult> {
    return this.service.runOnce();
  }

  private async pass(): Promise<PruneResult> {
    const result: PruneResult = { leader: false, partitionsDropped: [], completed: 0, dead: 0, keys: 0 };
    if (!this.isLeader()) return result;
    result.leader = true;
    try {
      return await this.apply(result);
    } catch (error) {
      if ((error as { code?: string }).code === "42501") {
        const s = this.store.schema.sql;
        (error as Error).message +=
          ` — retention runs as this worker's role, which needs DML on the schema's tables and EXECUTE on its history functions: GRANT EXECUTE ON FUNCTION ${s}.skipq_history_partition(text, timestamptz, timestamptz), ${s}.skipq_history_drop(text, timestamptz), ${s}.skipq_history_moved() TO <the worker's role> (docs/security.md)`;
      }
      throw error;
    }
  }

  private async apply(result: PruneResult): Promise<PruneResult> {
    const { history, features, outbox, workflows } = this;
    await history.settingsKeepCompleted({ keepCompleted: this.completedMs > 0 });
    await moveFinishedJobs(this.store, {
      widthMs: this.partitionMs,
      keepMs: Math.max(this.completedMs, this.deadMs),
      batch: 5000,
      maxBatches: this.maxBatches,
    });
    await ensurePartitions(this.store, this.partitionMs);
    for (const [parent, ms, counter] of [
      ["job_history_completed", this.completedMs, "completed"],
      ["job_history_failed", this.deadMs, "dead"],
    ] as const) {
      for (const r of await history.historyDrop({ parent, olderThanMs: ms })) {
        result.partitionsDropped.push(r.name);
        result[counter] += Number(r.rows);
      }
    }
    result.completed += await this.deleteInBatches((limit) =>
      history.historyPruneCompletedDefault({ olderThanMs: this.completedMs, limit }),
    );
    result.dead += await this.deleteInBatches((limit) =>
      history.historyPruneFailedDefault({ olderThanMs: this.deadMs, limit }),
    );
    result.keys = await this.deleteInBatches((limit) => history.keysExpire({ olderThanMs: this.keyMs, limit }));
    // Uniqueness windows that ended (docs/jobs.md): an ended one is taken over anyway; this keeps the table small.
    await this.deleteInBatches((limit) => features.uniqueExpire({ endedMs: 0, limit }));
    await this.deleteInBatches((limit) => outbox.outboxPrune({ olderThanMs: this.outboxMs, limit }));
    // Workflows: edges and batches go with the history they describe (the longer of the two retentions).
    const historyMs = Math.max(this.completedMs, this.deadMs);
    await this.deleteInBatches((limit) => workflows.edgesPrune({ olderThanMs: historyMs, limit }));
    await this.deleteInBatches((limit) => workflows.batchesPrune({ olderThanMs: historyMs, limit }));
    await this.flow.flowHousekeeping();
    if (result.partitionsDropped.length + result.completed + result.dead + result.keys > 0)
      this.logger.info({ ...result }, "skipq: retention applied");
    return result;
  }

  /** Runs `deleteUpTo` (one statement deleting at most its `limit` rows, returning how many) until it deletes fewer. */
  private async deleteInBatches(deleteUpTo: (limit: number) => Promise<number>): Promise<number> {
    let total = 0;
    for (let i = 0; i < this.maxBatches; i++) {
      const n = await deleteUpTo(this.batchSize);
      total += n;
      if (n < this.batchSize) break;
    }
    return total;
  }
}

/**
 * `skipq prune` and `Admin.prune`: deletes the finished jobs of `statuses` that finished more than `olderThanMs`
 * ago — whole partitions where a partition holds only such rows, row by row in the partitions that straddle
 * the cutoff. Returns how many jobs were deleted.
 */
export async function prune(
  store: Store,
  statuses: ReadonlyArray<"completed" | "dead" | "cancelled">,
  olderThanMs: number,
  batchSize = 1000,
): Promise<number> {
  const history = new HistoryStore(store);
  let total = 0;
  const drop = async (parent: HistoryParent) => {
    for (const r of await history.historyDrop({ parent, olderThanMs })) total += Number(r.rows);
  };
  if (statuses.includes("completed")) await drop("job_history_completed");
  // Dead and cancelled share partitions: drop them whole only when both go.
  if (statuses.includes("dead") && statuses.includes("cancelled")) await drop("job_history_failed");
  for (;;) {
    const n = await history.historyPruneRows({ statuses, olderThanMs, limit: batchSize });
    total += n;
    if (n < batchSize) return total;
  }
}
