/**
 * Typed calls for the statements of sql/jobFeatures.ts (results, progress,
 * attempt logs, waiting, uniqueness windows, debounce), over a `Store`. Like
 * `JobStore`, it shapes values and rows and decides nothing about when to
 * call them.
 */
import type { Queryable } from "./queryable.js";
import type { Store } from "./store.js";

export class JobFeatureStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.features;
  }

  /**
   * Records successes with results (JSON texts, index for index); returns the ids whose lease still matched.
   * `db`: a transaction (a handler's spawns commit with its outcome).
   */
  async completeManyWithResults(
    ids: readonly string[],
    leases: readonly string[],
    results: readonly string[],
    db?: Queryable,
  ): Promise<string[]> {
    const { rows } = await this.store.query<{ id: string }>(
      this.sql.jobCompleteManyWithResults,
      [ids, leases, results],
      db,
    );
    return rows.map((r) => r.id);
  }

  /**
   * Extends leases by `leaseMs` and writes each job's `progress` (JSON text; undefined keeps the stored
   * value); returns the ids still held.
   */
  async heartbeatWithProgress(
    jobs: ReadonlyArray<{ id: string; lease: string; progress: string | undefined }>,
    leaseMs: number,
  ): Promise<string[]> {
    const { rows } = await this.store.query<{ id: string }>(this.sql.jobHeartbeatProgressMany, [
      jobs.map((j) => j.id),
      jobs.map((j) => j.lease),
      leaseMs,
      jobs.map((j) => j.progress ?? null),
    ]);
    return rows.map((r) => r.id);
  }
}
