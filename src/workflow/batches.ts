/**
 * Batches (docs/workflows.md): `Skipq.batch` enqueues jobs with callbacks
 * that depend on every one of them — `onComplete` once all finished,
 * `onSuccess` once all completed — and writes the batch's row in the same
 * transaction; `batchStatus` counts its jobs by status, live or finished.
 *
 * Invariant: a batch's jobs, its callbacks and its row commit together or not
 * at all (one transaction of skipq's pool).
 */
import type pg from "pg";
import { SkipqError, ValidationError } from "../core/errors.js";
import { isId } from "../core/validate.js";
import type { InsertRow } from "../db/jobStore.js";
import { withTransaction } from "../db/transaction.js";
import type { WorkflowStore } from "../db/workflowStore.js";
import type { Enqueuer } from "../enqueue/enqueuer.js";
import type { EnqueueResult } from "../enqueue/options.js";

/** What `batch` enqueued. */
export interface BatchResult {
  /** The batch's id, for `batchStatus`. */
  id: string;
  /** Its jobs, in input order. */
  jobs: EnqueueResult[];
  onComplete: EnqueueResult | undefined;
  onSuccess: EnqueueResult | undefined;
}

/** A batch's progress. */
export interface BatchStatus {
  id: string;
  /** Jobs in the batch (callbacks not included). */
  total: number;
  /** Its jobs by status: waiting, pending, running, completed, dead, cancelled (absent: none; pruned jobs are not counted). */
  counts: Record<string, number>;
  /** True once every job of the batch finished (completed, dead or cancelled). */
  finished: boolean;
  /** The callbacks' job ids (null when not given). */
  onComplete: string | null;
  onSuccess: string | null;
  createdAt: Date;
}

/**
 * Inserts a batch's prepared `rows` (its `jobs` jobs first, then onComplete and onSuccess when `callbacks` says
 * they were given: workflow/graph.ts's batchItems) and its row, in one transaction of `pool`.
 */
export function insertBatch(
  o: { enqueuer: Enqueuer; workflows: WorkflowStore; pool: pg.Pool },
  rows: InsertRow[],
  jobs: number,
  callbacks: { onComplete: boolean; onSuccess: boolean },
): Promise<BatchResult> {
  return withTransaction(o.pool, async (tx) => {
    const results = await o.enqueuer.withParents(tx, rows, true);
    const own = results.slice(0, jobs);
    const rest = results.slice(jobs);
    const onComplete = callbacks.onComplete ? rest.shift() : undefined;
    const onSuccess = callbacks.onSuccess ? rest.shift() : undefined;
    const id = await o.workflows.batchInsert(
      { jobIds: own.map((r) => r.id), onComplete: onComplete?.id ?? null, onSuccess: onSuccess?.id ?? null },
      tx,
    );
    return { id, jobs: own, onComplete, onSuccess };
  });
}

/** Batch `id`'s jobs counted by status (live and finished), and its callbacks' ids. */
export async function batchStatus(workflows: WorkflowStore, id: string | number): Promise<BatchStatus> {
  const batchId = String(id);
  if (!isId(batchId)) throw new ValidationError(`batch id must be a positive integer, got ${batchId}`);
  const r = await workflows.batchStatus({ batchId });
  if (!r) throw new SkipqError("SKIPQ_NOT_FOUND", `batch ${batchId} does not exist`);
  // In the states' order (a JSON object's keys come back in no particular one).
  const found = r.counts;
  const counts: Record<string, number> = {};
  for (const status of ["waiting", "pending", "running", "completed", "dead", "cancelled"])
    if (found[status] !== undefined) counts[status] = Number(found[status]);
  const finished = (counts.completed ?? 0) + (counts.dead ?? 0) + (counts.cancelled ?? 0);
  return {
    id: batchId,
    total: Number(r.total),
    counts,
    finished: finished === Number(r.total),
    onComplete: r.on_complete,
    onSuccess: r.on_success,
    createdAt: r.created_at,
  };
}
