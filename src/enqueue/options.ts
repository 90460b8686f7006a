/**
 * What an enqueue call takes and returns: the options of one job
 * (`EnqueueOptions`), its result, the job references and bulk items of
 * `enqueueMany`, `batch` and `ctx.spawn`, and the compile-time check of each
 * bulk item's payload against its own job (`CheckedItems`). Types only; their
 * validation is prepare.ts's.
 */
import type { JobDefinition, PayloadOf } from "../core/job.js";
import type { Duration } from "../core/validate.js";
import type { ParentFailurePolicy, ParentRef } from "../workflow/graph.js";

export interface EnqueueOptions {
  /** Queue name. Default: the job definition's queue, else "default". */
  queue?: string | undefined;
  /** Higher runs first, -32768..32767. Default: the definition's, else 0. */
  priority?: number | undefined;
  /** Attempts before the job is dead. Default: the definition's, else 10. */
  maxAttempts?: number | undefined;
  /** Run no earlier than this time (compared with the database clock). */
  runAt?: Date | undefined;
  /** Run no earlier than this long from now (database clock), e.g. "10s". Not with runAt. */
  delay?: Duration | undefined;
  /** At most one job per (queue, idempotencyKey): a repeat returns the existing job. */
  idempotencyKey?: string | undefined;
  /** Small string metadata carried to the handler (`ctx.job.headers`), e.g. a trace context. At most 32 entries. */
  headers?: Record<string, string> | undefined;
  /**
   * A tenant or customer key: per-key concurrency and rate limits and key
   * pauses (see docs/flow-control.md) apply to jobs sharing it within a queue.
   * 1-256 characters, no control characters. Default: none (only queue-wide limits apply).
   */
  concurrencyKey?: string | undefined;
  /**
   * Workflows: the jobs this one waits for. It is created `waiting` and runs once every parent completed
   * (see onParentFailure); its handler sees their results in `ctx.parents`. Job ids, or in enqueueMany
   * `{ item: i }` for the i-th job of the same call. An unknown parent or a cycle is a ValidationError and
   * nothing is written. Default: none.
   */
  dependsOn?: readonly ParentRef[] | undefined;
  /**
   * Workflows: when a parent dies or is cancelled — "cancel" this job (and its own dependents, the reason
   * naming the parent), "run" it anyway (ctx.parents shows the failure), or "wait" until the parent is
   * retried by hand and completes. Only with dependsOn. Default "cancel".
   */
  onParentFailure?: ParentFailurePolicy | undefined;
  /**
   * A uniqueness window (docs/jobs.md): at most one job per `key` (in this queue) per `period`; an enqueue
   * while a job holds the key returns that job with `created: false`. `key` defaults to a hash of kind,
   * queue and payload. `states`: "all" (default) counts the holder whatever its state; "live" only while it
   * is pending or running, so a new job may start as soon as it finished. Not with `idempotencyKey` or
   * `debounce`; not in `enqueueMany`.
   */
  unique?: { key?: string; period: Duration; states?: "all" | "live" } | undefined;
  /**
   * Debounce (docs/jobs.md): while a job with `key` (in this queue) is still pending, an enqueue replaces
   * its payload and options and moves it to run `delay` from now (`created: false`); once it is running, an
   * enqueue starts a new pending job. `key` defaults to the kind. Not with `runAt`, `delay`,
   * `idempotencyKey` or `unique`; not in `enqueueMany`.
   */
  debounce?: { key?: string; delay: Duration } | undefined;
}

export interface EnqueueResult {
  /** The job's id (a bigint, as a string). */
  id: string;
  /**
   * False when an existing job was returned instead: one with the same idempotency key, or the holder of a
   * uniqueness window, or the debounced job this call updated.
   */
  created: boolean;
}

export type JobRef<P> = JobDefinition<P> | string;

export interface BulkItem<P = unknown> extends EnqueueOptions {
  job: JobRef<P>;
  payload: P;
}

/**
 * Bulk items checked one by one: `enqueueMany`, `enqueueManyTx`, `batch` and `ctx.spawn` take
 * `T & CheckedItems<T>`, so each item's payload must match its own job's definition (a string kind
 * takes any payload). TypeScript infers `T` from the array literal; nothing changes at run time.
 */
export type CheckedItems<T extends ReadonlyArray<BulkItem>> = {
  readonly [K in keyof T]: CheckedItem<T[K]>;
};

/** One bulk item, its payload checked against its job's definition (see CheckedItems). */
export type CheckedItem<I> = I extends { job: infer J }
  ? { [K in keyof I]: K extends "payload" ? PayloadOf<J> : I[K] }
  : I;
