/**
 * Enqueue middleware (`skipq.useEnqueue`, docs/jobs.md "Middleware"): runs
 * around every enqueue — single, bulk and transactional — before the call is
 * validated, so it may change the payload or options (add a header, a tenant
 * key) and the result is checked like any call. In a bulk enqueue each item
 * has its own chain; the items are inserted together, all or nothing, once
 * every chain has reached its `next()`.
 *
 * Invariants: with no middleware the insert runs as it always did; every
 * chain of a bulk enqueue must call `next()` (a chain that returns without it
 * fails the whole batch before anything is inserted).
 */

import { ValidationError } from "../core/errors.js";
import { type Middleware, runChain } from "../core/middleware.js";
import type { BulkItem, EnqueueOptions, EnqueueResult, JobRef } from "./options.js";

/** One enqueue as middleware sees it: change `payload` or `options` (or `job`) before calling `next()`. */
export interface EnqueueCall {
  /** The job's kind (from `job`). */
  readonly kind: string;
  job: JobRef<unknown>;
  payload: unknown;
  options: EnqueueOptions;
  /** Which call this is. */
  readonly via: "enqueue" | "enqueueTx" | "enqueueMany" | "enqueueManyTx";
}

/**
 * `next()` resolves with the job's `{ id, created }` once inserted (with the batch, in a bulk enqueue), or
 * undefined in `enqueueMany(items, { returning: false })`, which returns no ids.
 */
export type EnqueueMiddleware = Middleware<EnqueueCall, EnqueueResult | undefined>;

function call(job: JobRef<unknown>, payload: unknown, options: EnqueueOptions, via: EnqueueCall["via"]): EnqueueCall {
  const kind = typeof job === "string" ? job : String((job as { kind?: unknown } | null)?.kind);
  return { kind, job, payload, options: { ...options }, via };
}

export class EnqueueInterceptor {
  readonly middleware: EnqueueMiddleware[] = [];

  /** One enqueue: `insert` gets the call as the middleware left it. */
  async one(
    job: JobRef<unknown>,
    payload: unknown,
    options: EnqueueOptions,
    via: "enqueue" | "enqueueTx",
    insert: (job: JobRef<unknown>, payload: unknown, options: EnqueueOptions) => Promise<EnqueueResult>,
  ): Promise<EnqueueResult> {
    if (this.middleware.length === 0) return insert(job, payload, options);
    const c = call(job, payload, options, via);
    const result = await runChain(this.middleware, c, () => insert(c.job, c.payload, c.options));
    if (result === undefined || result === null || typeof result.id !== "string")
      throw new ValidationError("an enqueue middleware resolved without a result: return what next() resolves with");
    return result;
  }

  /**
   * A bulk enqueue: each item's chain runs up to its `next()`; then `insert` gets every item as changed and
   * returns per-item results in input order (or none: the COPY path), which the chains resolve with.
   */
  async many<T>(
    items: ReadonlyArray<BulkItem>,
    via: "enqueueMany" | "enqueueManyTx",
    insert: (items: ReadonlyArray<BulkItem>) => Promise<T>,
    perItem: (out: T, i: number) => EnqueueResult | undefined,
  ): Promise<T> {
    if (this.middleware.length === 0 || !Array.isArray(items) || items.length === 0) return insert(items);
    const calls = items.map((item) => {
      const { job, payload, ...options } = item;
      return call(job, payload, options, via);
    });
    let arrived = 0;
    let allArrived!: () => void;
    const ready = new Promise<void>((resolve) => {
      allArrived = resolve;
    });
    let settle!: (outcome: { out: T } | { error: unknown }) => void;
    const inserted = new Promise<{ out: T } | { error: unknown }>((resolve) => {
      settle = resolve;
    });
    const chains = calls.map((c, i) =>
      runChain(this.middleware, c, async () => {
        if (++arrived === calls.length) allArrived();
        const outcome = await inserted;
        if ("error" in outcome) throw outcome.error;
        return perItem(outcome.out, i);
      }),
    );
    // A chain that ends before every chain reached next() (it threw, or returned without next) stops the batch.
    const early = Promise.race(
      chains.map((chain) =>
        chain.then(
          () => {
            throw new ValidationError(
              `every enqueue middleware must call next() in ${via}: the batch is all or nothing`,
            );
          },
          (error: unknown) => {
            throw error;
          },
        ),
      ),
    );
    early.catch(() => undefined);
    try {
      await Promise.race([ready, early]);
    } catch (error) {
      settle({ error });
      await Promise.allSettled(chains);
      throw error;
    }
    try {
      const out = await insert(calls.map((c) => ({ ...c.options, job: c.job, payload: c.payload })));
      settle({ out });
      await Promise.all(chains);
      return out;
    } catch (error) {
      settle({ error });
      await Promise.allSettled(chains);
      throw error;
    }
  }
}
