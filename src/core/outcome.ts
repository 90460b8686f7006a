/**
 * One vocabulary for how a job's attempt ends, from the worker to the SQL:
 * the executor classifies a handler's end as an `Outcome`, the worker's
 * `jobEnd` event and the metrics name it, the completer queues it, the store's
 * settle statement takes the same words, and the job's status afterwards
 * follows from it:
 *
 *   completed  → completed (history)
 *   retry      → pending after its backoff, or dead once its attempts are used up
 *   snoozed    → pending after its delay, the attempt not used
 *   released   → pending now, the attempt not used (handed back: shutdown, an unconfirmed lease)
 *   dead       → dead (history)
 *   cancelled  → cancelled (history)
 *   lease-lost → nothing written: the lease is another's now (the reaper's, a newer claim's)
 */

/** How one attempt of a job ended. */
export type Outcome = "completed" | "retry" | "dead" | "snoozed" | "cancelled" | "released" | "lease-lost";

/** The outcome of a job that left its worker before its handler's own outcome could count. */
export type DetachedOutcome = Extract<Outcome, "lease-lost" | "cancelled" | "released">;

/** Every outcome a worker writes but success: one settle statement takes them together. */
export type SettledOutcome = Exclude<Outcome, "completed" | "lease-lost">;

/** Where a job is: live in the jobs table (waiting on parents, pending, running) or finished in history. */
export type JobStatus = "waiting" | "pending" | "running" | "completed" | "dead" | "cancelled";

/** The statuses of a finished job (history's). */
export type FinishedStatus = Extract<JobStatus, "completed" | "dead" | "cancelled">;
