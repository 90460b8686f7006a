/**
 * The transactional outbox (role `outbox`): `publish` writes an event in the
 * caller's transaction; `OutboxRelay` (relay.ts) claims undelivered events
 * and hands them to a sink, at least once and in order per key.
 *
 * Invariant: an event exists iff the publishing transaction committed, and
 * publishers of one key are serialised until commit, so id order per key is
 * commit order (src/db/sql/outbox.ts).
 */

import { ValidationError } from "../core/errors.js";
import { assertName, type Duration, encodeHeaders, encodePayload, toMs } from "../core/validate.js";
import { OutboxStore } from "../db/outboxStore.js";
import type { Store } from "../db/store.js";
import type { Queryable, Skipq } from "../skipq.js";
import { OutboxRelay, type RelayOptions } from "./relay.js";

export type { RelayEvents, RelayOptions } from "./relay.js";
export { OutboxRelay } from "./relay.js";
export type { BatchOutcome, OutboxEvent, OutboxSink } from "./types.js";

export interface PublishOptions {
  /** Small string metadata delivered with the event (e.g. a trace context). */
  headers?: Record<string, string>;
}

/** Writes events into the outbox; one per schema. */
export class Outbox {
  /** @internal */
  readonly store: Store;
  private readonly outbox: OutboxStore;

  constructor(readonly skipq: Skipq) {
    this.store = skipq.store;
    this.outbox = new OutboxStore(skipq.store);
  }

  /** @internal */
  get sql() {
    return this.store.sql.outbox;
  }

  /**
   * Publish `event` under `topic` and `key` inside the caller's transaction `tx`:
   * the event exists iff that transaction commits, and events of one key are
   * delivered in the order their transactions published them. Publishers of the
   * same key wait for each other until commit (a transaction-scoped lock).
   */
  async publish(
    tx: Queryable,
    topic: string,
    key: string,
    event: unknown,
    options: PublishOptions = {},
  ): Promise<{ id: string }> {
    assertName("topic", topic);
    if (typeof key !== "string" || key.length === 0 || key.length > 512 || key.includes("\u0000")) {
      throw new ValidationError("outbox key must be a non-empty string of at most 512 characters without NUL");
    }
    const body = encodePayload(event, this.skipq.maxPayloadBytes);
    const headers = options.headers === undefined ? null : encodeHeaders(options.headers);
    return { id: await this.outbox.outboxInsert({ topic, key, event: body, headers }, tx) };
  }

  /** A relay delivering this schema's outbox to `sink`; call `start()`. */
  relay(options: RelayOptions): OutboxRelay {
    return new OutboxRelay({ store: this.store, logger: this.skipq.logger }, options);
  }

  /** Undelivered events and the age of the oldest. */
  async backlog(): Promise<{ undelivered: number; oldestMs: number }> {
    const row = await this.outbox.outboxBacklog();
    return { undelivered: row.undelivered, oldestMs: row.oldest_ms };
  }

  /** Delete events delivered longer ago than `olderThan`, in batches; returns how many. */
  async prune(olderThan: Duration, batchSize = 1000): Promise<number> {
    const ms = toMs("olderThan", olderThan);
    let total = 0;
    for (;;) {
      const n = await this.outbox.outboxPrune({ olderThanMs: ms, limit: batchSize });
      total += n;
      if (n < batchSize) return total;
    }
  }
}
