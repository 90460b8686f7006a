/**
 * Pipelined runs for the broker sinks: a key's events are sent back to back
 * on one ordered channel and their confirmations awaited together, with at
 * most `window` sends unconfirmed across every key the sink is delivering.
 * Invariants: a run's events are sent in the order given, each only after the
 * one before it was handed to the channel; sending stops at the first refusal
 * or when the signal aborts; the reported prefix holds only events confirmed.
 * It never waits past the signal for a confirmation or a window slot.
 */
import type { BatchOutcome, OutboxEvent } from "../outbox.js";

/** At most `size` sends awaiting confirmation; slots are granted in request order. */
export class ConfirmWindow {
  private free: number;
  private readonly waiting: Array<() => void> = [];

  constructor(readonly size: number) {
    this.free = size;
  }

  /** True once a slot is held; false when `signal` aborted first (no slot held). */
  acquire(signal: AbortSignal): boolean | Promise<boolean> {
    if (signal.aborted) return false;
    if (this.free > 0 && this.waiting.length === 0) {
      this.free--;
      return true;
    }
    return new Promise<boolean>((resolve) => {
      const grant = () => {
        signal.removeEventListener("abort", onAbort);
        resolve(true);
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(grant);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve(false);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(grant);
    });
  }

  release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.free++;
  }
}

/** Sends one event; calls `done` once (with an error when refused) when the destination answered. */
export type Send = (event: OutboxEvent, done: (error?: unknown) => void) => void;

/**
 * Sends `events` (one key's run, in id order) through `send`, pipelined within
 * `window`, and resolves with the confirmed prefix; never rejects.
 */
export async function pipelineRun(
  sink: string,
  events: ReadonlyArray<OutboxEvent>,
  signal: AbortSignal,
  window: ConfirmWindow,
  send: Send,
): Promise<BatchOutcome> {
  // undefined: not answered (or not sent); null: confirmed; otherwise the refusal.
  const answers: unknown[] = new Array(events.length).fill(undefined);
  let refused = false;
  let pending = 0;
  let settle: (() => void) | undefined;
  const allAnswered = new Promise<void>((resolve) => {
    settle = resolve;
  });
  let sending = true;
  const answered = (i: number, error: unknown) => {
    answers[i] = error ?? null;
    if (error !== undefined && error !== null) refused = true;
    window.release();
    pending--;
    if (pending === 0 && !sending) settle?.();
  };
  for (let i = 0; i < events.length && !refused; i++) {
    const slot = window.acquire(signal);
    if (!(slot === true || (await slot))) break;
    // A refusal may have arrived while waiting for the slot: send nothing more of this key.
    if (refused || signal.aborted) {
      window.release();
      break;
    }
    pending++;
    let once = false;
    const done = (error?: unknown) => {
      if (once) return;
      once = true;
      answered(i, error ?? null);
    };
    try {
      send(events[i] as OutboxEvent, done);
    } catch (error) {
      done(error ?? new Error(`${sink} could not send outbox event ${(events[i] as OutboxEvent).id}`));
    }
  }
  sending = false;
  if (pending === 0) settle?.();
  if (!signal.aborted) {
    await new Promise<void>((resolve) => {
      const onAbort = () => resolve();
      signal.addEventListener("abort", onAbort, { once: true });
      allAnswered.then(() => {
        signal.removeEventListener("abort", onAbort);
        resolve();
      });
    });
  }
  let confirmed = 0;
  while (confirmed < events.length && answers[confirmed] === null) confirmed++;
  if (confirmed === events.length) return { confirmed };
  const first = events[confirmed] as OutboxEvent;
  const refusal = answers[confirmed];
  const timedOut = refusal === undefined && signal.aborted;
  let error: unknown = timedOut ? new Error(`${sink} did not confirm outbox event ${first.id} in time`) : refusal;
  // A destination that refused (or did not confirm) one event but accepted a later one of the key
  // (e.g. a RabbitMQ nack from one queue) has let that later event overtake it: say so where operators look.
  const overtaken = answers.slice(confirmed + 1).filter((a) => a === null).length;
  if (overtaken > 0 && error !== undefined) {
    error = new Error(
      `${sink} ${timedOut ? "did not confirm" : "refused"} outbox event ${first.id} but accepted ${overtaken} later event(s) of key ${JSON.stringify(first.key)}; they will be sent again after it`,
      { cause: error },
    );
  }
  return error === undefined ? { confirmed } : { confirmed, error };
}
