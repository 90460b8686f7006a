/**
 * What a worker hears on its schema's channel, and where each message goes:
 * a queue name this worker serves wakes the fetcher; "!ready:<queue>" (jobs put
 * behind its claim floors: released workflow children, reaped, reprioritised)
 * sweeps that queue's floor and wakes it; "!flow" re-reads the queue limits and
 * sweeps every floor; "!cancel:<id>" is a hint to leases, which checks the job's
 * lease in the database before aborting anything. Queue names cannot start with
 * "!", so the two kinds never meet. Polling covers every message missed.
 */
import type { Claimer } from "./claimer.js";
import type { Fetcher } from "./fetcher.js";
import type { Leases } from "./leases.js";

export interface NotificationTargets {
  queues: readonly string[];
  fetcher: Pick<Fetcher, "notified" | "reachableAgain" | "wakeup">;
  claimer: Pick<Claimer, "floors" | "refresh">;
  leases: Pick<Leases, "cancelHint">;
  /** Re-reading the limits after "!flow" failed (the next refresh tries again). */
  onWarning: (error: unknown) => void;
}

/** Routes one NOTIFY payload. */
export function routeNotification(t: NotificationTargets, message: string): void {
  if (!message.startsWith("!")) {
    if (t.queues.includes(message)) t.fetcher.notified();
  } else if (message.startsWith("!ready:")) {
    const queue = message.slice("!ready:".length);
    if (t.queues.includes(queue)) {
      t.claimer.floors.sweep(queue);
      t.fetcher.notified();
    }
  } else if (message === "!flow") {
    t.claimer.floors.sweepAll();
    void t.claimer
      .refresh()
      .catch(t.onWarning)
      .then(() => t.fetcher.wakeup.wake());
  } else if (message.startsWith("!cancel:")) {
    void t.leases.cancelHint(message.slice("!cancel:".length));
  }
}

/**
 * The listener connected (again): the database answers, so a claim backoff need not run out; and a job
 * announced while nobody listened is found by a claim now, not a poll interval later (the first connect
 * follows start()'s first claim, too).
 */
export function listenerConnected(t: Pick<NotificationTargets, "fetcher">): void {
  t.fetcher.reachableAgain();
  t.fetcher.notified();
}
