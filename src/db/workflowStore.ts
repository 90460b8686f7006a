/**
 * Typed calls for the reads of sql/workflows.ts an operator makes (a job's
 * parents, the graph around a job), a batch's row and progress
 * (`Skipq.batch`, `batchStatus`), and retention's prunes of edges and
 * batches, over one `Store`. Each call takes one object of named parameters
 * and returns typed rows. Inserting jobs, linking them and a handler's
 * parents stay on `JobStore` (the hot path).
 */
import type { JobStatus } from "./adminStore.js";
import type { Queryable } from "./queryable.js";
import type { Store } from "./store.js";

/** Workflows: a job in the graph around another (`Admin.flow`); kind and status null once pruned. */
export interface FlowNode {
  id: string;
  kind: string | null;
  status: JobStatus | null;
  result: unknown;
}

/** A jobFlow row: a parent or a child of the job. */
export interface FlowEdgeRow extends FlowNode {
  side: "parent" | "child";
}

/** A parent of a job (jobDependsOn): `counted` once it no longer holds the job back. */
export interface DependsOnRow {
  id: string;
  counted: boolean;
}

/** A batch as batchStatus reads it: its callbacks, its size, and its jobs counted by status (live or finished). */
export interface BatchStatusRow {
  id: string;
  on_complete: string | null;
  on_success: string | null;
  created_at: Date;
  /** Jobs in the batch (callbacks not included). */
  total: number;
  /** Jobs by status, as a JSON object (absent: none; pruned jobs are not counted). */
  counts: Record<string, number | string>;
}

export class WorkflowStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.workflows;
  }

  /** The parents of job `jobId`, by id. */
  async jobDependsOn(p: { jobId: string }): Promise<DependsOnRow[]> {
    return (await this.store.query<DependsOnRow>(this.sql.jobDependsOn, [p.jobId])).rows;
  }

  /** The parents and children of job `jobId`, at most `limit` of each (parents first, by id). */
  async jobFlow(p: { jobId: string; limit: number }): Promise<FlowEdgeRow[]> {
    return (await this.store.query<FlowEdgeRow>(this.sql.jobFlow, [p.jobId, p.limit])).rows;
  }

  /**
   * Writes the row of a batch of jobs `jobIds` with its callbacks (null: not given), in the transaction `db`
   * that enqueued them. Returns the batch's id.
   */
  async batchInsert(
    p: { jobIds: readonly string[]; onComplete: string | null; onSuccess: string | null },
    db: Queryable,
  ): Promise<string> {
    const { rows } = await this.store.query<{ id: string }>(
      this.sql.batchInsert,
      [p.jobIds, p.onComplete, p.onSuccess],
      db,
    );
    return (rows[0] as { id: string }).id; // INSERT … RETURNING: always one row
  }

  /** Batch `batchId`'s progress; undefined when there is no such batch. */
  async batchStatus(p: { batchId: string }): Promise<BatchStatusRow | undefined> {
    return (await this.store.query<BatchStatusRow>(this.sql.batchStatus, [p.batchId])).rows[0];
  }

  /** Retention: deletes up to `limit` edges older than `olderThanMs` whose child is no longer live; how many. */
  async edgesPrune(p: { olderThanMs: number; limit: number }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.edgesPrune, [p.olderThanMs, p.limit])).rowCount ?? 0;
  }

  /** Retention: deletes up to `limit` batches older than `olderThanMs` none of whose jobs is live; how many. */
  async batchesPrune(p: { olderThanMs: number; limit: number }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.batchesPrune, [p.olderThanMs, p.limit])).rowCount ?? 0;
  }
}
