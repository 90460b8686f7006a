/**
 * Sagas (role `saga`), the runner: a workflow of ordered steps (define.ts), each an
 * action with a compensation. Every step and every compensation runs as a skipq job on the
 * core Worker; a step's result is stored on the saga and handed to later steps.
 * When a step dies (attempts used up, FailPermanently, cancelled, or buried by
 * the reaper) the compensations of the completed steps run in reverse order.
 *
 * Invariants: a saga moves only through guarded transitions (db/sql/sagas.ts),
 * each committed together with the job it enqueues, so a step never advances
 * twice and no transition is lost; actions and compensations run at least once
 * and must be idempotent. It never runs user code inside a transaction.
 */
import type { Queryable, Skipq } from "../core/client.js";
import { CancelJob, FailPermanently, RetryIn, ValidationError } from "../core/errors.js";
import { assertInt, assertName, encodePayload, toMs } from "../core/validate.js";
import type { Store } from "../db/store.js";
import { Service } from "../maintenance/service.js";
import type { JobContext, Worker } from "../worker/worker.js";
import {
  getSaga,
  type SagaContext,
  type SagaDefinition,
  type SagaOptions,
  type SagaState,
  type SagaStatus,
  type SagaStep,
} from "./define.js";

// biome-ignore lint/suspicious/noExplicitAny: one runner holds sagas of any input type.
type AnySaga = SagaDefinition<any>;

interface StepPayload {
  saga: string;
  step: number;
  phase: "action" | "compensate";
}

const MAX_ERROR = 2000;

/**
 * The saga runner (role `saga`): start/stop/runOnce. `start()` runs a Worker
 * for step jobs and the sweeper; `runOnce()` is one sweep (tests call it).
 */
export class Sagas {
  readonly queue: string;
  readonly maxAttempts: number;
  readonly worker: Worker;
  private readonly store: Store;
  private readonly definitions = new Map<string, AnySaga>();
  private readonly sweeper: Service<number>;

  constructor(
    readonly skipq: Skipq,
    definitions: ReadonlyArray<AnySaga>,
    options: SagaOptions = {},
  ) {
    this.queue = assertName("queue", options.queue ?? "sagas");
    this.maxAttempts = assertInt("maxAttempts", options.maxAttempts ?? 3, 1, 1000);
    this.store = skipq.store;
    this.sweeper = new Service({
      name: "saga sweeper",
      intervalMs: toMs("sweepInterval", options.sweepInterval ?? "5s", { allowZero: false }),
      run: () => this.sweep(),
      logger: skipq.logger,
      firstPass: "spread",
    });
    this.worker = skipq.worker({ ...options.worker, queues: [this.queue] });
    for (const definition of definitions) {
      if (this.definitions.has(definition.name)) throw new ValidationError(`saga "${definition.name}" given twice`);
      this.definitions.set(definition.name, definition);
      this.worker.register(definition.kind, (payload, ctx) =>
        this.runStep(definition, payload as StepPayload, ctx as JobContext<unknown>),
      );
    }
  }

  /** Start a saga; returns its id. */
  async startSaga<Input>(saga: SagaDefinition<Input>, input: Input): Promise<{ id: string }> {
    return this.store.transaction((tx) => this.startSagaTx(tx, saga, input));
  }

  /** Start a saga inside the caller's transaction: it exists iff that transaction commits. */
  async startSagaTx<Input>(tx: Queryable, saga: SagaDefinition<Input>, input: Input): Promise<{ id: string }> {
    if (this.definitions.get(saga?.name) !== (saga as unknown)) {
      throw new ValidationError(
        `saga "${saga?.name}" is not registered with this runner; pass its definition to new Sagas(skipq, [...])`,
      );
    }
    const steps = saga.steps.map((s) => ({ name: s.name, status: "pending" }));
    const { rows } = await tx.query(
      this.store.config(this.store.sql.sagas.sagaInsert, [
        saga.name,
        encodePayload(input ?? null, this.skipq.maxPayloadBytes),
        JSON.stringify(steps),
      ]),
    );
    const id = String(rows[0].id);
    const job = await this.enqueueStep(tx, saga, { saga: id, step: 0, phase: "action" });
    await this.store.query(this.store.sql.sagas.sagaSetJob, [id, job], tx);
    return { id };
  }

  /** A saga's state, or undefined when there is none with this id. */
  async get(id: string): Promise<SagaState | undefined> {
    return getSaga(this.skipq, id);
  }

  /** Starts the step worker, whose maintainer runs the sweeper. Idempotent. */
  async start(): Promise<void> {
    if (this.worker.maintainer) this.worker.maintainer.add(this.sweeper);
    else this.sweeper.start();
    await this.worker.start();
  }

  /** Stops the step worker (gracefully) and the sweeper. Safe before start and twice. */
  async stop(): Promise<void> {
    await this.worker.stop();
    await this.sweeper.stop();
  }

  /**
   * One sweep: sagas whose current step job died outside a handler (the reaper
   * buried it, or it was cancelled) start compensating, or fail when it was a
   * compensation. Returns how many sagas moved.
   */
  runOnce(): Promise<number> {
    return this.sweeper.runOnce();
  }

  private async sweep(): Promise<number> {
    const { rows } = await this.store.query(this.store.sql.sagas.sagaStuck, [100]);
    let moved = 0;
    for (const row of rows) {
      const saga = this.definitions.get(row.name);
      if (!saga) continue;
      const error = `step job ${row.current_job_id} died: ${String(row.last_error ?? "no error recorded").slice(0, MAX_ERROR)}`;
      const ok = await this.inTransaction((tx) =>
        row.status === "running"
          ? this.failStep(tx, saga, String(row.id), row.current_step, error, String(row.current_job_id))
          : this.failCompensation(tx, String(row.id), row.current_step, error, String(row.current_job_id)),
      );
      if (ok) moved++;
    }
    return moved;
  }

  private async runStep(saga: AnySaga, payload: StepPayload, job: JobContext<unknown>): Promise<void> {
    const state = await this.get(payload.saga);
    const expected = payload.phase === "action" ? "running" : "compensating";
    // A duplicate (at-least-once) or overtaken job: the saga already moved on.
    if (!state || state.status !== expected || state.currentStep !== payload.step) return;
    const step = saga.steps[payload.step] as SagaStep<unknown>;
    const results: Record<string, unknown> = {};
    for (const s of state.steps) if (s.status === "completed" || s.status === "compensated") results[s.name] = s.result;
    const previous =
      payload.phase === "action" ? state.steps[payload.step - 1]?.result : state.steps[payload.step]?.result;
    const ctx: SagaContext<unknown> = { sagaId: state.id, input: state.input, results, previous, job };
    let result: unknown;
    try {
      result = payload.phase === "action" ? await step.action(ctx) : await step.compensate?.(ctx);
    } catch (error) {
      // RetryIn snoozes without using the attempt, so it is never final.
      const final =
        error instanceof FailPermanently ||
        error instanceof CancelJob ||
        (!(error instanceof RetryIn) && job.attempt >= job.job.maxAttempts);
      if (final) {
        const message = errorText(error);
        await this.inTransaction((tx) =>
          payload.phase === "action"
            ? this.failStep(tx, saga, state.id, payload.step, message, null)
            : this.failCompensation(tx, state.id, payload.step, message, null),
        );
      }
      throw error;
    }
    await this.inTransaction(async (tx) => {
      if (payload.phase === "action") {
        const encoded = encodePayload(result ?? null, this.skipq.maxPayloadBytes);
        const next = payload.step + 1;
        const done = next >= saga.steps.length;
        const nextJob = done ? null : await this.enqueueStep(tx, saga, { saga: state.id, step: next, phase: "action" });
        return this.transition(tx, state.id, "running", payload.step, `{"status":"completed","result":${encoded}}`, {
          status: done ? "completed" : "running",
          step: done ? payload.step : next,
          job: nextJob,
        });
      }
      return this.compensateFrom(tx, saga, state.id, payload.step, "compensating", '{"status":"compensated"}', null);
    });
  }

  /** An action died: mark it failed and start compensating the completed steps below it. */
  private async failStep(
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
  private async failCompensation(
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
   * next lower compensation, or finish as compensated. Steps between without a compensation count as
   * compensated (nothing to undo).
   */
  private async compensateFrom(
    tx: Queryable,
    saga: AnySaga,
    id: string,
    from: number,
    fromStatus: "running" | "compensating",
    patch: string,
    guardJob: string | null,
    error?: string,
  ): Promise<boolean> {
    const target = await this.nextCompensation(id, saga, from - 1);
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

  /** The highest step at or below `from` that completed and has a compensation. */
  private async nextCompensation(id: string, saga: AnySaga, from: number): Promise<number | undefined> {
    const state = await this.get(id);
    for (let i = from; i >= 0; i--) {
      if (state?.steps[i]?.status === "completed" && saga.steps[i]?.compensate) return i;
    }
    return undefined;
  }

  private async transition(
    tx: Queryable,
    id: string,
    fromStatus: SagaStatus,
    fromStep: number,
    patch: string,
    to: { status: SagaStatus; step: number; job: string | null; error?: string; guardJob?: string | null },
  ): Promise<boolean> {
    const { rows } = await tx.query(
      this.store.config(this.store.sql.sagas.sagaTransition, [
        id,
        fromStatus,
        fromStep,
        fromStep,
        patch,
        to.status,
        to.step,
        to.job,
        to.error ?? null,
        to.guardJob ?? null,
      ]),
    );
    if (rows.length === 0) throw new Overtaken();
    return true;
  }

  private async enqueueStep(tx: Queryable, saga: AnySaga, payload: StepPayload): Promise<string> {
    const { id } = await this.skipq.enqueueTx(tx, saga.kind, payload, {
      queue: this.queue,
      maxAttempts: this.maxAttempts,
    });
    return id;
  }

  /** Runs `body` in a transaction; a guarded transition that lost its race rolls back and returns false. */
  private async inTransaction(body: (tx: Queryable) => Promise<boolean>): Promise<boolean> {
    try {
      return await this.store.transaction(body);
    } catch (error) {
      if (error instanceof Overtaken) return false;
      throw error;
    }
  }
}

/** A guarded transition found the saga already moved (a duplicate job, or the sweeper raced a handler). */
class Overtaken extends Error {}

function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.slice(0, MAX_ERROR);
}
