/**
 * The executor: runs one job's handler — its context (signal, heartbeat,
 * logger, pauseKey), payload validation, the per-job timeout — and turns how
 * it ended into an outcome for the completer.
 *
 * Invariants: a handler's error, rejection or non-Error throw never escapes
 * into the process (nor does a rejection after a timeout stopped the wait);
 * a job whose lease was lost or that was released at shutdown is never
 * recorded (`detached`), nor is one whose ctx.completeTx committed; the job
 * leaves `held` before its outcome is queued. Kinds registered with
 * registerBatch run through batch.ts instead, one call per batch.
 */

import {
  CancelJob,
  FailPermanently,
  PayloadInvalidError,
  RetryIn,
  SkipqError,
  UnknownKindError,
} from "../core/errors.js";
import { validatePayload } from "../core/job.js";
import { childLogger, type Logger } from "../core/logger.js";
import { runChain } from "../core/middleware.js";
import type { ErrorRedactor } from "../core/secrets.js";
import { type Duration, encodeProgress, encodeResult } from "../core/validate.js";
import type { InsertRow } from "../db/jobStore.js";
import type { BulkItem } from "../enqueue/enqueuer.js";
import { endExecuteSpan, inSpan, startExecuteSpan } from "../shared/telemetry.js";
import { attemptLogger } from "./attemptLog.js";
import { type BatchEntry, executeBatch } from "./batch.js";
import { ClaimedJob } from "./claimedJob.js";
import type { Completer } from "./completer.js";
import { type CompleteTxParts, completeInTx, settleCompletedTx } from "./completeTx.js";
import type { Handlers, Registered } from "./handlers.js";
import type { HeldJobs } from "./heldJobs.js";
import type { Leases } from "./leases.js";
import type { Handler, Job, JobContext, Outcome, ParentOutcome, Running, WorkerHooks } from "./types.js";

export interface ExecutorOptions {
  /** Kinds, their handlers, and middleware. */
  handlers: Handlers;
  /** Every job this worker holds: a job leaves it when its handler ends (finish). */
  held: HeldJobs;
  logger: Logger;
  jobTimeoutMs: number | undefined;
  /** ctx.log lines kept per attempt (0: none). */
  attemptLogLines: number;
  /** Applied to every string of a kept ctx.log line. */
  redactError: ErrorRedactor;
  /** Largest result a handler may return, encoded, in bytes. */
  maxResultBytes: number;
  hooks: WorkerHooks | undefined;
  /** Heartbeats (one job's, a batch's in one statement) and ctx.progress's coalesced writes. */
  leases: Pick<Leases, "heartbeatOne" | "heartbeatSome" | "noteProgress" | "settleProgress">;
  /** Where a handler's outcome goes: batched, fenced by the job's lease. */
  completer: Pick<Completer, "record">;
  /** ctx.completeTx: the completion written in the caller's transaction (completeTx.ts). */
  completeTx: CompleteTxParts;
  /** ctx.progress() was called with this value (the worker's "progress" event). */
  onProgress: (job: Job, value: unknown) => void;
  pauseKey: (job: Job, until: Date | Duration, key: string | null | undefined) => Promise<Date>;
  /** Workflows: a job's parents (ctx.parents). */
  parents: (job: Job) => Promise<Record<string, ParentOutcome>>;
  /** Workflows: validates ctx.spawn's children into rows. */
  prepareSpawn: (children: ReadonlyArray<BulkItem>, then: BulkItem | undefined) => Promise<InsertRow[]>;
  onStart: (job: Job) => void;
  /** `perJobMs`: the handler time per job (a batch's duration over its size), for the prefetch target. */
  onEnd: (job: Job, outcome: Outcome, durationMs: number, error: unknown, perJobMs?: number) => void;
}

export class Executor {
  /** Kinds without a handler this worker has said so about (once each: it meets them every 30 s). */
  private readonly unknownKinds = new Set<string>();

  constructor(private readonly o: ExecutorOptions) {}

  /** The error a job of an unregistered kind ends with (handed back, no attempt used), logged once per kind. */
  private unknownKind(kind: string): UnknownKindError {
    const error = new UnknownKindError(kind, this.o.handlers.kinds);
    if (!this.unknownKinds.has(kind)) {
      this.unknownKinds.add(kind);
      this.o.logger.warn(
        { kind },
        `skipq: ${error.message}: register it in this worker, or give its jobs a queue of their own (docs/jobs.md, "Kinds a worker has no handler for")`,
      );
    }
    return error;
  }

  /** Runs jobs of one batch kind in one handler call (batch.ts). */
  executeBatch(members: readonly Running[]): Promise<void> {
    const entry = this.o.handlers.get((members[0] as Running).job.kind) as Registered;
    return executeBatch(this.o, entry, entry.batch as BatchEntry, members);
  }

  async execute(running: Running): Promise<void> {
    const { job, controller } = running;
    running.startedAt = performance.now();
    this.o.onStart(job);
    let outcome: Outcome = "completed";
    let failure: unknown;
    /** The handler's return value as JSON text, when it returned something. */
    let result: string | undefined;
    let timer: NodeJS.Timeout | undefined;
    const span = startExecuteSpan(job, running.trace);
    try {
      const entry = this.o.handlers.get(job.kind);
      if (!entry) throw this.unknownKind(job.kind);
      const payload = await this.payloadFor(entry, job);
      const parents = job instanceof ClaimedJob && job.parentPolicy !== null ? await this.o.parents(job) : NO_PARENTS;
      const ctx = this.context(running, payload, parents);
      const handler = entry.handler as Handler;
      const invoke = () => Promise.resolve().then(() => handler(payload, ctx));
      // With middleware the result is still the handler's own value, whatever the chain resolves with.
      let handlerValue: unknown;
      const middleware = this.o.handlers.middleware;
      const handled = inSpan(span, () =>
        middleware.length === 0
          ? invoke()
          : runChain(middleware, ctx, () =>
              invoke().then((v) => {
                handlerValue = v;
                return v;
              }),
            ),
      );
      // A handler that rejects after we stopped waiting must never become an unhandled rejection.
      handled.catch(() => undefined);
      const limit = this.o.jobTimeoutMs;
      let value: unknown;
      if (limit === undefined) {
        value = await handled;
      } else {
        value = await Promise.race([
          handled,
          new Promise((_, reject) => {
            timer = setTimeout(() => {
              const error = new SkipqError("SKIPQ_JOB_TIMEOUT", `job ran longer than jobTimeout (${limit} ms)`);
              controller.abort(error);
              reject(error);
            }, limit);
          }),
        ]);
      }
      if (middleware.length > 0) value = handlerValue;
      // A result that cannot be stored fails this attempt like a thrown error (ResultTooLarge/NotJson).
      if (value !== undefined) result = encodeResult(value, this.o.maxResultBytes);
    } catch (error) {
      failure = error;
      outcome = classify(error, controller);
      // The failure that uses the last attempt buries the job (jobSettleMany's rule): say so in jobEnd,
      // the span and the attempt's log, not "retry".
      if (outcome === "retry" && job.attempt >= job.maxAttempts) outcome = "dead";
    } finally {
      clearTimeout(timer);
    }
    try {
      await this.o.hooks?.afterHandlerBeforeOutcome?.(job);
    } catch (error) {
      this.o.logger.warn({ err: error }, "skipq: afterHandlerBeforeOutcome hook failed");
    }
    // ctx.completeTx: a committed completion is the attempt's outcome; after a rollback the handler's counts.
    const completedTx = running.completedTx && !running.detached ? await this.completedTx(running) : undefined;
    if (completedTx !== undefined) {
      outcome = completedTx === "committed" ? "completed" : "lease-lost";
      if (completedTx === "committed") failure = undefined;
    } else if (running.progressDirty) await this.o.leases.settleProgress(running);
    const ended = this.o.held.finish(running);
    if (completedTx !== undefined) {
      // Nothing to record: the caller committed the completion, or the job is no longer this attempt's.
    } else if (ended !== "record") {
      outcome = ended;
    } else {
      this.o.completer.record(running, outcome, failure, outcome === "completed" ? result : undefined);
    }
    endExecuteSpan(span, outcome, failure);
    this.o.onEnd(job, outcome, performance.now() - running.startedAt, failure);
  }

  /**
   * How a completeTx caller's transaction ended; undefined when it rolled back (record the handler's outcome).
   * A failed read also records the handler's outcome: fenced by the lease, it changes nothing after a commit.
   */
  private async completedTx(running: Running): Promise<"committed" | "lost" | undefined> {
    try {
      const ended = await settleCompletedTx(this.o.completeTx, running);
      return ended === "rolled-back" ? undefined : ended;
    } catch (error) {
      running.completedTx = undefined;
      this.o.logger.warn(
        { err: error, job: running.job.id },
        "skipq: could not read how ctx.completeTx's transaction ended; recording the handler's outcome (fenced by the lease)",
      );
      return undefined;
    }
  }

  private async payloadFor(entry: Registered, job: Job): Promise<unknown> {
    if (!entry.definition?.schema) return job.payload;
    try {
      return await validatePayload(entry.definition, job.payload);
    } catch (error) {
      // A payload its own schema rejects will never pass: dead at once, no retry storm.
      throw error instanceof PayloadInvalidError ? new FailPermanently(error.message, { cause: error }) : error;
    }
  }

  private context(running: Running, payload: unknown, parents: Record<string, ParentOutcome>): JobContext {
    const { job, controller } = running;
    const logger = this.o.logger;
    const maxLines = this.o.attemptLogLines;
    const redact = this.o.redactError;
    let log: Logger | undefined;
    // A payload its schema transformed replaces the claimed one on the job itself (no copy per job).
    if (payload !== job.payload) job.payload = payload;
    return {
      job,
      id: job.id,
      attempt: job.attempt,
      // Made on first use: most handlers read neither.
      get signal() {
        return controller.signal;
      },
      heartbeat: () => this.o.leases.heartbeatOne(running),
      pauseKey: (until, key) => this.o.pauseKey(job, until, key),
      progress: async (value) => {
        this.o.leases.noteProgress(running, encodeProgress(value));
        this.o.onProgress(job, value);
      },
      parents,
      spawn: async (children, options) => {
        const rows = await this.o.prepareSpawn(children, options?.then);
        running.spawns = [...(running.spawns ?? []), rows];
      },
      completeTx: (client, value) => completeInTx(this.o.completeTx, running, client, value),
      get log() {
        if (log) return log;
        if (maxLines === 0) {
          log = childLogger(logger, { jobId: job.id, kind: job.kind, attempt: job.attempt });
          return log;
        }
        // The attempt started when its handler did (running.startedAt is on the performance clock).
        const startedAt = new Date(Date.now() - (performance.now() - running.startedAt)).toISOString();
        running.attemptLines = { startedAt, lines: [], dropped: 0 };
        log = attemptLogger(logger, job, running.attemptLines, maxLines, redact);
        return log;
      },
    };
  }
}

const NO_PARENTS: Record<string, ParentOutcome> = Object.freeze({}) as Record<string, ParentOutcome>;

function classify(error: unknown, signal: { aborted: boolean; reason: unknown }): Outcome {
  if (error instanceof RetryIn || error instanceof UnknownKindError) return "snoozed";
  if (error instanceof FailPermanently) return "dead";
  if (error instanceof CancelJob) return "cancelled";
  if (signal.aborted && signal.reason instanceof SkipqError && signal.reason.code === "SKIPQ_SHUTDOWN")
    return "released";
  return "retry";
}
