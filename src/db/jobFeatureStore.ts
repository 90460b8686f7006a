/**
 * Typed calls for the statements of sql/jobFeatures.ts (results, progress,
 * attempt logs, waiting, uniqueness windows, debounce), over a `Store`. Like
 * `JobStore`, it shapes values and rows and decides nothing about when to
 * call them.
 */
import type { Store } from "./store.js";

export class JobFeatureStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.features;
  }

  /** Records successes with results (JSON texts, index for index); returns the ids whose lease still matched. */
  async completeManyWithResults(
    ids: readonly string[],
    leases: readonly string[],
    results: readonly string[],
  ): Promise<string[]> {
    const { rows } = await this.store.query<{ id: string }>(this.sql.jobCompleteManyWithResults, [
      ids,
      leases,
      results,
    ]);
    return rows.map((r) => r.id);
  }
}
