/**
 * Middleware chains (docs/jobs.md, "Middleware"): `worker.use()` around every
 * handler, `skipq.useEnqueue()` around every enqueue. A middleware is
 * `(ctx, next) => …`: code before `await next()` runs on the way in, code
 * after it on the way out, in registration order (the first registered is the
 * outermost). Invariants: `next()` runs the rest of the chain at most once (a
 * second call rejects); a chain with no middleware is the bare call itself.
 */
import { SkipqError } from "./errors.js";

export type Middleware<C, R> = (ctx: C, next: () => Promise<R>) => R | Promise<R>;

/** Runs `last` inside `middleware`, outermost first; resolves with what the outermost one resolves with. */
export function runChain<C, R>(
  middleware: ReadonlyArray<Middleware<C, R>>,
  ctx: C,
  last: () => Promise<R>,
): Promise<R> {
  const dispatch = (i: number): Promise<R> => {
    const current = middleware[i];
    if (current === undefined) return last();
    let called = false;
    const next = (): Promise<R> => {
      if (called)
        return Promise.reject(new SkipqError("SKIPQ_INVALID_ARGUMENT", "a middleware called next() more than once"));
      called = true;
      return dispatch(i + 1);
    };
    try {
      return Promise.resolve(current(ctx, next));
    } catch (error) {
      return Promise.reject(error);
    }
  };
  return dispatch(0);
}

/** A middleware argument checked at registration: a function. */
export function assertMiddleware(what: string, middleware: unknown): void {
  if (typeof middleware !== "function")
    throw new SkipqError(
      "SKIPQ_INVALID_ARGUMENT",
      `${what} takes a function (ctx, next) => …, got ${typeof middleware}`,
    );
}
