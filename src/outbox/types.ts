/** What the outbox hands a sink, and what a sink promises back (src/outbox/sinks). */

/** An event as a sink receives it. */
export interface OutboxEvent {
  /** The outbox row id (a bigint as a string): increases with publish order within a key. */
  id: string;
  topic: string;
  key: string;
  event: unknown;
  headers: Record<string, string>;
  /** This delivery attempt's number, from 1. */
  attempt: number;
  createdAt: Date;
}

/**
 * What a sink's `deliverBatch` reports: the destination confirmed
 * `events[0 .. confirmed - 1]`, and not `events[confirmed]` (for `error`).
 */
export interface BatchOutcome {
  /** How many leading events the destination durably accepted; the relay marks exactly these delivered. */
  confirmed: number;
  /** Why `events[confirmed]` was not accepted; expected whenever `confirmed < events.length`. */
  error?: unknown;
}

/** Where the relay delivers. `deliver` resolves once the destination has durably accepted the event. */
export interface OutboxSink {
  /** Shown in logs. */
  readonly name: string;
  /** Deliver one event; throw (or reject) to retry it later. Must stop when `signal` aborts. */
  deliver(event: OutboxEvent, signal: AbortSignal): Promise<void>;
  /**
   * Optional: deliver a run of one key's events, given in id order, pipelined
   * (each sent without waiting for the previous one's confirmation) on one
   * ordered channel, and report how many leading events were confirmed. The
   * relay marks that prefix delivered, retries the first unconfirmed event
   * and hands back the rest. Implement it only for a destination that applies
   * one channel's messages in the order sent (a broker connection, not
   * parallel HTTP requests). Must stop when `signal` aborts; a rejection
   * counts as nothing confirmed. Without it (or with the relay's
   * `pipeline: false`), the relay calls `deliver` one event at a time.
   */
  deliverBatch?(events: ReadonlyArray<OutboxEvent>, signal: AbortSignal): Promise<BatchOutcome>;
  /** Release connections; called by `OutboxRelay.stop()`. */
  close?(): Promise<void>;
}
