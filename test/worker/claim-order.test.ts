/**
 * The claim: no overlap under many racing connections, never more rows than
 * its LIMIT, priority order, database-clock scheduling, paused queues, and an
 * index scan on the partial index whatever the history size.
 */
import pg from "pg";
import { expect, test } from "vitest";
import { DATABASE_URL, insertHistory, useTestQueue } from "../helpers.js";
import { nestedPlans } from "../plans.js";

const t = useTestQueue("claim");

async function claim(
  client: pg.ClientBase | pg.Pool,
  queue: string,
  limit: number,
  worker = "w",
): Promise<Array<{ id: string; lease: string }>> {
  const { rows } = await client.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [[queue], limit, worker, 30_000]);
  return rows;
}

async function race(connections: number, jobs: number, limit: number, queue: string) {
  await t.skipq.enqueueMany(Array.from({ length: jobs }, (_, i) => ({ job: "race", payload: { i }, queue })));
  const clients = Array.from({ length: connections }, () => new pg.Client({ connectionString: DATABASE_URL }));
  await Promise.all(clients.map((c) => c.connect()));
  const claimed: string[] = [];
  let maxRows = 0;
  try {
    await Promise.all(
      clients.map(async (c, n) => {
        for (;;) {
          const rows = await claim(c, queue, limit, `w${n}`);
          maxRows = Math.max(maxRows, rows.length);
          if (rows.length === 0) return;
          claimed.push(...rows.map((r) => r.id));
        }
      }),
    );
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
  return { claimed, maxRows };
}

test.each([
  [10, 50],
  [100, 30],
])("claims never overlap with %i connections racing on %i jobs", async (connections, jobs) => {
  const queue = `race-${connections}`;
  const { claimed } = await race(connections, jobs, 3, queue);
  expect(claimed).toHaveLength(jobs);
  expect(new Set(claimed).size).toBe(jobs);
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE queue = $1 AND status = 'running' AND attempts = 1`,
    [queue],
  );
  expect(rows[0].n).toBe(jobs);
});

test("no claim returns more rows than its limit", async () => {
  const { maxRows, claimed } = await race(20, 400, 7, "limit");
  expect(maxRows).toBeLessThanOrEqual(7);
  expect(maxRows).toBeGreaterThan(0);
  expect(new Set(claimed).size).toBe(400);
});

test("each claimed job gets its own lease token, drawn afresh by every claim", async () => {
  await t.skipq.enqueueMany(Array.from({ length: 4 }, () => ({ job: "lease", payload: {}, queue: "lease" })));
  const a = await claim(t.db, "lease", 2);
  const b = await claim(t.db, "lease", 2);
  expect(new Set([...a, ...b].map((r) => String(r.lease))).size).toBe(4);
});

test("higher priority is claimed first, then earlier run_at, then lower id", async () => {
  const low = await t.skipq.enqueue("p", {}, { queue: "prio", priority: 0 });
  const high = await t.skipq.enqueue("p", {}, { queue: "prio", priority: 10 });
  const low2 = await t.skipq.enqueue("p", {}, { queue: "prio", priority: 0 });
  const order = [];
  for (let i = 0; i < 3; i++) order.push((await claim(t.db, "prio", 1))[0]?.id);
  expect(order).toEqual([high.id, low.id, low2.id]);
});

test("across more priority levels than the claim walks one by one, claims follow priority, run_at, id, and skip future jobs", async () => {
  const jobs = `"${t.schema}".jobs`;
  // 60 levels (the claim visits 32 singly, then scans the rest): at each, two due jobs and one due tomorrow.
  await t.db.query(`INSERT INTO ${jobs} (queue, kind, priority, run_at)
                    SELECT 'levels', 'l', (i % 60) - 30,
                           CASE WHEN i % 3 = 0 THEN now() + interval '1 day' ELSE now() - (i % 7) * interval '1 second' END
                      FROM generate_series(1, 180) i`);
  const { rows: expected } = await t.db.query(
    `SELECT id::text FROM ${jobs} WHERE queue = 'levels' AND run_at <= now() ORDER BY priority DESC, run_at, id`,
  );
  const order: string[] = [];
  for (const limit of [1, 7, 50, 100]) order.push(...(await claim(t.db, "levels", limit)).map((r) => String(r.id)));
  expect(order).toEqual(expected.map((r) => r.id));
  expect(await claim(t.db, "levels", 10)).toEqual([]);
});

test("a job scheduled in the future is not claimed until the database clock reaches run_at", async () => {
  const { id } = await t.skipq.enqueue("future", {}, { queue: "future", delay: "1h" });
  expect(await claim(t.db, "future", 10)).toHaveLength(0);
  await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() - interval '1 second' WHERE id = $1`, [id]);
  expect((await claim(t.db, "future", 10)).map((r) => r.id)).toEqual([id]);
});

test("a paused queue is not claimed from until it is resumed", async () => {
  const { Admin } = await import("../../src/index.js");
  const admin = new Admin(t.skipq);
  await t.skipq.enqueue("paused", {}, { queue: "pausable" });
  await admin.pauseQueue("pausable");
  expect(await claim(t.db, "pausable", 10)).toHaveLength(0);
  await admin.resumeQueue("pausable");
  expect(await claim(t.db, "pausable", 10)).toHaveLength(1);
});

test("the claim is an index scan on the pending partial index even with a large history", async () => {
  await insertHistory(t.db, t.schema, 200000, { status: "completed", queue: "history" });
  await t.skipq.enqueueMany(Array.from({ length: 1000 }, () => ({ job: "hot", payload: {}, queue: "history" })));
  await t.db.query(`ANALYZE "${t.schema}".jobs`);
  const client = await t.db.connect();
  try {
    // Every statement the claim function runs (auto_explain), as their cached generic plans will be.
    await client.query("SET plan_cache_mode = force_generic_plan");
    const plans = await nestedPlans(client, t.skipq.store.sql.jobs.jobClaimBatch.text, [["history"], 10, "w", 30_000]);
    const scans = plans.flatMap((p) => p.nodes).filter((n) => n["Relation Name"] === "jobs");
    expect(scans.some((n) => n["Index Name"] === "jobs_pending_claim")).toBe(true);
    expect(scans.filter((n) => n["Node Type"] === "Seq Scan")).toEqual([]);
  } finally {
    await client.query("RESET plan_cache_mode").catch(() => undefined);
    client.release();
  }
});
