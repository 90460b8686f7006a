/**
 * The worker's graceful stop, once the fetch loop has ended: buffered jobs
 * handed back at once, running ones given `shutdownTimeout`, then aborted,
 * then (after `abortGrace`) released without consuming their attempt, and
 * every outcome flushed. It never closes connections; the worker does that.
 */
import { SkipqError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import { delay } from "../shared/wakeup.js";
import type { Completer } from "./completer.js";
import type { Fetcher } from "./fetcher.js";
import type { HeldJobs } from "./heldJobs.js";

export interface DrainParts {
  fetcher: Fetcher;
  completer: Completer;
  held: HeldJobs;
  logger: Logger;
  shutdownMs: number;
  abortGraceMs: number;
  /** Given the function that ends the wait for running jobs at once (a second stop()). */
  onHardStop: (hardStop: () => void) => void;
}

/** Hands back, waits for, aborts and releases the worker's jobs, then flushes their outcomes. */
export async function drainJobs(p: DrainParts): Promise<void> {
  const { fetcher, completer, held, logger } = p;
  // Buffered jobs never started: hand them back at once, their attempt not consumed; one whose lease was
  // lost while it waited just leaves.
  for (const running of fetcher.slots.drainBuffer()) if (!held.handBack(running)) held.discard(running);
  const hard = new Promise<void>((resolve) => {
    p.onHardStop(resolve);
  });
  const settled = () => Promise.all([...held.values()].map((r) => r.done)).then(() => undefined);
  if (held.size > 0) {
    logger.info({ running: held.size, timeoutMs: p.shutdownMs }, "skipq: stopping; waiting for running jobs");
    await Promise.race([settled(), delay(p.shutdownMs), hard]);
  }
  if (held.size > 0) {
    const reason = new SkipqError("SKIPQ_SHUTDOWN", "the worker is shutting down");
    for (const running of held.values()) running.controller.abort(reason);
    await Promise.race([settled(), delay(p.abortGraceMs)]);
  }
  // Handlers that ignored their signal: release their jobs now; their late outcomes are fenced out.
  for (const running of [...held.values()]) held.handBack(running);
  await completer.flush();
}
