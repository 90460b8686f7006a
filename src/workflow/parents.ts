/**
 * Workflows: loads `ctx.parents` for the jobs a worker starts. The jobs of
 * one claim start in the same tick, so their requests are gathered and sent
 * as one statement (one round trip per claim, not one per job: with a
 * 10,000-child fan-out, per-job reads made the drain ~30 times slower).
 */
import type { JobStore } from "../db/jobStore.js";

/** Workflows: a parent as its dependent's handler sees it (`ctx.parents`). */
export interface ParentOutcome {
  kind: string;
  /** How the parent ended; null when it is live again (retried by hand) while this job runs anyway. */
  status: "completed" | "dead" | "cancelled" | null;
  /** What the parent's handler returned (JSON); null when it returned nothing or its history is gone. */
  result: unknown;
  /** The parent's last error, when it died or was cancelled. */
  error: string | null;
}

type Parents = Record<string, ParentOutcome>;

interface Request {
  id: string;
  resolve: (parents: Parents) => void;
  reject: (error: unknown) => void;
}

export class ParentsLoader {
  private waiting: Request[] = [];
  private scheduled = false;

  constructor(private readonly jobs: JobStore) {}

  /** The parents of job `id`, by parent id. */
  load(id: string): Promise<Parents> {
    return new Promise((resolve, reject) => {
      this.waiting.push({ id, resolve, reject });
      if (this.scheduled) return;
      this.scheduled = true;
      setImmediate(() => {
        this.scheduled = false;
        void this.send(this.waiting.splice(0));
      });
    });
  }

  private async send(batch: Request[]): Promise<void> {
    try {
      const byChild = new Map<string, Parents>(batch.map((r) => [r.id, {}]));
      for (const p of await this.jobs.parentsOf([...byChild.keys()])) {
        const parents = byChild.get(p.child_id);
        if (parents) parents[p.id] = { kind: p.kind, status: p.status, result: p.result ?? null, error: p.last_error };
      }
      for (const r of batch) r.resolve(byChild.get(r.id) as Parents);
    } catch (error) {
      for (const r of batch) r.reject(error);
    }
  }
}
