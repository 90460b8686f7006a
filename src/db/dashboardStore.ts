/**
 * Typed calls for the dashboard's statements of sql/dashboard.ts — sessions,
 * the audit log, the outbox page and its retry, the explorer's state tabs —
 * over one `Store`. Each call takes one object of named parameters and
 * returns typed rows; what to redact, cache or refuse is the dashboard's
 * (ops/dashboard/). The live view's reads stay in ops/dashboard/live.ts.
 */
import type { JobStatus } from "./adminStore.js";
import type { Store } from "./store.js";

/** An audit row, newest first on the audit page. */
export interface AuditRow {
  id: string;
  at: Date;
  principal: string;
  role: string;
  action: string;
  target: string | null;
  detail: unknown;
  client: string | null;
  user_agent: string | null;
}

/** The outbox's undelivered events in one row (outboxSummary). */
export interface OutboxSummaryRow {
  undelivered: number;
  /** When the oldest undelivered event was written; null when none waits. */
  oldest: Date | null;
  keys: number;
  /** Undelivered events that failed at least once. */
  failing: number;
}

/** A topic and key with undelivered events (outboxKeys). */
export interface OutboxKeyRow {
  topic: string;
  key: string;
  backlog: number;
  oldest: Date;
  attempts: number;
  /** The key's first error, cut to 300 characters, as stored (the dashboard redacts it). */
  error: string | null;
  next_try: Date;
}

/** The explorer's state tabs (jobStateCounts): the live states exactly, the history's counted up to the limit. */
export type JobStateCountsRow = Record<JobStatus, number>;

export class DashboardStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.dashboard;
  }

  /**
   * Creates session `id` (a keyed hash of the cookie) for `principal`, valid `ttlMs`; deletes the session
   * `presented` with the sign-in (null: none) and every session no longer valid under `idleMs`.
   */
  async sessionCreate(p: {
    id: string;
    principal: string;
    ttlMs: number;
    presented: string | null;
    idleMs: number;
  }): Promise<void> {
    await this.store.query(this.sql.sessionCreate, [p.id, p.principal, p.ttlMs, p.presented, p.idleMs]);
  }

  /** Marks session `id` seen now; its principal, or undefined when it is not valid under `idleMs`. */
  async sessionTouch(p: { id: string; idleMs: number }): Promise<string | undefined> {
    const { rows } = await this.store.query<{ principal: string }>(this.sql.sessionTouch, [p.id, p.idleMs]);
    return rows[0]?.principal;
  }

  /** Sign-out: deletes session `id`. */
  async sessionRevoke(p: { id: string }): Promise<void> {
    await this.store.query(this.sql.sessionRevoke, [p.id]);
  }

  /** Appends an audit row; `detail` is JSON text (null: none). */
  async auditInsert(p: {
    principal: string;
    role: string;
    action: string;
    target: string | null;
    detail: string | null;
    client: string | null;
    userAgent: string | null;
  }): Promise<void> {
    await this.store.query(this.sql.auditInsert, [
      p.principal,
      p.role,
      p.action,
      p.target,
      p.detail,
      p.client,
      p.userAgent,
    ]);
  }

  /** The audit page: up to `limit` rows with ids below `before` (null: the newest), newest first. */
  async auditList(p: { before: string | null; limit: number }): Promise<AuditRow[]> {
    return (await this.store.query<AuditRow>(this.sql.auditList, [p.before, p.limit])).rows;
  }

  /** The outbox's undelivered events: how many, the oldest, over how many keys, how many failed before. */
  async outboxSummary(): Promise<OutboxSummaryRow> {
    return (await this.store.query<OutboxSummaryRow>(this.sql.outboxSummary)).rows[0] as OutboxSummaryRow; // an aggregate: one row
  }

  /** Up to `limit` topics and keys with undelivered events, failing keys first. */
  async outboxKeys(p: { limit: number }): Promise<OutboxKeyRow[]> {
    return (await this.store.query<OutboxKeyRow>(this.sql.outboxKeys, [p.limit])).rows;
  }

  /** Makes the undelivered events of `key` of `topic` due now (none a relay holds under a live lease); how many. */
  async outboxRetryKey(p: { key: string; topic: string }): Promise<number> {
    return (await this.store.query<unknown>(this.sql.outboxRetryKey, [p.key, p.topic])).rowCount ?? 0;
  }

  /**
   * The explorer's state tabs for `queue` and `kind` (null: any): the live states exactly, the history's
   * counted up to `limit` rows each.
   */
  async jobStateCounts(p: { queue: string | null; kind: string | null; limit: number }): Promise<JobStateCountsRow> {
    return (await this.store.query<JobStateCountsRow>(this.sql.jobStateCounts, [p.queue, p.kind, p.limit]))
      .rows[0] as JobStateCountsRow; // an aggregate: one row
  }
}
