/**
 * Throttled failure logging for a loop whose passes can fail over and over
 * (a database or a sink that is down): the first failure is logged, then every
 * 20th, and the first success after failures logs one recovery line.
 *
 * Invariant: a run of N consecutive failures costs 1 + ⌊N/20⌋ warnings and,
 * when it ends in a success, one info line; it never throws and never logs a
 * success that followed no failure.
 */
import type { Logger } from "../core/logger.js";

/** A failure run logs its 1st failure and every EVERY-th after. */
const EVERY = 20;

export class FailureLog {
  private run = 0;

  /**
   * `what` names the thing that fails in both lines ("skipq: reaper pass");
   * `retry` ends the warning ("retrying with backoff").
   */
  constructor(
    private readonly logger: Logger,
    private readonly what: string,
    private readonly retry = "retrying with backoff",
  ) {}

  /** Consecutive failures so far (0 after a success). */
  get failures(): number {
    return this.run;
  }

  /**
   * Counts a failure; logs it when it is the first of its run or every 20th. `fields` go into the line
   * beside `err` and `failures`; `message` replaces the default "<what> failed; <retry>".
   */
  failed(error: unknown, fields: Record<string, unknown> = {}, message?: string): void {
    this.run++;
    if (this.run === 1 || this.run % EVERY === 0)
      this.logger.warn({ err: error, failures: this.run, ...fields }, message ?? `${this.what} failed; ${this.retry}`);
  }

  /** A success: after a run of failures, one info line saying how many there were; resets the run. */
  succeeded(): void {
    if (this.run === 0) return;
    const failures = this.run;
    this.run = 0;
    this.logger.info({ failures }, `${this.what} succeeded again after ${failures} failed`);
  }
}
