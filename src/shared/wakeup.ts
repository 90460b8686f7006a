/**
 * A one-slot wake-up: `wait(ms)` resolves on the next `wake()` or after `ms`.
 * A `wake()` with nobody waiting is remembered once, so a wake-up that arrives
 * just before the wait is never lost. Used by the worker's fetch loop and the
 * outbox relay; background services (service.ts) sleep on their own timer, and
 * leases and the dashboard's live feed run on intervals (issue 23, item 5).
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

/** A promise that resolves after `ms` and keeps the process alive meanwhile (work is still pending). */
export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
