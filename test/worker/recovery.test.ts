/**
 * Core invariants the chaos suite (test/chaos) found broken, pinned here so
 * the fast suite guards them: the reaper returns its connection on every path
 * (P1: a lost leader race leaked it until the worker starved); a reclaimed job
 * keeps its place in line (P1: recovery waited for the whole backlog); a
 * checked-out connection whose server goes away never crashes the process
 * (D6: a restart killed every worker); a worker started while the database is
 * unreachable waits for it instead of throwing (D10).
 */
import pg from "pg";
import { expect, it } from "vitest";
import { createPool } from "../../src/db/pool.js";
import { Store } from "../../src/db/store.js";
import { Skipq, silentLogger } from "../../src/index.js";
import { LeaderLease } from "../../src/maintenance/leader.js";
import { Reaper } from "../../src/maintenance/reaper.js";
import { clearJobs, DATABASE_URL, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("reaper-pool");

it("while another process holds the leader lease, a reaper pass reaps nothing and keeps no connection", async () => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const store = new Store(t.schema, pool);
  const other = new LeaderLease({
    store: t.skipq.store,
    holder: "other-process",
    leaseMs: 60_000,
    logger: silentLogger,
  });
  const mine = new LeaderLease({ store, holder: "this-process", leaseMs: 60_000, logger: silentLogger });
  const reaper = new Reaper({ store, intervalMs: 1000, logger: silentLogger, isLeader: () => mine.isLeader });
  try {
    expect(await other.tryAcquire()).toBe(true);
    expect(await mine.tryAcquire()).toBe(false);
    // More passes than the pool has connections: a leak would make the third one wait forever.
    for (let i = 0; i < 5; i++) expect((await reaper.runOnce()).leader).toBe(false);
    expect(pool.totalCount - pool.idleCount).toBe(0);
  } finally {
    await other.stop();
    await pool.end();
  }
});

it("a job reclaimed from an expired lease keeps its place ahead of jobs enqueued after it", async () => {
  const s = `"${t.schema}"`;
  await clearJobs(t.db, t.schema);
  // The stranded job was enqueued first and claimed; a backlog arrived after it.
  const { rows } = await t.db.query(
    `INSERT INTO ${s}.jobs (kind, status, attempts, lease, lease_expires_at, locked_at, run_at)
     VALUES ('k', 'running', 1, 1, now() - interval '1 second', now() - interval '1 minute', now() - interval '1 minute')
     RETURNING id`,
  );
  await t.db.query(
    `INSERT INTO ${s}.jobs (kind, run_at) SELECT 'k', now() - interval '30 seconds' FROM generate_series(1, 5)`,
  );
  const reaper = new Reaper({ store: t.skipq.store, intervalMs: 1000, logger: silentLogger });
  expect((await reaper.runOnce()).reaped.map((r) => r.id)).toEqual([rows[0].id]);
  const claimed = await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [["default"], 1, "w", 30_000]);
  expect(claimed.rows[0].id).toBe(rows[0].id);
});

it("a skipq pool's checked-out connection whose backend is terminated fails its next query instead of crashing the process", async () => {
  const pool = createPool(DATABASE_URL, 2, silentLogger, "skipq-chaos-fixes");
  const client = await pool.connect();
  try {
    const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
    // Listen before terminating: under load the connection can end before the terminate call returns.
    const ended = new Promise<void>((resolve) => client.once("end", () => resolve()));
    await t.db.query("SELECT pg_terminate_backend($1)", [rows[0]?.pid]);
    // Without a listener the 'error' event would be thrown as an uncaught exception here.
    await ended;
    await expect(client.query("SELECT 1")).rejects.toThrow();
  } finally {
    client.release(true);
    await pool.end();
  }
  expect(pool.totalCount).toBe(0);
});

it("a worker started while the database is unreachable waits for it, and stop() ends the wait", async () => {
  // Port 1 refuses connections: the database is down.
  const skipq = new Skipq({
    connectionString: "postgres://postgres@127.0.0.1:1/none",
    logger: silentLogger,
    schema: t.schema,
  });
  const worker = skipq.worker({ listen: false });
  const warnings: string[] = [];
  worker.on("warning", (_error, context) => warnings.push(context));
  let settled = false;
  const started = worker.start().then(() => {
    settled = true;
  });
  await until("two connection attempts", () => warnings.length >= 2, 10_000);
  expect(settled).toBe(false);
  expect(warnings.every((w) => w === "start")).toBe(true);
  await worker.stop();
  await started;
  expect(worker.running).toBe(0);
  await skipq.close();
});
