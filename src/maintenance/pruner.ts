/**
 * The pruner: retention, a task of the maintainer's leader. Finished jobs
 * live in job_history, partitioned by outcome and finish time. A pass runs
 * each purpose of retention on its own, in this order (PURPOSES): the
 * keep-completed setting, the move of an upgraded schema's finished rows out
 * of the jobs table, the coming partitions, history past its age (completed
 * older than `completedAfter`, dead and cancelled older than `deadAfter`:
 * whole partitions, rows only in DEFAULT), idempotency keys `keyRetention`
 * after their job finished, ended uniqueness windows, delivered outbox events
 * after `outboxAfter`, workflow edges and batches whose jobs finished (after
 * the longer of the two history retentions), and flow housekeeping.
 *
 * Invariants: one purpose failing never stops the others, and a pass where
 * one failed throws a RetentionError (after all ran) that names each failure
 * and carries every purpose's result; it never touches a pending or running
 * job; a key stays taken at least `keyRetention` after its job finished,
 * whatever happened to the job's history row; a history row lives at least
 * its retention (and at most one partition width longer). All ages are
 * measured on the database clock.
 */

import { SkipqError, ValidationError } from "../core/errors.js";
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

/** Retention's purposes, in the order a pass runs them; each runs on its own. */
export const PURPOSES = [
  "settings",
  "move",
  "partitions",
  "history",
  "keys",
  "unique",
  "outbox",
  "edges",
  "batches",
  "flow",
] as const;

/**
 * One purpose of retention: `settings` (whether completed jobs keep a history row), `move` (an upgraded
 * schema's finished rows out of the jobs table), `partitions` (the coming ones made), `history` (finished
 * jobs past their age), `keys` (idempotency keys released), `unique` (ended uniqueness windows), `outbox`
 * (delivered events), `edges` and `batches` (of workflows whose jobs finished), `flow` (flow-control
 * housekeeping).
 */
export type RetentionPurpose = (typeof PURPOSES)[number];

/** What one purpose did in a pass: how many rows (or partitions) it removed or made, or why it failed. */
export interface PurposeResult {
  count: number;
  /** Set when this purpose failed; the pass's other purposes still ran. */
  error?: unknown;
}

export interface PruneResult {
  /** False when this process was not the maintenance leader, so the pass did nothing. */
  leader: boolean;
  /** Each purpose's outcome, when this process led (empty otherwise). */
  purposes: Partial<Record<RetentionPurpose, PurposeResult>>;
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

/**
 * A retention pass in which at least one purpose failed, thrown after every other purpose ran. `result`
 * holds every purpose's outcome; `failures` the failed ones' errors, by purpose.
 */
export class RetentionError extends SkipqError {
  constructor(
    readonly result: PruneResult,
    readonly failures: ReadonlyMap<RetentionPurpose, unknown>,
  ) {
    const list = [...failures].map(
      ([purpose, error]) => `${purpose}: ${error instanceof Error ? error.message : String(error)}`,
    );
    super(
      "SKIPQ_RETENTION_FAILED",
      `retention: ${failures.size} of ${Object.keys(result.purposes).length} purposes failed, the others ran (${list.join("; ")})`,
      { cause: failures.values().next().value },
    );
  }
}

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
    const result: PruneResult = { leader: false, purposes: {}, partitionsDropped: [], completed: 0, dead: 0, keys: 0 };
    if (!this.isLeader()) return result;
    result.leader = true;
    const failures = new Map<RetentionPurpose, unknown>();
    for (const purpose of PURPOSES) {
      try {
        result.purposes[purpose] = { count: await this.run(purpose, result) };
      } catch (error) {
        this.explain(error);
        failures.set(purpose, error);
        result.purposes[purpose] = { count: 0, error };
      }
    }
    if (result.partitionsDropped.length + result.completed + result.dead + result.keys > 0)
      this.logger.info(
        {
          partitionsDropped: result.partitionsDropped,
          completed: result.completed,
          dead: result.dead,
          keys: result.keys,
        },
        "skipq: retention applied",
      );
    if (failures.size > 0) throw new RetentionError(result, failures);
    return result;
  }

  /** Runs one purpose; returns its count (and, for history and keys, fills the result's own fields). */
  private async run(purpose: RetentionPurpose, result: PruneResult): Promise<number> {
    const { history, features, outbox, workflows } = this;
    // Workflows: edges and batches go with the history they describe (the longer of the two retentions).
    const historyMs = Math.max(this.completedMs, this.deadMs);
    switch (purpose) {
      case "settings":
        await history.settingsKeepCompleted({ keepCompleted: this.completedMs > 0 });
        return 1;
      case "move": {
        const moved = await moveFinishedJobs(this.store, {
          widthMs: this.partitionMs,
          keepMs: historyMs,
          batch: 5000,
          maxBatches: this.maxBatches,
        });
        return moved.moved;
      }
      case "partitions":
        return ensurePartitions(this.store, this.partitionMs);
      case "history": {
        let deleted = 0;
        for (const [parent, ms, counter] of [
          ["job_history_completed", this.completedMs, "completed"],
          ["job_history_failed", this.deadMs, "dead"],
        ] as const) {
          for (const r of await history.historyDrop({ parent, olderThanMs: ms })) {
            result.partitionsDropped.push(r.name);
            result[counter] += Number(r.rows);
            deleted += Number(r.rows);
          }
        }
        const completed = await this.deleteInBatches((limit) =>
          history.historyPruneCompletedDefault({ olderThanMs: this.completedMs, limit }),
        );
        const dead = await this.deleteInBatches((limit) =>
          history.historyPruneFailedDefault({ olderThanMs: this.deadMs, limit }),
        );
        result.completed += completed;
        result.dead += dead;
        return deleted + completed + dead;
      }
      case "keys":
        result.keys = await this.deleteInBatches((limit) => history.keysExpire({ olderThanMs: this.keyMs, limit }));
        return result.keys;
      case "unique":
        // Uniqueness windows that ended (docs/jobs.md): an ended one is taken over anyway; this keeps the table small.
        return this.deleteInBatches((limit) => features.uniqueExpire({ endedMs: 0, limit }));
      case "outbox":
        return this.deleteInBatches((limit) => outbox.outboxPrune({ olderThanMs: this.outboxMs, limit }));
      case "edges":
        return this.deleteInBatches((limit) => workflows.edgesPrune({ olderThanMs: historyMs, limit }));
      case "batches":
        return this.deleteInBatches((limit) => workflows.batchesPrune({ olderThanMs: historyMs, limit }));
      case "flow":
        return this.flow.flowHousekeeping();
    }
  }

  /** A privilege error says which grants retention needs (it runs as the worker's role). */
  private explain(error: unknown): void {
    if ((error as { code?: string } | null)?.code !== "42501" || !(error instanceof Error)) return;
    const s = this.store.schema.sql;
    error.message += ` — retention runs as this worker's role, which needs DML on the schema's tables and EXECUTE on its history functions: GRANT EXECUTE ON FUNCTION ${s}.skipq_history_partition(text, timestamptz, timestamptz), ${s}.skipq_history_drop(text, timestamptz), ${s}.skipq_history_moved() TO <the worker's role> (docs/security.md)`;
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
