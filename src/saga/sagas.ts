/**
 * Sagas (role `saga`), the runner: a workflow of ordered steps (define.ts), each an
 * action with a compensation. Every step and every compensation runs as a skipq job on the
 * core Worker; a step's result is stored on the saga and handed to later steps.
 * When a step dies (attempts used up, FailPermanently, cancelled, or buried by
 * the reaper) the compensations of the completed steps run in reverse order.
 *
 * An action's side effect happened once it returned: such an action is never
 * run again because of what it returned (a result the saga cannot store fails
 * the step at once), and it is compensated whenever the saga compensates — also
 * when it returned after its step was failed (its job cancelled meanwhile).
 *
 * Invariants: a saga moves only through guarded transitions (transitions.ts over db/sql/sagas.ts),
 * each committed together with the job it enqueues, so a step never advances
 * twice and no transition is lost; the next compensation is chosen under the
 * saga's row lock; actions and compensations run at least once and must be
 * idempotent. It never runs user code inside a transaction.
 */

import {
  CancelJob,
  FailPermanently,
  ResultNotJsonError,
  ResultTooLargeError,
  RetryIn,
  ValidationError,
} from "../core/errors.js";
import { assertInt, assertName, encodePayload, encodeResult, toMs } from "../core/validate.js";
import { type SagaStepEntry, SagaStore } from "../db/sagaStore.js";
import type { Store } from "../db/store.js";
import { Service } from "../shared/service.js";
import type { Queryable, Skipq } from "../skipq.js";
import type { JobContext, Worker } from "../worker/worker.js";
import {
  getSaga,
  type SagaContext,
  type SagaDefinition,
  type SagaOptions,
  type SagaState,
  type SagaStep,
} from "./define.js";
import { type AnySaga, SagaTransitions, type StepPayload } from "./transitions.js";

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
  private readonly sagaStore: SagaStore;
  private readonly definitions = new Map<string, AnySaga>();
  private readonly sweeper: Service<number>;
  /** Every move of a saga's row after its start (transitions.ts). */
  private readonly transitions: SagaTransitions;

  constructor(
    readonly skipq: Skipq,
    definitions: ReadonlyArray<AnySaga>,
    options: SagaOptions = {},
  ) {
    this.queue = assertName("queue", options.queue ?? "sagas");
    this.maxAttempts = assertInt("maxAttempts", options.maxAttempts ?? 3, 1, 1000);
    this.store = skipq.store;
    this.sagaStore = new SagaStore(skipq.store);
    this.transitions = new SagaTransitions({
      skipq,
      store: this.store,
      sagaStore: this.sagaStore,
      queue: this.queue,
      maxAttempts: this.maxAttempts,
    });
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
    const steps = saga.steps.map((s): SagaStepEntry => ({ name: s.name, status: "pending" }));
    const id = await this.sagaStore.sagaInsert(
      { name: saga.name, input: encodePayload(input ?? null, this.skipq.maxPayloadBytes), steps },
      tx,
    );
    const job = await this.transitions.enqueueStep(tx, saga, { saga: id, step: 0, phase: "action" });
    await this.sagaStore.sagaSetJob({ sagaId: id, jobId: job }, tx);
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
    const rows = await this.sagaStore.sagaStuck({ limit: 100 });
    let moved = 0;
    for (const row of rows) {
      const saga = this.definitions.get(row.name);
      if (!saga) continue;
      const error = `step job ${row.current_job_id} died: ${String(row.last_error ?? "no error recorded").slice(0, MAX_ERROR)}`;
      const ok = await this.transitions.inTransaction((tx) =>
        row.status === "running"
          ? this.transitions.failStep(tx, saga, String(row.id), row.current_step, error, String(row.current_job_id))
          : this.transitions.failCompensation(tx, String(row.id), row.current_step, error, String(row.current_job_id)),
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
        await this.transitions.inTransaction((tx) =>
          payload.phase === "action"
            ? this.transitions.failStep(tx, saga, state.id, payload.step, message, null)
            : this.transitions.failCompensation(tx, state.id, payload.step, message, null),
        );
      }
      throw error;
    }
    if (payload.phase === "compensate") {
      await this.transitions.inTransaction((tx) =>
        this.transitions.compensateFrom(
          tx,
          saga,
          state.id,
          payload.step,
          "compensating",
          '{"status":"compensated"}',
          null,
        ),
      );
      return;
    }
    // The action ran: whatever happens now, it must not run again because of its result, and the saga must
    // undo it if it compensates.
    const encoded = this.encodeResult(payload.step, step.name, result);
    if (typeof encoded !== "string") {
      const error = encoded.error;
      const failed = await this.transitions.inTransaction((tx) =>
        this.transitions.compensateFrom(
          tx,
          saga,
          state.id,
          payload.step,
          "running",
          JSON.stringify({ status: "failed", ran: true, error }),
          null,
          error,
          true,
        ),
      );
      if (!failed) await this.ranAfterFailure(saga, state.id, payload.step, undefined);
      throw new FailPermanently(error);
    }
    const moved = await this.transitions.inTransaction(async (tx) => {
      const next = payload.step + 1;
      const done = next >= saga.steps.length;
      const nextJob = done
        ? null
        : await this.transitions.enqueueStep(tx, saga, { saga: state.id, step: next, phase: "action" });
      return this.transitions.transition(
        tx,
        state.id,
        "running",
        payload.step,
        `{"status":"completed","result":${encoded}}`,
        {
          status: done ? "completed" : "running",
          step: done ? payload.step : next,
          job: nextJob,
        },
      );
    });
    if (!moved) await this.ranAfterFailure(saga, state.id, payload.step, encoded);
  }

  /**
   * An action's result as the JSON the saga stores, or the error that fails its step: plain JSON only (as a
   * job's result, docs/jobs.md), at most the client's maxPayloadBytes (it travels in later steps' context).
   */
  private encodeResult(step: number, name: string, result: unknown): string | { error: string } {
    try {
      return encodeResult(result ?? null, this.skipq.maxPayloadBytes);
    } catch (error) {
      const why =
        error instanceof ResultTooLargeError
          ? `its result is ${error.bytes} bytes, over the client's maxPayloadBytes of ${error.limit}; store large results elsewhere and return a reference`
          : error instanceof ResultNotJsonError
            ? `its ${error.message.replace(/^the handler's /, "")}`
            : errorText(error);
      return {
        error:
          `step ${step} (${name}) returned a result the saga cannot store, so it fails without running again and is compensated: ${why}`.slice(
            0,
            MAX_ERROR,
          ),
      };
    }
  }

  /**
   * Step `step`'s action returned, but the saga had already moved on: the sweeper failed the step (its job
   * was cancelled while the action ran) and is undoing the steps before it, or has undone them. The action
   * did run, so the step is marked `ran` (with its result, when it has one) and compensated: by the
   * compensation chain still going (it picks the highest step to undo, under the saga's lock), or — when
   * the saga already ended compensated — by reopening it at this step. Nothing to do when the step was not
   * failed (a duplicate job recorded it), or is already marked.
   */
  private async ranAfterFailure(saga: AnySaga, id: string, step: number, encoded: string | undefined): Promise<void> {
    await this.transitions.inTransaction(async (tx) => {
      const state = await this.transitions.lock(tx, id);
      const entry = state?.steps[step];
      if (!state || entry?.status !== "failed" || entry.ran) return false;
      const patch = encoded === undefined ? '{"ran":true}' : `{"ran":true,"result":${encoded}}`;
      const reopen = state.status === "compensated" && saga.steps[step]?.compensate !== undefined;
      const job = reopen ? await this.transitions.enqueueStep(tx, saga, { saga: id, step, phase: "compensate" }) : null;
      return this.transitions.transition(
        tx,
        id,
        state.status,
        state.currentStep,
        patch,
        reopen
          ? { status: "compensating", step, job }
          : { status: state.status, step: state.currentStep, job: state.currentJobId },
        step,
      );
    });
  }
}

function errorText(error: unknown): string {
  const text = error instanceof Error ? error.message : String(error);
  return text.slice(0, MAX_ERROR);
}
