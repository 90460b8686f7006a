/**
 * Retry backoff: capped exponential with jitter. Pure and finite for any
 * attempt number (2 ** 10_000 is Infinity; the exponent is clamped first).
 * The delay is computed here; the retry's run_at is `now() + delay` in the
 * database, so a worker's clock never matters.
 */

export interface BackoffOptions {
  /** Delay after the first failure, in ms. Default 1000. */
  baseMs: number;
  /** Largest delay, in ms. Default 3_600_000 (1 hour). */
  maxMs: number;
  /** Jitter as a fraction of the delay: the delay is scaled by a factor in [1 - jitter, 1 + jitter]. Default 0.2. */
  jitter: number;
}

export const defaultBackoff: BackoffOptions = { baseMs: 1000, maxMs: 3_600_000, jitter: 0.2 };

/** The un-jittered delay after failed attempt `attempt` (1-based): monotone non-decreasing and capped. */
export function backoffBaseMs(attempt: number, options: BackoffOptions = defaultBackoff): number {
  const exponent = Math.min(Math.max(attempt - 1, 0), 52);
  return Math.min(options.maxMs, options.baseMs * 2 ** exponent);
}

/**
 * The wait before retry number `failures` (1-based) of a loop whose pass failed — a claim, a reconnect, an
 * outcome flush, a background pass: `firstMs` doubled per failure, at most `maxMs`, and scaled by a factor in
 * [0.5, 1) unless `jitter` is false, so processes that failed together do not all retry together. Every such
 * loop waits through this one formula (job retries use `backoffMs`).
 */
export function retryWaitMs(failures: number, firstMs: number, maxMs: number, jitter = true): number {
  const wait = Math.min(maxMs, firstMs * 2 ** Math.min(Math.max(failures - 1, 0), 30));
  return jitter ? wait * (0.5 + Math.random() / 2) : wait;
}

/** The delay to wait before the next attempt; `random` is injectable for tests. */
export function backoffMs(
  attempt: number,
  options: BackoffOptions = defaultBackoff,
  random: () => number = Math.random,
): number {
  const base = backoffBaseMs(attempt, options);
  const factor = 1 - options.jitter + 2 * options.jitter * random();
  return Math.round(Math.min(options.maxMs * (1 + options.jitter), base * factor));
}
