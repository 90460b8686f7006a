/**
 * Typed calls for the publisher's statements of sql/outbox.ts (publish an
 * event, the backlog, prune delivered events), over one `Store`. Each call
 * takes one object of named parameters and returns typed rows; topics, keys
 * and bodies are validated by the caller (outbox/outbox.ts). The per-key
 * lock's namespace (the schema's) is filled in here. The relay's claim and
 * outcomes stay in outbox/relay.ts.
 */
import type { Queryable } from "./queryable.js";
import type { Store } from "./store.js";

/** The outbox's undelivered events (outboxBacklog). */
export interface OutboxBacklogRow {
  undelivered: number;
  /** Milliseconds since the oldest undelivered event was published; 0 when none. */
  oldest_ms: number;
}

export class OutboxStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.outbox;
  }

  /**
   * Publishes `event` (JSON text) with `headers` (JSON text, or null) under `topic` and `key`, in the caller's
   * transaction `db`: publishers of one key wait for each other until commit. Returns the event's id.
   */
  async outboxInsert(
    p: { topic: string; key: string; event: string; headers: string | null },
    db: Queryable,
  ): Promise<string> {
    const { rows } = await this.store.query<{ id: string }>(
      this.sql.outboxInsert,
      [p.topic, p.key, p.event, p.headers, `skipq.outbox:${this.store.schema.name}`],
      db,
    );
    return String((rows[0] as { id: string }).id); // INSERT … RETURNING: always one row
  }

  /** Undelivered events and the age of the oldest. */
  async outboxBacklog(): Promise<OutboxBacklogRow> {
    return (await this.store.query<OutboxBacklogRow>(this.sql.outboxBacklog)).rows[0] as OutboxBacklogRow; // an aggregate: one row
  }

  /** Deletes up to `limit` events delivered more than `olderThanMs` ago; how many. */
  async outboxPrune(p: { olderThanMs: number; limit: number }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.outboxPrune, [p.olderThanMs, p.limit])).rowCount ?? 0;
  }
}
