/**
 * Sagas (role `saga`), the definitions: a workflow of ordered steps, each an
 * action with a compensation, and the state a saga is in. The runner that
 * moves sagas is in sagas.ts.
 */

import { ValidationError } from "../core/errors.js";
import { assertId, assertName, type Duration } from "../core/validate.js";
import { type SagaRow, type SagaStatus, type SagaStepStatus, SagaStore } from "../db/sagaStore.js";
import type { Skipq } from "../skipq.js";
import type { JobContext, WorkerOptions } from "../worker/worker.js";

export type { SagaStatus, SagaStepStatus } from "../db/sagaStore.js";

/** What an action or compensation receives. */
export interface SagaContext<Input> {
  sagaId: string;
  input: Input;
  /** Results of the steps completed so far, by step name. */
  results: Record<string, unknown>;
  /** The previous step's result (for an action), or this step's own result (for a compensation). */
  previous: unknown;
  /** The underlying job's context: attempt, signal, heartbeat, log. */
  job: JobContext<unknown>;
}

export interface SagaStep<Input> {
  /** Unique within the saga; results are keyed by it. */
  name: string;
  /** Does the step's work; its JSON result is stored and passed on. Throw to retry; throw FailPermanently to give up now. */
  action(ctx: SagaContext<Input>): unknown | Promise<unknown>;
  /** Undoes a completed step; runs in reverse order after a later step dies. Omit when nothing needs undoing. */
  compensate?(ctx: SagaContext<Input>): unknown | Promise<unknown>;
}

export interface SagaDefinition<Input> {
  readonly name: string;
  readonly steps: ReadonlyArray<SagaStep<Input>>;
  /** The job kind carrying this saga's steps: `saga:<name>`. */
  readonly kind: string;
  /** Phantom: the input type. */
  readonly __input?: Input;
}

/** Define a saga: a stable name (at most 100 characters of [A-Za-z0-9_.:-]) and its ordered steps. */
export function defineSaga<Input>(name: string, steps: ReadonlyArray<SagaStep<Input>>): SagaDefinition<Input> {
  assertName("saga", name);
  if (name.length > 100) throw new ValidationError("saga name must be at most 100 characters");
  if (!Array.isArray(steps) || steps.length === 0) throw new ValidationError(`saga "${name}" needs at least one step`);
  const names = new Set<string>();
  for (const step of steps) {
    if (typeof step?.name !== "string" || step.name.length === 0 || typeof step.action !== "function") {
      throw new ValidationError(`every step of saga "${name}" needs a name and an action function`);
    }
    if (names.has(step.name)) throw new ValidationError(`saga "${name}" has two steps named "${step.name}"`);
    if (step.compensate !== undefined && typeof step.compensate !== "function") {
      throw new ValidationError(`compensate of step "${step.name}" must be a function`);
    }
    names.add(step.name);
  }
  return Object.freeze({ name, steps: Object.freeze([...steps]), kind: `saga:${name}` });
}

/** A saga's state, as `Sagas.get` and `skipq saga <id>` show it. */
export interface SagaState {
  id: string;
  name: string;
  status: SagaStatus;
  input: unknown;
  /** The step being run (running) or compensated (compensating). */
  currentStep: number;
  currentJobId: string | null;
  /**
   * `ran`: the step failed but its action ran (returned) — its result could not be stored, or it returned
   * after its job was cancelled and the step failed — so it is compensated like a completed step.
   */
  steps: Array<{ name: string; status: SagaStepStatus; result?: unknown; error?: string; ran?: boolean }>;
  error: string | null;
  createdAt: Date;
  updatedAt: Date;
}

export interface SagaOptions {
  /** Queue for step jobs. Default "sagas". */
  queue?: string;
  /** Attempts per action or compensation before it dies. Default 3. */
  maxAttempts?: number;
  /** Options of the Worker that runs step jobs (its queues are the saga queue). Default: the Worker's defaults. */
  worker?: Omit<WorkerOptions, "queues">;
  /** Time between sweeps for step jobs that died outside a handler (reaper, cancel). Default "5s". */
  sweepInterval?: Duration;
}

/** A saga's state by id (undefined when absent). Also what `skipq saga <id>` prints. */
export async function getSaga(skipq: Pick<Skipq, "store">, id: string): Promise<SagaState | undefined> {
  assertId(id, "saga id");
  return sagaState(await new SagaStore(skipq.store).sagaGet({ sagaId: id }));
}

/** A row of sagaGet or sagaLock as a SagaState (undefined for no row). */
export function sagaState(row: SagaRow | undefined): SagaState | undefined {
  if (!row) return undefined;
  return {
    id: String(row.id),
    name: row.name,
    status: row.status,
    input: row.input,
    currentStep: row.current_step,
    currentJobId: row.current_job_id === null ? null : String(row.current_job_id),
    steps: row.steps,
    error: row.error,
    createdAt: row.created_at,
    updatedAt: row.updated_at,
  };
}
