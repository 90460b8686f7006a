/**
 * Batch handlers (worker.registerBatch): runs one handler call for up to
 * `size` claimed jobs of one kind, with one context, one abort signal and one
 * timeout for the whole batch, and turns how it ended into one outcome per job
 * for the completer (queued in one tick, so written by one flush).
 *
 * Invariants: a job whose lease was lost, that was cancelled, or that was
 * released at shutdown is never recorded (`detached`); a per-item outcome
 * (`jobs[i].fail/retry`, an Error in the returned array) wins over the batch's;
 * an abort caused by one job (cancel, lost lease) never costs the others an
 * attempt; every job leaves `held` before its outcome is queued; a handler's
 * throw or late rejection never escapes into the process.
 */
import { CancelJob, FailPermanently, PayloadInvalidError, RetryIn, SkipqError } from "../core/errors.js";
import { type JobDefinition, validatePayload } from "../core/job.js";
import { childLogger, type Logger } from "../core/logger.js";
import { type Duration, encodeResult, toMs } from "../core/validate.js";
import { LazyAbortController } from "../shared/lazyAbort.js";
import type { ClaimedJob } from "./claimedJob.js";
import type { Completer } from "./completer.js";
import type { HeldJobs } from "./heldJobs.js";
import type { Leases } from "./leases.js";
import type { BatchContext, BatchHandler, BatchJob, Job, Outcome, Running, WorkerHooks } from "./types.js";

/** What a batch needs of the executor's options (executor.ts passes its own, which have these and more). */
export interface BatchRunOptions {
  /** Every job this worker holds: each member leaves it when the batch ends (finish). */
  held: HeldJobs;
  logger: Logger;
  jobTimeoutMs: number | undefined;
  maxResultBytes: number;
  hooks: WorkerHooks | undefined;
  /** A batch's ctx.heartbeat(): one statement for its jobs; false when every one is lost. */
  leases: Pick<Leases, "heartbeatSome">;
  completer: Pick<Completer, "record">;
  onStart: (job: Job) => void;
  onEnd: (job: Job, outcome: Outcome, durationMs: number, error: unknown, perJobMs?: number) => void;
}

/** What a kind registered with registerBatch carries. */
export interface BatchEntry {
  size: number;
  waitMs: number;
  handler: BatchHandler<never>;
}

/** The job as a batch handler sees it: the claimed job's fields, and its own outcome (set by fail/retry). */
class BatchItem implements BatchJob {
  /** The payload the handler sees (replaced by its definition's validated value). */
  payload: unknown;
  /** The error this job alone fails with (fail, retry); undefined: the batch's outcome. */
  own: { error: unknown } | undefined;
  /** Set once the handler ended: later fail/retry calls would change nothing, so they throw. */
  ended = false;

  constructor(private readonly job: Job) {
    this.payload = job.payload;
  }

  get id(): string {
    return this.job.id;
  }
  get queue(): string {
    return this.job.queue;
  }
  get kind(): string {
    return this.job.kind;
  }
  get priority(): number {
    return this.job.priority;
  }
  get attempt(): number {
    return this.job.attempt;
  }
  get maxAttempts(): number {
    return this.job.maxAttempts;
  }
  get headers(): Record<string, string> {
    return this.job.headers;
  }
  get lease(): string {
    return this.job.lease;
  }
  get concurrencyKey(): string | null {
    return this.job.concurrencyKey;
  }

  get runAt(): Date {
    return this.job.runAt;
  }

  get createdAt(): Date {
    return this.job.createdAt;
  }

  fail(error: unknown): void {
    this.assertLive("fail");
    this.own = { error };
  }

  retry(delay: Duration): void {
    this.assertLive("retry");
    this.own = { error: new RetryIn(toMs("retry delay", delay), "batch handler asked to retry this job later") };
  }

  private assertLive(call: string): void {
    if (this.ended)
      throw new SkipqError(
        "SKIPQ_INVALID_ARGUMENT",
        `jobs[i].${call}() for job ${this.id} came after its batch handler returned: call it before returning`,
      );
  }

  toJSON(): Job {
    return (this.job as ClaimedJob).toJSON?.() ?? this.job;
  }
}

/** Runs one batch of `members` (all of one kind) through its handler and records each job's outcome. */
export async function executeBatch(
  o: BatchRunOptions,
  entry: { definition?: JobDefinition<unknown> },
  batch: BatchEntry,
  members: readonly Running[],
): Promise<void> {
  // One abort for the whole batch: the leases, the drain and the timeout abort it through any member.
  const controller = new LazyAbortController();
  const startedAt = performance.now();
  for (const running of members) {
    running.controller = controller;
    running.startedAt = startedAt;
    o.onStart(running.job);
  }
  const kind = (members[0] as Running).job.kind;
  const items = members.map((running) => new BatchItem(running.job));
  // A payload its own schema rejects will never pass: that job is dead at once and left out of the call.
  const invalid = new Map<number, unknown>();
  if (entry.definition?.schema) {
    for (const [i, item] of items.entries()) {
      try {
        item.payload = await validatePayload(entry.definition, item.payload);
      } catch (error) {
        invalid.set(
          i,
          error instanceof PayloadInvalidError ? new FailPermanently(error.message, { cause: error }) : error,
        );
      }
    }
  }
  const called = invalid.size === 0 ? items : items.filter((_, i) => !invalid.has(i));
  const ctx: BatchContext = {
    jobs: called,
    get signal() {
      return controller.signal;
    },
    heartbeat: () => o.leases.heartbeatSome(members),
    log: childLogger(o.logger, { kind, batch: called.length }),
  };
  let value: unknown;
  let thrown: { error: unknown } | undefined;
  let timer: NodeJS.Timeout | undefined;
  try {
    if (called.length > 0) {
      const handler = batch.handler as BatchHandler;
      const handled = Promise.resolve().then(() => handler(called, ctx));
      // A handler that rejects after we stopped waiting must never become an unhandled rejection.
      handled.catch(() => undefined);
      const limit = o.jobTimeoutMs;
      value =
        limit === undefined
          ? await handled
          : await Promise.race([
              handled,
              new Promise((_, reject) => {
                timer = setTimeout(() => {
                  const error = new SkipqError("SKIPQ_JOB_TIMEOUT", `batch ran longer than jobTimeout (${limit} ms)`);
                  controller.abort(error);
                  reject(error);
                }, limit);
              }),
            ]);
    }
  } catch (error) {
    thrown = { error };
  } finally {
    clearTimeout(timer);
    for (const item of items) item.ended = true;
  }
  const results = thrown ? undefined : batchResults(kind, value, called.length);
  if (results instanceof SkipqError) thrown = { error: results };
  const durationMs = performance.now() - startedAt;
  let calledIndex = 0;
  for (const [i, running] of members.entries()) {
    const item = items[i] as BatchItem;
    let outcome: Outcome = "completed";
    let failure: unknown;
    let result: string | undefined;
    const rejected = invalid.get(i);
    const own = rejected !== undefined ? { error: rejected } : item.own;
    const returned = rejected !== undefined ? undefined : (results as unknown[] | undefined)?.[calledIndex++];
    if (own) failure = own.error;
    else if (thrown) failure = thrown.error;
    else if (returned instanceof Error) failure = returned;
    else if (returned !== undefined) {
      try {
        result = encodeResult(returned, o.maxResultBytes);
      } catch (error) {
        // A result that cannot be stored fails this job's attempt like a thrown error.
        failure = error;
      }
    }
    if (failure !== undefined || own || thrown) {
      outcome = classify(failure, controller, own !== undefined);
      if (outcome === "retry" && running.job.attempt >= running.job.maxAttempts) outcome = "dead";
    }
    const hook = o.hooks?.afterHandlerBeforeOutcome;
    if (hook) {
      try {
        await hook(running.job);
      } catch (error) {
        o.logger.warn({ err: error }, "skipq: afterHandlerBeforeOutcome hook failed");
      }
    }
    const ended = o.held.finish(running);
    if (ended !== "record") {
      // Its own loss, whatever the batch's shared signal says (another member's cancel, a shutdown).
      outcome = ended;
    } else {
      o.completer.record(running, outcome, failure, outcome === "completed" ? result : undefined);
    }
    o.onEnd(running.job, outcome, durationMs, failure, durationMs / members.length);
  }
}

/**
 * The handler's return value as one entry per called job; undefined when it returned nothing; a SkipqError
 * (failing every job) when it returned anything else, or an array of the wrong length.
 */
function batchResults(kind: string, value: unknown, count: number): unknown[] | undefined | SkipqError {
  if (value === undefined) return undefined;
  if (!Array.isArray(value))
    return new SkipqError(
      "SKIPQ_INVALID_ARGUMENT",
      `the batch handler for "${kind}" returned ${typeof value}: return nothing, or an array with one result per job, in order`,
    );
  if (value.length !== count)
    return new SkipqError(
      "SKIPQ_INVALID_ARGUMENT",
      `the batch handler for "${kind}" returned ${value.length} results for ${count} jobs: return one per job, in order (undefined for none)`,
    );
  return value;
}

/**
 * A failed job's outcome. After an abort caused by a member (its cancel or lost lease) or a shutdown, a
 * throw is the abort's doing: the other jobs go back to pending unharmed (released), unless the handler
 * chose this job's outcome itself.
 */
function classify(error: unknown, signal: LazyAbortController, chosen: boolean): Outcome {
  if (error instanceof RetryIn) return "snoozed";
  if (error instanceof FailPermanently) return "dead";
  if (error instanceof CancelJob) return "cancelled";
  const code = signal.aborted && signal.reason instanceof SkipqError ? signal.reason.code : undefined;
  if (code === "SKIPQ_SHUTDOWN") return "released";
  if (!chosen && (code === "SKIPQ_CANCEL" || code === "SKIPQ_LEASE_LOST")) return "released";
  return "retry";
}
