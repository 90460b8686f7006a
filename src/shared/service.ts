/**
 * The shape of every background loop (reaper, retention, presence, the
 * claimer's refresh, cron, the saga sweeper, the maintainer's leader lease,
 * the outbox relay, the dashboard's live hub; not the worker's heartbeat,
 * whose passes must overlap: worker/leases.ts):
 * `start()` (idempotent), `stop()` (safe before start and twice; waits for a
 * pass in progress), `runOnce()` (one pass, what tests call), a jittered
 * interval between passes, and capped exponential backoff after a failed pass.
 *
 * Invariants: passes never overlap (runOnce during a pass joins it); a failing
 * pass is logged at the first failure and every 20th after, and the first pass
 * that succeeds again logs one recovery line (failureLog.ts), never thrown into
 * the process; after stop() resolves no pass is running and none will start.
 */
import { retryWaitMs } from "../core/backoff.js";
import type { Logger } from "../core/logger.js";
import { FailureLog } from "./failureLog.js";

export interface ServiceOptions<R> {
  /** Names the loop in logs ("reaper", "retention", …). */
  name: string;
  /** Time between passes, ms (jittered by ±10 %). */
  intervalMs: number;
  /** One pass. */
  run: () => Promise<R>;
  logger: Logger;
  /** The wait after a successful pass; default the interval. Return 0 to go again at once. */
  next?: (result: R) => number;
  /** When the first pass runs: at once (default), or after a random part of the interval (spreads a fleet's passes). */
  firstPass?: "now" | "spread";
  /** Longest wait after failed passes, ms. Default 60 s (or the interval, if longer). */
  maxBackoffMs?: number;
  /**
   * The wait after the `failures`-th failed pass in a row (1-based), ms. Default: capped exponential
   * backoff from the interval up to `maxBackoffMs`, jittered (`retryWaitMs`).
   */
  retryWait?: (failures: number) => number;
  /**
   * Whether the wait for the next pass keeps the process alive. Default false: a side loop (reaper, presence)
   * never holds a process open; true for a loop that is the process's work (the outbox relay).
   */
  keepAlive?: boolean;
  /** Called after each failed background pass (not a `runOnce()` call's, which throws to its caller). */
  onFailed?: (error: unknown) => void;
}

export class Service<R = unknown> {
  private running = false;
  private timer: NodeJS.Timeout | undefined;
  private pass: Promise<R> | undefined;
  private readonly failures: FailureLog;

  constructor(private readonly o: ServiceOptions<R>) {
    this.failures = new FailureLog(o.logger, `skipq: ${o.name} pass`);
  }

  /** True between start() and stop(). */
  get started(): boolean {
    return this.running;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(this.o.firstPass === "spread" ? Math.random() * this.o.intervalMs : 0);
  }

  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.pass?.catch(() => undefined);
  }

  /** One pass now (joining one in progress). Throws what the pass throws. */
  runOnce(): Promise<R> {
    this.pass ??= this.o.run().finally(() => {
      this.pass = undefined;
    });
    return this.pass;
  }

  /** Runs the next pass now instead of at its time (e.g. on a notification). */
  wake(): void {
    if (!this.running || this.pass) return;
    this.schedule(0);
  }

  private schedule(ms: number): void {
    clearTimeout(this.timer);
    if (!this.running) return;
    this.timer = setTimeout(() => void this.tick(), ms);
    if (!this.o.keepAlive) this.timer.unref();
  }

  private async tick(): Promise<void> {
    let wait: number;
    try {
      const result = await this.runOnce();
      this.failures.succeeded();
      wait = this.o.next ? this.o.next(result) : jitter(this.o.intervalMs);
    } catch (error) {
      this.failures.failed(error);
      this.o.onFailed?.(error);
      const n = this.failures.failures;
      if (this.o.retryWait) wait = this.o.retryWait(n);
      else wait = retryWaitMs(n, this.o.intervalMs, Math.max(this.o.maxBackoffMs ?? 60_000, this.o.intervalMs));
    }
    this.schedule(wait);
  }
}

/** `ms` ± 10 %. */
function jitter(ms: number): number {
  return ms * (0.9 + Math.random() * 0.2);
}

/**
 * A task that is one Service (the reaper, the rollup): `start`, `stop` and `runOnce` are the service's,
 * with the first pass spread over the interval; a subclass writes `pass`.
 */
export abstract class ServiceTask<R> {
  private readonly service: Service<R>;

  constructor(name: string, o: { intervalMs: number; logger: Logger }) {
    this.service = new Service({
      name,
      intervalMs: o.intervalMs,
      run: () => this.pass(),
      logger: o.logger,
      firstPass: "spread",
    });
  }

  /** Starts periodic passes. Idempotent. */
  start(): void {
    this.service.start();
  }

  /** Stops passes and waits for one in progress. Safe before start and twice. */
  stop(): Promise<void> {
    return this.service.stop();
  }

  /** One pass now (joins a pass in progress). */
  runOnce(): Promise<R> {
    return this.service.runOnce();
  }

  protected abstract pass(): Promise<R>;
}
