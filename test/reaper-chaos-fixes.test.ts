/**
 * Reaper invariants the chaos suite found broken: the reaper returns its
 * connection to the pool on every path (a pass that lost the maintenance-lock
 * race kept it, and after a few lost races the worker starved: P1), and a
 * reclaimed job keeps its place in line instead of queueing behind the whole
 * backlog (recovery took as long as the backlog, not lease + reaper interval).
 */
import pg from "pg";
import { afterAll, beforeAll, expect, it } from "vitest";
import { silentLogger } from "../src/index.js";
import { Reaper } from "../src/reaper.js";
import { DATABASE_URL, type TestQueue, testQueue } from "./helpers.js";

let t: TestQueue;
beforeAll(async () => {
  t = await testQueue("reaper-pool");
});
afterAll(async () => {
  await t.cleanup();
});

it("a reaper pass that finds the maintenance lock taken returns its connection to the pool", async () => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const reaper = new Reaper({
    pool,
    schema: t.schema,
    schemaSql: `"${t.schema}"`,
    intervalMs: 1000,
    logger: silentLogger,
  });
  const holder = await t.db.connect();
  try {
    // Another process holds the maintenance lock for this schema.
    await holder.query("BEGIN");
    await holder.query("SELECT pg_advisory_xact_lock(hashtext('skipq.maintenance'), hashtext($1))", [t.schema]);
    // More passes than the pool has connections: a leak would make the third one wait forever.
    for (let i = 0; i < 5; i++) expect((await reaper.runOnce()).leader).toBe(false);
    expect(pool.totalCount - pool.idleCount).toBe(0);
  } finally {
    await holder.query("ROLLBACK");
    holder.release();
    await pool.end();
  }
});

it("a job reclaimed from an expired lease keeps its place ahead of jobs enqueued after it", async () => {
  const s = `"${t.schema}"`;
  await t.db.query(`DELETE FROM ${s}.jobs`);
  // The stranded job was enqueued first and claimed; a backlog arrived after it.
  const { rows } = await t.db.query(
    `INSERT INTO ${s}.jobs (kind, status, attempts, lease, lease_expires_at, locked_at, run_at)
     VALUES ('k', 'running', 1, 1, now() - interval '1 second', now() - interval '1 minute', now() - interval '1 minute')
     RETURNING id`,
  );
  await t.db.query(
    `INSERT INTO ${s}.jobs (kind, run_at) SELECT 'k', now() - interval '30 seconds' FROM generate_series(1, 5)`,
  );
  const reaper = new Reaper({ pool: t.db, schema: t.schema, schemaSql: s, intervalMs: 1000, logger: silentLogger });
  expect((await reaper.runOnce()).reaped.map((r) => r.id)).toEqual([rows[0].id]);
  const claimed = await t.db.query(t.skipq.sql.jobClaimBatch.text, [["default"], 1, "w", 30_000]);
  expect(claimed.rows[0].id).toBe(rows[0].id);
});
