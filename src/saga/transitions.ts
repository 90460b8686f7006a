/**
 * A saga's transitions (role `saga`): every move of a saga's row after its
 * start — a step failed, a compensation failed, the next compensation chosen
 * and enqueued, a guarded status change — for the runner's step handlers and
 * its sweep (sagas.ts) alike.
 *
 * Invariants: each transition is guarded on the status and step it moves
 * from (db/sql/sagas.ts) and runs in the caller's transaction together with
 * the job it enqueues, so a step never advances twice and no transition is
 * lost; one that lost its race throws Overtaken, which inTransaction turns
 * into a rollback and `false`; the next compensation is chosen under the
 * saga's row lock. It never runs user code.
 */
import type { SagaStore } from "../db/sagaStore.js";
import type { Store } from "../db/store.js";
import type { Queryable, Skipq } from "../skipq.js";
import { type SagaDefinition, type SagaState, type SagaStatus, sagaState } from "./define.js";

// biome-ignore lint/suspicious/noExplicitAny: one runner holds sagas of any input type.
export type AnySaga = SagaDefinition<any>;

/** A step job's payload: which saga, which step, and whether it runs the action or the compensation. */
export interface StepPayload {
  saga: string;
  step: number;
  phase: "action" | "compensate";
}

/** What the transitions need of their runner: its client, store, the step queue and attempts. */
export interface TransitionParts {
  skipq: Skipq;
  store: Store;
  sagaStore: SagaStore;
  queue: string;
  maxAttempts: number;
}

export class SagaTransitions {
  private readonly skipq: Skipq;
  private readonly store: Store;
  private readonly sagaStore: SagaStore;
  private readonly queue: string;
  private readonly maxAttempts: number;

  constructor(parts: TransitionParts) {
    this.skipq = parts.skipq;
    this.store = parts.store;
    this.sagaStore = parts.sagaStore;
    this.queue = parts.queue;
    this.maxAttempts = parts.maxAttempts;
  }

  /** An action died: mark it failed and start compensating the completed steps below it. */
  async failStep(
    tx: Queryable,
    saga: AnySaga,
    id: string,
    step: number,
    error: string,
    guardJob: string | null,
  ): Promise<boolean> {
    return this.compensateFrom(
      tx,
      saga,
      id,
      step,
      "running",
      JSON.stringify({ status: "failed", error }),
      guardJob,
      error,
    );
  }

  /** A compensation died: the saga is failed and needs an operator. */
  async failCompensation(
    tx: Queryable,
    id: string,
    step: number,
    error: string,
    guardJob: string | null,
  ): Promise<boolean> {
    return this.transition(tx, id, "compensating", step, JSON.stringify({ status: "compensation_failed", error }), {
      status: "failed",
      step,
      job: null,
      error: `compensation of step ${step} failed: ${error}`,
      guardJob,
    });
  }

  /**
   * After step `from` failed (the saga is `running`) or was compensated (`compensating`): enqueue the
   * next compensation, or finish as compensated. `self`: step `from` itself is undone first (its action
   * ran although the step failed). Steps without a compensation count as compensated (nothing to undo).
   */
  async compensateFrom(
    tx: Queryable,
    saga: AnySaga,
    id: string,
    from: number,
    fromStatus: "running" | "compensating",
    patch: string,
    guardJob: string | null,
    error?: string,
    self = false,
  ): Promise<boolean> {
    const state = await this.lock(tx, id);
    const target = self && saga.steps[from]?.compensate ? from : nextCompensation(state, saga, from);
    const job =
      target === undefined ? null : await this.enqueueStep(tx, saga, { saga: id, step: target, phase: "compensate" });
    return this.transition(tx, id, fromStatus, from, patch, {
      status: target === undefined ? "compensated" : "compensating",
      step: target ?? from,
      job,
      error,
      guardJob,
    });
  }

  /** The saga, locked until `tx` ends (every choice of the next compensation is made under this lock). */
  async lock(tx: Queryable, id: string): Promise<SagaState | undefined> {
    return sagaState(await this.sagaStore.sagaLock({ sagaId: id }, tx));
  }

  /** Moves saga `id` from (`fromStatus`, `fromStep`), merging `patch` into step `patchStep`'s entry (default `fromStep`). */
  async transition(
    tx: Queryable,
    id: string,
    fromStatus: SagaStatus,
    fromStep: number,
    patch: string,
    to: { status: SagaStatus; step: number; job: string | null; error?: string; guardJob?: string | null },
    patchStep = fromStep,
  ): Promise<boolean> {
    const moved = await this.sagaStore.sagaTransition(
      {
        sagaId: id,
        fromStatus,
        fromStep,
        patchStep,
        patch,
        toStatus: to.status,
        toStep: to.step,
        toJobId: to.job,
        error: to.error ?? null,
        guardJobId: to.guardJob ?? null,
      },
      tx,
    );
    if (!moved) throw new Overtaken();
    return true;
  }

  async enqueueStep(tx: Queryable, saga: AnySaga, payload: StepPayload): Promise<string> {
    const { id } = await this.skipq.enqueueTx(tx, saga.kind, payload, {
      queue: this.queue,
      maxAttempts: this.maxAttempts,
    });
    return id;
  }

  /** Runs `body` in a transaction; a guarded transition that lost its race rolls back and returns false. */
  async inTransaction(body: (tx: Queryable) => Promise<boolean>): Promise<boolean> {
    try {
      return await this.store.transaction(body);
    } catch (error) {
      if (error instanceof Overtaken) return false;
      throw error;
    }
  }
}

/**
 * The step to compensate next, other than `from` (the step just failed or just compensated): the highest one
 * with a compensation that completed, or that failed after its action ran. Higher than the failed step,
 * nothing ever completed, so this is the reverse order of the steps — with a step that ran after it was
 * failed taken next, whenever it was marked.
 */
function nextCompensation(state: SagaState | undefined, saga: AnySaga, from: number): number | undefined {
  for (let i = saga.steps.length - 1; i >= 0; i--) {
    const entry = state?.steps[i];
    if (i === from || !saga.steps[i]?.compensate) continue;
    if (entry?.status === "completed" || (entry?.status === "failed" && entry.ran)) return i;
  }
  return undefined;
}

/** A guarded transition found the saga already moved (a duplicate job, or the sweeper raced a handler). */
class Overtaken extends Error {}
