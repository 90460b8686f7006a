/**
 * Typed calls for the dashboard live feed's statements of sql/dashboard.ts
 * (the watched jobs, the jobs in flight), over one `Store`. Each call takes
 * one object of named parameters and returns typed rows (bigint ids as
 * text); what a page may show of a row (redaction) is the caller's
 * (ops/dashboard/live.ts).
 */
import type { Store } from "./store.js";

/** A watched job as liveJobs reads it: jobs or job_history, its error cut to 2,000 characters. */
export interface LiveJobRow {
  id: string;
  queue: string;
  kind: string;
  status: string;
  priority: number;
  attempts: number;
  max_attempts: number;
  run_at: Date | null;
  locked_by: string | null;
  locked_at: Date | null;
  completed_at: Date | null;
  updated_at: Date | null;
  last_error: string | null;
}

/** A running job as liveRunning reads it (the running partial index, oldest lease first). */
export interface LiveRunningRow {
  id: string;
  queue: string;
  kind: string;
  locked_by: string;
  locked_at: Date | null;
  attempts: number;
  max_attempts: number;
}

export class LiveStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.dashboard;
  }

  /** The jobs of `ids` (at most a few hundred), live or finished; an id with no job has no row. */
  async liveJobs(p: { ids: string[] }): Promise<LiveJobRow[]> {
    const { rows } = await this.store.query<LiveJobRow>(this.sql.liveJobs, [p.ids]);
    return rows.map((r) => ({ ...r, id: String(r.id) }));
  }

  /** Up to 1,000 running jobs, oldest lease first. */
  async liveRunning(): Promise<LiveRunningRow[]> {
    const { rows } = await this.store.query<LiveRunningRow>(this.sql.liveRunning);
    return rows.map((r) => ({ ...r, id: String(r.id) }));
  }
}
