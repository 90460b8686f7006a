/**
 * Handlers: what a worker runs — one handler per job kind (`register`), batch
 * handlers with their size and wait (`registerBatch`), and the middleware
 * around every handler (`use`). Registration is validated here, at the edge;
 * the executor and the slots only look kinds up.
 */
import { SkipqError } from "../core/errors.js";
import type { JobDefinition } from "../core/job.js";
import { assertMiddleware } from "../core/middleware.js";
import { assertInt, assertName } from "../core/validate.js";
import type { BatchEntry } from "./batch.js";
import type { BatchHandler, BatchHandlerOptions, Handler, WorkerMiddleware } from "./types.js";

/** A kind's registration. */
export interface Registered {
  definition?: JobDefinition<unknown>;
  handler: Handler<never>;
  /** Set for a kind registered with registerBatch: its jobs run in batches (batch.ts), never one by one. */
  batch?: BatchEntry;
}

export class Handlers {
  private readonly byKind = new Map<string, Registered>();
  /** worker.use(): around every handler, first registered outermost. */
  readonly middleware: WorkerMiddleware[] = [];
  /** The largest size given to registerBatch (1 when none): a slot may hold that many leases. */
  largestBatch = 1;

  /** `maxWaitMs`: the longest `waitMs` a batch kind may hold a partial batch (half the lease). */
  constructor(private readonly maxWaitMs: number) {}

  get(kind: string): Registered | undefined {
    return this.byKind.get(kind);
  }

  /** The batch settings of a kind registered with registerBatch; undefined for any other kind. */
  batchOf(kind: string): BatchEntry | undefined {
    return this.byKind.get(kind)?.batch;
  }

  /** Kinds with a handler. */
  get kinds(): string[] {
    return [...this.byKind.keys()];
  }

  register(job: JobDefinition<unknown> | string, handler: unknown): void {
    const definition = typeof job === "string" ? undefined : job;
    const kind = assertName("kind", typeof job === "string" ? job : definition?.kind);
    if (typeof handler !== "function")
      throw new SkipqError("SKIPQ_INVALID_ARGUMENT", `handler for "${kind}" must be a function`);
    this.set(kind, definition, { handler: handler as Handler<never> });
  }

  registerBatch(job: JobDefinition<unknown> | string, options: BatchHandlerOptions, handler: unknown): void {
    const definition = typeof job === "string" ? undefined : job;
    const kind = assertName("kind", typeof job === "string" ? job : definition?.kind);
    if (typeof options !== "object" || options === null)
      throw new SkipqError(
        "SKIPQ_INVALID_ARGUMENT",
        `registerBatch("${kind}") needs options: { size } (jobs per call, 1 to 1000), and optionally waitMs`,
      );
    const size = assertInt("size", options.size, 1, 1000);
    const waitMs = assertInt("waitMs", options.waitMs ?? 0, 0, this.maxWaitMs);
    if (typeof handler !== "function")
      throw new SkipqError("SKIPQ_INVALID_ARGUMENT", `batch handler for "${kind}" must be a function`);
    const single: Handler<never> = () => {
      throw new SkipqError("SKIPQ_INVALID_ARGUMENT", `"${kind}" is registered as a batch kind`);
    };
    this.set(kind, definition, { handler: single, batch: { size, waitMs, handler: handler as BatchHandler<never> } });
  }

  use(middleware: WorkerMiddleware): void {
    assertMiddleware("worker.use", middleware);
    this.middleware.push(middleware);
  }

  private set(kind: string, definition: JobDefinition<unknown> | undefined, entry: Registered): void {
    this.byKind.set(kind, definition ? { definition, ...entry } : entry);
    this.largestBatch = Math.max(1, ...[...this.byKind.values()].map((r) => r.batch?.size ?? 1));
  }
}
