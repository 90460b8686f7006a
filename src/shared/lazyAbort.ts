/**
 * An AbortController made only when someone reads its signal: most handlers never do, and a
 * controller per job was ~8% of a no-op drain's worker CPU. An abort before the first read is
 * remembered, so a signal read later is already aborted, with the same reason.
 */
export class LazyAbortController {
  private controller: AbortController | undefined;
  private abortedWith: { reason: unknown } | undefined;

  get signal(): AbortSignal {
    if (!this.controller) {
      this.controller = new AbortController();
      if (this.abortedWith) this.controller.abort(this.abortedWith.reason);
    }
    return this.controller.signal;
  }

  get aborted(): boolean {
    return this.abortedWith !== undefined;
  }

  get reason(): unknown {
    return this.abortedWith?.reason;
  }

  /** The first abort wins, as with AbortController. */
  abort(reason: unknown): void {
    if (this.abortedWith) return;
    this.abortedWith = { reason };
    this.controller?.abort(reason);
  }
}
