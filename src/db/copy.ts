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
import { ValidationError } from "../core/errors.js";
import type { InsertRow } from "./jobRows.js";
import { notMigrated } from "./migrate.js";
import type { Schema } from "./schema.js";
import { withTransaction } from "./transaction.js";

const COLUMNS = "queue, kind, payload, priority, max_attempts, run_at, headers, concurrency_key";

/** A value in COPY's text format: backslash, tab, newline and carriage return escaped; null as \N. */
function field(value: string | null): string {
  if (value === null) return "\\N";
  return value.replace(/[\\\t\n\r]/g, (c) => (c === "\\" ? "\\\\" : c === "\t" ? "\\t" : c === "\n" ? "\\n" : "\\r"));
}

/** A prepared row as one line of COPY's text format; throws on what COPY cannot take. */
function line(r: InsertRow, nowMs: number): string {
  if (r.key !== null) {
    throw new ValidationError(
      "enqueueMany with { returning: false } takes no idempotency keys (a taken key would fail the whole copy); drop returning: false to use keys",
    );
  }
  if (r.parents !== null) {
    throw new ValidationError(
      "enqueueMany with { returning: false } takes no dependsOn (waiting jobs are linked to their parents by id); drop returning: false",
    );
  }
  const runAt = r.runAt ?? new Date(nowMs + r.delayMs).toISOString();
  return `${field(r.queue)}\t${field(r.kind)}\t${field(r.payload)}\t${r.priority}\t${r.maxAttempts}\t${runAt}\t${field(r.headers)}\t${field(r.concurrencyKey)}\n`;
}

/**
 * Copies `count` rows into the jobs table in one transaction, row `i` from `rowAt(i)`, called as the copy
 * streams (so preparing row i+1 overlaps the database's work on row i). A row that fails to prepare, or
 * that COPY cannot take, aborts the copy and rolls everything back. Returns the queues with a job due now.
 */
export async function copyJobs(
  pool: pg.Pool,
  schema: Schema,
  count: number,
  rowAt: (i: number) => Promise<InsertRow>,
): Promise<Set<string>> {
  const due = new Set<string>();
  if (count === 0) return due;
  await withTransaction(pool, async (tx) => {
    const { rows: clock } = await tx.query<{ now: Date }>("SELECT now() AS now");
    const nowMs = (clock[0] as { now: Date }).now.getTime();
    // Chunks of about 64 KiB, so the socket gets few large writes.
    async function* chunks(): AsyncGenerator<string> {
      let chunk = "";
      for (let i = 0; i < count; i++) {
        const r = await rowAt(i);
        chunk += line(r, nowMs);
        if (r.runAt === null && r.delayMs === 0) due.add(r.queue);
        if (chunk.length >= 65_536) {
          yield chunk;
          chunk = "";
        }
      }
      if (chunk) yield chunk;
    }
    // A missing jobs table (a schema never migrated) says what to do, like every other enqueue.
    await pipeline(chunks(), tx.query(copyFrom(`COPY ${schema.table("jobs")} (${COLUMNS}) FROM STDIN`))).catch(
      (error: unknown) => {
        throw notMigrated(error, schema.name);
      },
    );
  });
  return due;
}
