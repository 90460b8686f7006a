/**
 * Typed calls for the statements of sql/sagas.ts (create a saga, read or lock
 * it, move it through a guarded transition, find the stuck ones), over one
 * `Store`. Each call takes one object of named parameters and returns typed
 * rows; names and payloads are validated by the caller (saga/). A call given
 * a transaction `db` runs on it: a transition commits with the job it
 * enqueues, and the next compensation is chosen under sagaLock's row lock.
 */
import type { Queryable } from "./queryable.js";
import type { Store } from "./store.js";

export type SagaStatus = "running" | "completed" | "compensating" | "compensated" | "failed";
export type SagaStepStatus = "pending" | "completed" | "failed" | "compensated" | "compensation_failed";

/**
 * A step's entry in a saga's steps. `ran`: the step failed but its action ran (returned), so it is
 * compensated like a completed step.
 */
export interface SagaStepEntry {
  name: string;
  status: SagaStepStatus;
  result?: unknown;
  error?: string;
  ran?: boolean;
}

/** A saga as sagaGet and sagaLock read it (bigints as text). */
export interface SagaRow {
  id: string;
  name: string;
  status: SagaStatus;
  input: unknown;
  steps: SagaStepEntry[];
  current_step: number;
  current_job_id: string | null;
  error: string | null;
  created_at: Date;
  updated_at: Date;
}

/** A live saga whose current job is dead or cancelled (sagaStuck), with that job's last error. */
export interface SagaStuckRow {
  id: string;
  name: string;
  status: SagaStatus;
  current_step: number;
  current_job_id: string;
  last_error: string | null;
}

/** A guarded transition (sagaTransition): from (`fromStatus`, `fromStep`) to the rest. */
export interface SagaTransitionParams {
  sagaId: string;
  fromStatus: SagaStatus;
  fromStep: number;
  /** The step whose entry `patch` is merged into. */
  patchStep: number;
  /** A JSON object (as text) merged into step `patchStep`'s entry. */
  patch: string;
  toStatus: SagaStatus;
  toStep: number;
  /** The saga's current job from now on; null: none. */
  toJobId: string | null;
  /** The saga's error; null keeps the one it has. */
  error: string | null;
  /** When given, the saga's current job must be this one (the sweeper's guard). */
  guardJobId: string | null;
}

export class SagaStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.sagas;
  }

  /** Inserts saga `name` with `input` (JSON text, validated by the caller) and `steps`; returns its id. */
  async sagaInsert(p: { name: string; input: string; steps: SagaStepEntry[] }, db: Queryable): Promise<string> {
    const { rows } = await this.store.query<{ id: string }>(
      this.sql.sagaInsert,
      [p.name, p.input, JSON.stringify(p.steps)],
      db,
    );
    return String((rows[0] as { id: string }).id); // INSERT … RETURNING: always one row
  }

  /** Records saga `sagaId`'s first step job `jobId` (in the insert's transaction `db`). */
  async sagaSetJob(p: { sagaId: string; jobId: string }, db: Queryable): Promise<void> {
    await this.store.query<unknown>(this.sql.sagaSetJob, [p.sagaId, p.jobId], db);
  }

  /** Saga `sagaId`; undefined when there is none. */
  async sagaGet(p: { sagaId: string }, db?: Queryable): Promise<SagaRow | undefined> {
    return (await this.store.query<SagaRow>(this.sql.sagaGet, [p.sagaId], db)).rows[0];
  }

  /** Saga `sagaId`, locked until transaction `db` ends; undefined when there is none. */
  async sagaLock(p: { sagaId: string }, db: Queryable): Promise<SagaRow | undefined> {
    return (await this.store.query<SagaRow>(this.sql.sagaLock, [p.sagaId], db)).rows[0];
  }

  /** Moves a saga through a guarded transition in `db`; false when someone else moved it first. */
  async sagaTransition(p: SagaTransitionParams, db: Queryable): Promise<boolean> {
    const { rows } = await this.store.query<{ id: string }>(
      this.sql.sagaTransition,
      [
        p.sagaId,
        p.fromStatus,
        p.fromStep,
        p.patchStep,
        p.patch,
        p.toStatus,
        p.toStep,
        p.toJobId,
        p.error,
        p.guardJobId,
      ],
      db,
    );
    return rows.length > 0;
  }

  /** Up to `limit` live sagas whose current job died outside a handler, by id. */
  async sagaStuck(p: { limit: number }): Promise<SagaStuckRow[]> {
    return (await this.store.query<SagaStuckRow>(this.sql.sagaStuck, [p.limit])).rows;
  }
}
