/**
 * The notifier: wakes workers for jobs that committed outside a caller's
 * transaction (enqueue, enqueueMany), coalescing wake-ups. At most one NOTIFY
 * statement per client is in flight; queues nudged meanwhile ride on the next
 * one, sent as soon as it returns — so an idle worker hears of a job one round
 * trip after its commit, and a thousand enqueues a second cost a few NOTIFYs.
 * Invariants: every nudge is followed by a NOTIFY sent after it (no lost
 * wake-up); a failed NOTIFY is logged, never thrown (workers poll anyway).
 */
import type { Logger } from "../core/logger.js";

export class Notifier {
  /** NOTIFY statements sent (tests read it to see coalescing). */
  sent = 0;
  private pending = new Set<string>();
  private sending: Promise<void> | undefined;

  constructor(
    private readonly send: (queues: string[]) => Promise<void>,
    private readonly logger: Logger,
  ) {}

  /** Asks for a wake-up of `queue`'s workers; call it after the job's transaction committed. */
  nudge(queue: string): void {
    this.pending.add(queue);
    this.sending ??= this.drain();
  }

  /** Resolves once every nudge so far has been sent (or failed). */
  async idle(): Promise<void> {
    while (this.sending) await this.sending;
  }

  private async drain(): Promise<void> {
    try {
      while (this.pending.size > 0) {
        const queues = [...this.pending];
        this.pending.clear();
        try {
          this.sent++;
          await this.send(queues);
        } catch (error) {
          this.logger.warn(
            { err: error, queues },
            "skipq: could not notify workers; they will find the jobs by polling",
          );
        }
      }
    } finally {
      this.sending = undefined;
    }
  }
}
