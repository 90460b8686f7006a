/**
 * Test helpers: every test file gets its own schema (named after it, random
 * suffix) in the database at DATABASE_URL, migrated, and dropped afterwards.
 * Waiting is done by polling a condition, never by fixed sleeps.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import pg from "pg";
import { afterAll, beforeAll } from "vitest";
import {
  Admin,
  type JobRow,
  Skipq,
  type SkipqOptions,
  silentLogger,
  type Worker,
  type WorkerOptions,
} from "../src/index.js";

import { until } from "./until.js";

export { until };

export const DATABASE_URL = process.env.DATABASE_URL ?? "";
if (!DATABASE_URL)
  throw new Error("DATABASE_URL is not set: run tests with `npm test`, which starts PostgreSQL when needed");

export function schemaName(label: string): string {
  return `t_${label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .slice(0, 30)}_${Math.random().toString(36).slice(2, 8)}`;
}

export interface TestQueue {
  skipq: Skipq;
  schema: string;
  /** A direct pool for assertions and setup SQL. */
  db: pg.Pool;
  /** Drops the schema and closes every pool. */
  cleanup(): Promise<void>;
}

export async function testQueue(label: string, options: SkipqOptions = {}): Promise<TestQueue> {
  const schema = options.schema ?? schemaName(label);
  const skipq = new Skipq({ connectionString: DATABASE_URL, logger: silentLogger, ...options, schema });
  await skipq.migrate();
  const db = new pg.Pool({ connectionString: DATABASE_URL, max: 20 });
  db.on("error", () => undefined);
  return {
    skipq,
    schema,
    db,
    async cleanup() {
      await skipq.close();
      await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.end();
    },
  };
}

/** A file's test queue (useTestQueue): a TestQueue, and workers that are stopped before it is dropped. */
export interface QueueFixture extends TestQueue {
  /** A worker of this queue, stopped in afterAll before the schema is dropped. */
  worker(options?: WorkerOptions): Worker;
}

/**
 * The test queue of a file: its schema made and migrated before the file's tests (beforeAll), and after them
 * (afterAll) every worker made through `worker()` stopped, then the schema dropped and the pools closed. Call
 * it at the top of the file; its fields are there from the first hook or test on.
 */
export function useTestQueue(label: string, options: SkipqOptions = {}): QueueFixture {
  let current: TestQueue | undefined;
  const workers: Worker[] = [];
  beforeAll(async () => {
    current = await testQueue(label, options);
  });
  afterAll(async () => {
    await Promise.all(workers.map((w) => w.stop()));
    await current?.cleanup();
  });
  const made = (): TestQueue => {
    if (current === undefined) throw new Error("useTestQueue: its queue exists from the first hook or test on");
    return current;
  };
  return {
    get skipq() {
      return made().skipq;
    },
    get schema() {
      return made().schema;
    },
    get db() {
      return made().db;
    },
    cleanup: () => made().cleanup(),
    worker(workerOptions) {
      const w = made().skipq.worker(workerOptions);
      workers.push(w);
      return w;
    },
  };
}

export async function statusCounts(t: TestQueue): Promise<Record<string, number>> {
  const { rows } = await t.db.query(`SELECT status, count(*)::int AS n FROM "${t.schema}".all_jobs GROUP BY status`);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

const exampleSchemas: string[] = [];

/**
 * Runs an example file (`node --import tsx file`) in a fresh schema given as
 * SKIPQ_SCHEMA; resolves with its stdout, rejects on a non-zero exit.
 */
export async function runExample(file: string, env: Record<string, string> = {}): Promise<string> {
  // A schema given in env is reused (to run an example twice on one schema); it is dropped all the same.
  const schema = env.SKIPQ_SCHEMA ?? schemaName(file.replace(/\W/g, "_").slice(-20));
  if (!exampleSchemas.includes(schema)) exampleSchemas.push(schema);
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", file], {
    env: { ...process.env, SKIPQ_SCHEMA: schema, ...env },
    timeout: 60_000,
  });
  return stdout;
}

/** Drops the schemas runExample created (call from afterAll). */
export async function dropExampleSchemas(): Promise<void> {
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  for (const s of exampleSchemas.splice(0)) await db.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await db.end();
}

export type Finished = "completed" | "dead" | "cancelled";

/**
 * Moves live jobs to history as `status`, the way an outcome, the reaper or a cancel does (the tests'
 * shortcut to a finished job). `finishedAgo`: an SQL interval to back-date finished_at by.
 */
export async function finishJobs(
  db: pg.Pool,
  schema: string,
  ids: readonly string[],
  status: Finished,
  fields: { lastError?: string; fingerprint?: string; attempts?: number; finishedAgo?: string } = {},
): Promise<void> {
  const s = `"${schema}"`;
  const { rowCount } = await db.query(
    `WITH gone AS (DELETE FROM ${s}.jobs WHERE id = ANY($1::bigint[]) RETURNING *)
     INSERT INTO ${s}.job_history (id, queue, kind, payload, idempotency_key, status, priority, attempts, max_attempts,
                                   run_at, locked_at, locked_by, last_error, error_fingerprint, headers, concurrency_key,
                                   created_at, finished_at)
     SELECT id, queue, kind, payload, idempotency_key, $2, priority, COALESCE($5::int, attempts), max_attempts,
            run_at, locked_at, locked_by, COALESCE($3, last_error), COALESCE($4, error_fingerprint), headers,
            concurrency_key, created_at, now() - COALESCE($6::interval, interval '0')
       FROM gone`,
    [
      ids,
      status,
      fields.lastError ?? null,
      fields.fingerprint ?? null,
      fields.attempts ?? null,
      fields.finishedAgo ?? null,
    ],
  );
  if (rowCount !== ids.length) throw new Error(`finishJobs: ${rowCount} of ${ids.length} jobs were live`);
}

/** `count` finished jobs written straight into history (a long history, cheaply): SQL `columns` over `i`. */
export async function insertHistory(
  db: pg.Pool,
  schema: string,
  count: number,
  o: { status: Finished; queue?: string; kind?: string; finishedAt?: string; extra?: Record<string, string> },
): Promise<void> {
  const s = `"${schema}"`;
  const extra = Object.entries(o.extra ?? {});
  await db.query(
    `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at,
                                  created_at, finished_at${extra.map(([c]) => `, ${c}`).join("")})
     SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')), $2, $3, '{}', $4, 0, 1, 10, now(), now(),
            ${o.finishedAt ?? "now()"}${extra.map(([, v]) => `, ${v}`).join("")}
       FROM generate_series(1, $1) AS i`,
    [count, o.queue ?? "default", o.kind ?? "old", o.status],
  );
}

/** Deletes every job, live and finished, and every idempotency key of the schema (between tests of one file). */
export async function clearJobs(db: pg.Pool, schema: string): Promise<void> {
  const s = `"${schema}"`;
  await db.query(`DELETE FROM ${s}.jobs; DELETE FROM ${s}.job_history; DELETE FROM ${s}.job_keys`);
}

/** Polls until job `id` is completed, dead or cancelled; resolves with its row. */
export function untilFinished(skipq: Skipq, id: string): Promise<JobRow> {
  const admin = new Admin(skipq);
  return until(`job ${id} finished`, async () => {
    const job = await admin.getJob(id);
    return job && ["completed", "dead", "cancelled"].includes(job.status) ? job : undefined;
  });
}

/** A promise a test opens when it chooses (a handler awaits it to stay running meanwhile). */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open = () => {};
  const promise = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { promise, open };
}

/**
 * A job row written by plain SQL, as a protocol worker, `skipq_complete` or a psql session would: `columns`
 * (text values cast by PostgreSQL, jsonb included) over defaults; a dead row of job_history with `history`.
 * Returns its id.
 */
export async function insertRawJob(
  t: TestQueue,
  columns: Record<string, string | null>,
  options: { history?: boolean } = {},
): Promise<string> {
  const row: Record<string, string | null> = options.history
    ? {
        queue: "default",
        kind: "sql-written",
        payload: "{}",
        status: "dead",
        priority: "0",
        attempts: "1",
        max_attempts: "1",
        ...columns,
      }
    : { kind: "sql-written", ...columns };
  const names = Object.keys(row);
  const id = options.history ? `nextval(pg_get_serial_sequence('"${t.schema}".jobs', 'id')), ` : "";
  const times = options.history ? "now(), now(), now(), " : "";
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".${options.history ? "job_history" : "jobs"}
       (${options.history ? "id, run_at, created_at, finished_at, " : ""}${names.join(", ")})
     VALUES (${id}${times}${names.map((_, i) => `$${i + 1}`).join(", ")}) RETURNING id`,
    Object.values(row),
  );
  return String(rows[0].id);
}
