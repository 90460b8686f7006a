/**
 * enqueueMany's fast path (`{ returning: false }`): rows go into the jobs
 * table through COPY, which PostgreSQL writes many rows at a time, in one
 * transaction, and no id comes back. Times come from the database clock: the
 * transaction's now() is read first, and a delay is added to it (COPY cannot
 * compute per-row expressions). Idempotency keys are refused here: a taken
 * key could only fail the whole COPY, and nobody would learn which job holds it.
 */
import { pipeline } from "node:stream/promises";
import type pg from "pg";
import { from as copyFrom } from "pg-copy-streams";
import type { InsertRow } from "../db/jobStore.js";
import type { Schema } from "../db/schema.js";
import { withTransaction } from "../db/transaction.js";
import { ValidationError } from "./errors.js";

const COLUMNS = "queue, kind, payload, priority, max_attempts, run_at, headers, concurrency_key";

/** A value in COPY's text format: backslash, tab, newline and carriage return escaped; null as \N. */
function field(value: string | null): string {
  if (value === null) return "\\N";
  return value.replace(/[\\\t\n\r]/g, (c) => (c === "\\" ? "\\\\" : c === "\t" ? "\\t" : c === "\n" ? "\\n" : "\\r"));
}

/** Lines of about 64 KiB, so the socket gets few large writes. */
function* lines(rows: readonly InsertRow[], nowMs: number): Generator<string> {
  let chunk = "";
  for (const r of rows) {
    const runAt = r.runAt ?? new Date(nowMs + r.delayMs).toISOString();
    chunk += `${field(r.queue)}\t${field(r.kind)}\t${field(r.payload)}\t${r.priority}\t${r.maxAttempts}\t${runAt}\t${field(r.headers)}\t${field(r.concurrencyKey)}\n`;
    if (chunk.length >= 65_536) {
      yield chunk;
      chunk = "";
    }
  }
  if (chunk) yield chunk;
}

/** Copies `rows` into the jobs table in one transaction; returns how many. */
export async function copyJobs(pool: pg.Pool, schema: Schema, rows: readonly InsertRow[]): Promise<number> {
  if (rows.some((r) => r.key !== null)) {
    throw new ValidationError(
      "enqueueMany with { returning: false } takes no idempotency keys (a taken key would fail the whole copy); drop returning: false to use keys",
    );
  }
  if (rows.some((r) => r.parents !== null)) {
    throw new ValidationError(
      "enqueueMany with { returning: false } takes no dependsOn (waiting jobs are linked to their parents by id); drop returning: false",
    );
  }
  if (rows.length === 0) return 0;
  return withTransaction(pool, async (tx) => {
    const { rows: clock } = await tx.query<{ now: Date }>("SELECT now() AS now");
    const nowMs = (clock[0] as { now: Date }).now.getTime();
    const stream = tx.query(copyFrom(`COPY ${schema.table("jobs")} (${COLUMNS}) FROM STDIN`));
    await pipeline(lines(rows, nowMs), stream);
    return rows.length;
  });
}
