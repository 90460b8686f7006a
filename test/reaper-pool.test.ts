/**
 * The reaper returns its connection to the pool on every path. Found by the
 * chaos suite (P1): a pass that lost the maintenance-lock race kept its
 * connection, so after a few lost races a worker's pool was empty and the
 * worker stopped claiming and recording outcomes for good.
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
