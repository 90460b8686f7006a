/**
 * Upgrading a populated schema from the single-table layout (version 7):
 * the structural migration is quick, finished rows then move to history in
 * short batches while a worker keeps draining (no claim waits on the move),
 * and nothing is lost or changed on the way — counts per status, errors,
 * fingerprints, idempotency keys.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { migrate } from "../../src/db/migrate.js";
import { Store } from "../../src/db/store.js";
import { Admin, Skipq, silentLogger } from "../../src/index.js";
import { moveFinishedJobs } from "../../src/maintenance/history.js";
import { DATABASE_URL, schemaName, until } from "../helpers.js";

const FINISHED = 60_000;
const PENDING = 5_000;
let db: pg.Pool;
let schema: string;
let s: string;
beforeAll(async () => {
  db = new pg.Pool({ connectionString: DATABASE_URL, max: 10 });
  schema = schemaName("upgrade");
  s = `"${schema}"`;
});
afterAll(async () => {
  await db.query(`DROP SCHEMA IF EXISTS ${s} CASCADE`);
  await db.end();
});

test("a populated schema 7 upgrades while a worker drains: every finished job moves to history, no claim waits on it", async () => {
  await migrate(db, schema, 7);
  // The old layout: finished rows beside live ones, some with keys, dead ones with fingerprints.
  await db.query(
    `INSERT INTO ${s}.jobs (queue, kind, status, attempts, idempotency_key, last_error, error_fingerprint, completed_at, updated_at)
     SELECT 'old', 'k',
            CASE WHEN i % 20 = 0 THEN 'dead' WHEN i % 50 = 1 THEN 'cancelled' ELSE 'completed' END,
            1, CASE WHEN i % 10 = 0 THEN 'key-' || i END,
            CASE WHEN i % 20 = 0 THEN 'Error: boom ' || i END,
            CASE WHEN i % 20 = 0 THEN 'fp' || (i % 3) END,
            CASE WHEN i % 20 <> 0 AND i % 50 <> 1 THEN now() - (i % 5) * interval '1 day' END,
            now() - (i % 5) * interval '1 day'
       FROM generate_series(1, $1) AS i`,
    [FINISHED],
  );
  await db.query(`INSERT INTO ${s}.jobs (queue, kind) SELECT 'live', 'work' FROM generate_series(1, $1)`, [PENDING]);
  const before = await db.query(`SELECT status, count(*)::int AS n FROM ${s}.jobs GROUP BY status ORDER BY status`);

  const started = performance.now();
  await migrate(db, schema);
  const ddlMs = performance.now() - started;
  expect(ddlMs).toBeLessThan(30_000);

  const skipq = new Skipq({ connectionString: DATABASE_URL, schema, logger: silentLogger });
  const worker = skipq
    .worker({ queues: ["live"], concurrency: 10, maintenance: false, pollInterval: 20 })
    .register("work", () => undefined);
  const claims: number[] = [];
  worker.on("claimed", (_jobs, info) => claims.push(info.durationMs));
  await worker.start();
  // The move, in batches, while the worker drains.
  const store = new Store(schema, db);
  let moved = 0;
  for (;;) {
    const r = await moveFinishedJobs(store, {
      widthMs: 86_400_000,
      keepMs: 30 * 86_400_000,
      batch: 5000,
      maxBatches: 2,
    });
    moved += r.moved;
    if (r.done) break;
  }
  await until(
    "the live jobs are drained",
    async () => {
      const { rows } = await db.query(
        `SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'live' AND status = 'completed'`,
      );
      return rows[0].n === PENDING;
    },
    60_000,
  );
  await worker.stop();

  expect(moved).toBe(FINISHED);
  const after = await db.query(
    `SELECT status, count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'old' GROUP BY status ORDER BY status`,
  );
  expect(after.rows).toEqual(before.rows.filter((r) => r.status !== "pending"));
  expect((await db.query(`SELECT count(*)::int AS n FROM ${s}.jobs`)).rows[0].n).toBe(0);
  // The jobs table is declared live-only now, and the finished-row indexes are gone.
  const check = await db.query(
    `SELECT convalidated FROM pg_constraint WHERE conrelid = '${s}.jobs'::regclass AND conname = 'jobs_live_check'`,
  );
  expect(check.rows[0].convalidated).toBe(true);
  const indexes = await db.query(`SELECT indexname FROM pg_indexes WHERE schemaname = $1 AND tablename = 'jobs'`, [
    schema,
  ]);
  expect(indexes.rows.map((r) => r.indexname)).not.toContain("jobs_terminal_age");
  // Nothing changed on the way: errors and fingerprints, keys still taken.
  const admin = new Admin(skipq);
  expect(await admin.getJob("20")).toMatchObject({
    status: "dead",
    last_error: "Error: boom 20",
    error_fingerprint: "fp2",
  });
  expect((await admin.deadByFingerprint({ queue: "old" })).reduce((n, g) => n + g.count, 0)).toBe(FINISHED / 20);
  expect(await skipq.enqueue("k", {}, { queue: "old", idempotencyKey: "key-30" })).toEqual({
    id: "30",
    created: false,
  });
  // No claim waited on the move (generous bar: a loaded CI machine; a blocked claim would take seconds).
  expect(Math.max(...claims)).toBeLessThan(2000);
  await skipq.close();
});
