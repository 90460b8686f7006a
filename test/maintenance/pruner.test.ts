/**
 * Retention on partitioned history: the pruner makes the coming partitions,
 * drops whole partitions past their age (completed and failed separately),
 * deletes row by row only what landed in a DEFAULT partition, never touches a
 * live job, keeps idempotency keys for keyRetention after their job finished
 * whatever happened to its history row, and does nothing unless it leads.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Pruner } from "../../src/index.js";
import { finishJobs, type TestQueue, testQueue, until } from "../helpers.js";

let t: TestQueue;
let s: string;
beforeAll(async () => {
  t = await testQueue("pruner");
  s = `"${t.schema}"`;
});
afterAll(async () => {
  await t.cleanup();
});

async function reset(): Promise<void> {
  await t.db.query(`TRUNCATE ${s}.jobs, ${s}.job_history, ${s}.job_keys`);
  const { rows } = await t.db.query(`SELECT name FROM ${s}.history_partitions`);
  for (const r of rows) await t.db.query(`DROP TABLE ${s}."${r.name}"`);
  await t.db.query(`TRUNCATE ${s}.history_partitions`);
}

/** A day-wide partition of `parent` for the day `daysAgo` days back (UTC), as the maintainer makes them. */
async function dayPartition(parent: "job_history_completed" | "job_history_failed", daysAgo: number): Promise<string> {
  const { rows } = await t.db.query(
    `SELECT ${s}.skipq_history_partition($1, d, d + interval '1 day') AS name
       FROM (SELECT date_bin(interval '1 day', now() - $2 * interval '1 day', '2000-01-01 00:00+00') AS d) x`,
    [parent, daysAgo],
  );
  return rows[0].name;
}

/** A finished job in history, finished `daysAgo` days ago (mid-day of that UTC day's partition). */
async function finished(label: string, status: "completed" | "dead" | "cancelled", daysAgo: number): Promise<void> {
  const { rows } = await t.db.query(
    `INSERT INTO ${s}.jobs (kind, payload) VALUES ('k', jsonb_build_object('label', $1::text)) RETURNING id`,
    [label],
  );
  await finishJobs(t.db, t.schema, [rows[0].id], status);
  await t.db.query(
    `UPDATE ${s}.job_history
        SET finished_at = date_bin(interval '1 day', now() - $2 * interval '1 day', '2000-01-01 00:00+00') + interval '12 hours'
      WHERE id = $1`,
    [rows[0].id, daysAgo],
  );
}

async function labels(): Promise<string[]> {
  const { rows } = await t.db.query(`SELECT payload->>'label' AS label FROM ${s}.all_jobs ORDER BY id`);
  return rows.map((r) => r.label);
}

test("retention drops whole partitions past their age, completed and failed on their own clocks, and never a live job", async () => {
  await reset();
  for (const days of [2, 4]) await dayPartition("job_history_completed", days);
  for (const days of [10, 40]) await dayPartition("job_history_failed", days);
  await finished("completed-2d", "completed", 2);
  await finished("completed-4d", "completed", 4);
  await finished("dead-10d", "dead", 10);
  await finished("dead-40d", "dead", 40);
  await finished("cancelled-40d", "cancelled", 40);
  await t.db.query(
    `INSERT INTO ${s}.jobs (kind, payload, run_at) VALUES ('k', '{"label": "ancient-pending"}', now() - interval '100 days')`,
  );
  await t.db.query(`INSERT INTO ${s}.jobs (kind, payload, status, lease, lease_expires_at)
                    VALUES ('k', '{"label": "running"}', 'running', 1, now() + interval '1 minute')`);

  const pruner = new Pruner(t.skipq, { completedAfter: "1d", deadAfter: "30d" });
  const result = await pruner.runOnce();
  expect(result.leader).toBe(true);
  expect(result.partitionsDropped).toHaveLength(3);
  expect(result).toMatchObject({ completed: 2, dead: 2 });
  expect(await labels()).toEqual(["dead-10d", "ancient-pending", "running"]);
  // The coming partitions exist: today's and two days ahead, for both outcomes.
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM ${s}.history_partitions WHERE upper > now() + interval '1 day'`,
  );
  expect(rows[0].n).toBeGreaterThanOrEqual(4);
  expect((await pruner.runOnce()).partitionsDropped).toEqual([]);
});

test("a finished job that landed in a DEFAULT partition (no dated partition for its day) is deleted row by row past its age", async () => {
  await reset();
  await finished("completed-5d-default", "completed", 5);
  await finished("completed-today", "completed", 0);
  const result = await new Pruner(t.skipq, { completedAfter: "1d" }).runOnce();
  expect(result.completed).toBe(1);
  expect(await labels()).toEqual(["completed-today"]);
});

test("an idempotency key keeps refusing duplicates for keyRetention after its job finished, even with no history kept", async () => {
  await reset();
  const first = await t.skipq.enqueue("send", { n: 1 }, { idempotencyKey: "invoice-7" });
  await finishJobs(t.db, t.schema, [first.id], "completed");
  await t.db.query(`UPDATE ${s}.job_keys SET finished_at = now() - interval '2 days'`);

  await new Pruner(t.skipq, { completedAfter: 0, keyRetention: "3d" }).runOnce();
  expect(await t.skipq.enqueue("send", { n: 2 }, { idempotencyKey: "invoice-7" })).toEqual({
    id: first.id,
    created: false,
  });

  const expired = await new Pruner(t.skipq, { completedAfter: 0, keyRetention: "1d" }).runOnce();
  expect(expired.keys).toBe(1);
  const later = await t.skipq.enqueue("send", { n: 3 }, { idempotencyKey: "invoice-7" });
  expect(later.created).toBe(true);
  await new Pruner(t.skipq, {}).runOnce();
});

test("with completedAfter 0 a completed job leaves no history row; dead ones are still kept", async () => {
  await reset();
  await new Pruner(t.skipq, { completedAfter: 0 }).runOnce();
  const w = t.skipq.worker({ queues: ["nohistory"], maintenance: false, listen: false });
  w.register("ok", () => undefined).register("bad", () => {
    throw new Error("boom");
  });
  await t.skipq.enqueue("ok", {}, { queue: "nohistory" });
  await t.skipq.enqueue("bad", {}, { queue: "nohistory", maxAttempts: 1 });
  expect(await w.runOnce()).toBe(2);
  const { rows } = await t.db.query(`SELECT status FROM ${s}.all_jobs WHERE queue = 'nohistory' ORDER BY id`);
  expect(rows.map((r) => r.status)).toEqual(["dead"]);
  await new Pruner(t.skipq, {}).runOnce();
  await t.skipq.enqueue("ok", {}, { queue: "nohistory" });
  expect(await w.runOnce()).toBe(1);
  const after = await t.db.query(`SELECT status FROM ${s}.all_jobs WHERE queue = 'nohistory' ORDER BY id`);
  expect(after.rows.map((r) => r.status)).toEqual(["dead", "completed"]);
  await w.stop();
});

test("a pruner that is not the maintenance leader does nothing and says so", async () => {
  await reset();
  await dayPartition("job_history_completed", 3);
  await finished("completed-3d", "completed", 3);
  let leading = false;
  const pruner = new Pruner(t.skipq, {}, () => leading);
  expect(await pruner.runOnce()).toEqual({ leader: false, partitionsDropped: [], completed: 0, dead: 0, keys: 0 });
  expect(await labels()).toEqual(["completed-3d"]);
  leading = true;
  expect((await pruner.runOnce()).completed).toBe(1);
});

test("making the partition that holds now() while an outcome is being written routes that outcome into it, with no partition-constraint error", async () => {
  await reset();
  const maker = await t.db.connect();
  const writer = await t.db.connect();
  try {
    const { rows: pid } = await writer.query("SELECT pg_backend_pid() AS pid");
    await maker.query("BEGIN");
    const name = await (async () => {
      const { rows } = await maker.query(
        `SELECT ${s}.skipq_history_partition('job_history_completed', d, d + interval '1 day') AS name
           FROM (SELECT date_bin(interval '1 day', now(), '2000-01-01 00:00+00') AS d) x`,
      );
      return rows[0].name as string;
    })();
    // An outcome's history row, written while the partition is being made (found DEFAULT only, before the fix).
    const write = writer.query(
      `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at)
       VALUES (424242, 'q', 'k', '{}', 'completed', 0, 1, 1, now(), now(), now())`,
    );
    await until("the outcome waits for the partition's lock", async () => {
      const { rows } = await t.db.query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [pid[0].pid]);
      return rows[0]?.wait_event_type === "Lock";
    });
    await maker.query("COMMIT");
    await write;
    const { rows } = await t.db.query(
      `SELECT tableoid::regclass::text AS part FROM ${s}.job_history WHERE id = 424242`,
    );
    expect(rows[0].part).toBe(`${t.schema}.${name}`);
  } finally {
    await maker.query("ROLLBACK").catch(() => undefined);
    maker.release();
    writer.release();
  }
});
