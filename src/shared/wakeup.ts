/**
 * A one-slot wake-up: `wait(ms)` resolves on the next `wake()` or after `ms`.
 * A `wake()` with nobody waiting is remembered once, so a wake-up that arrives
 * just before the wait is never lost. Used by every loop that sleeps between
 * passes (the worker's fetch loop, background services).
 */
export class Wakeup {
  private resolve: (() => void) | undefined;
  private pending = false;

  wake(): void {
    if (this.resolve) {
      const r = this.resolve;
      this.resolve = undefined;
      r();
    } else this.pending = true;
  }

  wait(ms: number): Promise<void> {
    if (this.pending) {
      this.pending = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.resolve = undefined;
        resolve();
      }, ms);
      this.resolve = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }
}

/** A promise that resolves after `ms` without keeping the process alive. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/** Capped exponential backoff with ±50 % jitter: the wait before retry number `failures` (from 1). */
export function backoffWait(failures: number, baseMs: number, maxMs: number): number {
  return Math.min(maxMs, baseMs * 2 ** Math.min(failures, 10)) * (0.5 + Math.random() / 2);
}

/** A promise that resolves after `ms` and keeps the process alive meanwhile (work is still pending). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
