/**
 * The job rows' shapes and their encoding: what the claim statements return
 * (`ClaimedRow`), what the worker records (`Settlement`), what enqueue hands
 * the inserts (`InsertRow`, built and validated by enqueue/prepare.ts), and
 * how those rows become the insert statements' parameters (one row's `$1`–`$10`,
 * many rows as one JSON array). Types and pure functions only: no SQL is sent
 * from here (jobStore.ts and jobFeatureStore.ts send it).
 */
import type { SettledOutcome } from "../core/outcome.js";

/** Floors for the claim function (worker/floors.ts builds them). */
export interface FloorArgs {
  queues: string[];
  /** null: the queue's aged scan. */
  levels: Array<number | null>;
  runAt: string[];
  ids: string[];
}

/** Row parsers for a claim (node-postgres's `types` option). */
export interface ClaimTypes {
  getTypeParser(oid: number, format?: "text" | "binary"): (value: string) => unknown;
}

/** A claimed row as the claim statements return it. */
export interface ClaimedRow {
  id: string;
  queue: string;
  kind: string;
  payload: unknown;
  priority: number;
  attempts: number;
  max_attempts: number;
  lease: string;
  /** Timestamps as PostgreSQL's text (the claim's type parsers leave them unparsed: see worker/claimedJob.ts). */
  run_at: string;
  created_at: string;
  headers: Record<string, string> | null;
  concurrency_key: string | null;
  locked_at: string;
  /** Workflows: the job's onParentFailure, null when it has no parents. */
  on_parent_failure: string | null;
}

/** Every outcome but success: recorded together by `settleMany`. */
export interface Settlement {
  id: string;
  lease: string;
  /** What the job's status becomes for each: core/outcome.ts. `delayMs` applies to retry and snoozed. */
  outcome: SettledOutcome;
  error: string | null;
  delayMs: number;
  fingerprint: string | null;
  /** The attempt's attempt_logs entry (JSON text, worker/attemptLog.ts), or null/absent to record none. */
  entry?: string | null;
}

/** One job to insert, encoded and validated (src/enqueue/prepare.ts builds these). */
export interface InsertRow {
  /** Position in the caller's input. */
  i: number;
  queue: string;
  kind: string;
  /** Encoded JSON. */
  payload: string;
  priority: number;
  maxAttempts: number;
  /** ISO time, or null for now + delayMs. */
  runAt: string | null;
  delayMs: number;
  key: string | null;
  /** Encoded JSON object, or null. */
  headers: string | null;
  concurrencyKey: string | null;
  /** A uniqueness window (docs/jobs.md): the key, its period, and whether only live holders count. */
  unique?: { key: string; periodMs: number; live: boolean };
  /** Debounce (docs/jobs.md): the key, and how long after the last enqueue the job runs. */
  debounce?: { key: string; delayMs: number };
  /** Workflows: the jobs this one waits for, or null (a plain job). */
  parents: ParentRefs | null;
}

/** Workflows: a dependent row's parents — existing job ids, and positions of rows inserted in the same call. */
export interface ParentRefs {
  ids: string[];
  items: number[];
  policy: "cancel" | "run" | "wait";
}

/** A parent as `ctx.parents` shows it. */
export interface ParentRow {
  id: string;
  kind: string;
  status: "completed" | "dead" | "cancelled" | null;
  result: unknown;
  last_error: string | null;
}

/**
 * Whether two keyless rows differ at most in their payloads (jobInsertManyShared can insert them together).
 * Rows with parents never get here: they go in as waiting jobs (insertWaiting).
 */
export function sameShape(a: InsertRow, b: InsertRow): boolean {
  return (
    a.queue === b.queue &&
    a.kind === b.kind &&
    a.priority === b.priority &&
    a.maxAttempts === b.maxAttempts &&
    a.runAt === b.runAt &&
    a.delayMs === b.delayMs &&
    a.headers === b.headers &&
    a.concurrencyKey === b.concurrencyKey
  );
}

/** Rows as the JSON array the many-row statements read with jsonb_to_recordset (one parameter for any count). */
export function rowsJson(rows: readonly InsertRow[]): string {
  const text = (v: string | null) => (v === null ? "null" : JSON.stringify(v));
  return `[${rows
    .map(
      (r) =>
        `{"i":${r.i},"queue":${JSON.stringify(r.queue)},"kind":${JSON.stringify(r.kind)},"payload":${r.payload},"priority":${r.priority},"max_attempts":${r.maxAttempts},"run_at":${text(r.runAt)},"delay_ms":${r.delayMs},"key":${text(r.key)},"headers":${r.headers ?? "null"},"ckey":${text(r.concurrencyKey)},"policy":${text(r.parents?.policy ?? null)}}`,
    )
    .join(",")}]`;
}

/** A row's values as the single-insert statements take them ($1–$10). */
export function insertValues(row: InsertRow): unknown[] {
  return [
    row.queue,
    row.kind,
    row.payload,
    row.priority,
    row.maxAttempts,
    row.runAt,
    row.delayMs,
    row.key,
    row.headers,
    row.concurrencyKey,
  ];
}
