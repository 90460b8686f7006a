/**
 * A claimed job as its handler sees it, made from a claimed row with as
 * little work per job as possible: the row's timestamps stay text until a
 * handler (or a metrics listener) reads `runAt` or `createdAt` — parsing two
 * dates per job was ~7 % of a no-op drain's worker CPU.
 */
import pg from "pg";
import type { ClaimedRow } from "../db/jobStore.js";
import type { Job } from "./types.js";

const parsePg = pg.types.getTypeParser(pg.types.builtins.TIMESTAMPTZ) as (text: string) => Date | number;

/**
 * A timestamptz as a Date. PostgreSQL's 'infinity' and '-infinity' (possible from a plain-SQL enqueue)
 * become the latest and earliest Dates JavaScript can hold, so `getTime()` always works.
 */
function parseTimestamptz(text: string): Date {
  const value = parsePg(text);
  if (value instanceof Date) return Number.isNaN(value.getTime()) ? new Date(8.64e15) : value;
  return new Date(value > 0 ? 8.64e15 : -8.64e15);
}

export class ClaimedJob implements Job {
  readonly id: string;
  readonly queue: string;
  readonly kind: string;
  payload: unknown;
  readonly priority: number;
  readonly attempt: number;
  readonly maxAttempts: number;
  readonly headers: Record<string, string>;
  readonly lease: string;
  readonly concurrencyKey: string | null;
  /** Workflows: the job's onParentFailure, null when it has no parents (then ctx.parents is empty, unread). */
  readonly parentPolicy: string | null;
  private readonly runAtText: string;
  private readonly createdAtText: string;
  private runAtDate: Date | undefined;
  private createdAtDate: Date | undefined;

  constructor(row: ClaimedRow) {
    this.id = row.id;
    this.queue = row.queue;
    this.kind = row.kind;
    this.payload = row.payload;
    this.priority = row.priority;
    this.attempt = row.attempts;
    this.maxAttempts = row.max_attempts;
    this.headers = row.headers ?? {};
    this.lease = row.lease;
    this.concurrencyKey = row.concurrency_key;
    this.parentPolicy = row.on_parent_failure ?? null;
    this.runAtText = row.run_at;
    this.createdAtText = row.created_at;
  }

  get runAt(): Date {
    this.runAtDate ??= parseTimestamptz(this.runAtText);
    return this.runAtDate;
  }

  get createdAt(): Date {
    this.createdAtDate ??= parseTimestamptz(this.createdAtText);
    return this.createdAtDate;
  }

  /** The plain fields, for logs and JSON (getters are not own properties). */
  toJSON(): Job {
    return {
      id: this.id,
      queue: this.queue,
      kind: this.kind,
      payload: this.payload,
      priority: this.priority,
      attempt: this.attempt,
      maxAttempts: this.maxAttempts,
      runAt: this.runAt,
      createdAt: this.createdAt,
      headers: this.headers,
      lease: this.lease,
      concurrencyKey: this.concurrencyKey,
    };
  }
}

/** The claimed rows' timestamps as text: `ClaimedJob` parses them on first read. */
export const claimTypes = {
  getTypeParser(oid: number, format?: "text" | "binary") {
    if (oid === pg.types.builtins.TIMESTAMPTZ) return (text: string) => text;
    return pg.types.getTypeParser(oid, format);
  },
};

export { parseTimestamptz };
