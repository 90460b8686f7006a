/**
 * Retention on partitioned history: the pruner makes the coming partitions,
 * drops whole partitions past their age (completed and failed separately),
 * deletes row by row only what landed in a DEFAULT partition, never touches a
 * live job, keeps idempotency keys for keyRetention after their job finished
 * whatever happened to its history row, and does nothing unless it leads.
 */
import { beforeAll, expect, test } from "vitest";
import { Pruner, RetentionError } from "../../src/index.js";
import { PURPOSES } from "../../src/maintenance/pruner.js";
import { finishJobs, testQueue, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("pruner");
let s: string;
beforeAll(async () => {
  s = `"${t.schema}"`;
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
  expect(await pruner.runOnce()).toEqual({
    leader: false,
    purposes: {},
    partitionsDropped: [],
    completed: 0,
    dead: 0,
    keys: 0,
  });
  expect(await labels()).toEqual(["completed-3d"]);
  leading = true;
  expect((await pruner.runOnce()).completed).toBe(1);
});

test("a retention purpose that fails (its table gone) stops none of the others; the pass throws a RetentionError naming it, with every purpose's result", async () => {
  await reset();
  await finished("completed-5d-default", "completed", 5);
  const keyed = await t.skipq.enqueue("send", {}, { idempotencyKey: "purpose-key" });
  await finishJobs(t.db, t.schema, [keyed.id], "completed");
  await t.db.query(`UPDATE ${s}.job_keys SET finished_at = now() - interval '2 days'`);
  await t.db.query(`ALTER TABLE ${s}.outbox RENAME TO outbox_away`);
  let thrown: unknown;
  try {
    await new Pruner(t.skipq, { completedAfter: "1d", keyRetention: "1d" }).runOnce();
  } catch (error) {
    thrown = error;
  } finally {
    await t.db.query(`ALTER TABLE ${s}.outbox_away RENAME TO outbox`);
  }
  expect(thrown).toBeInstanceOf(RetentionError);
  const error = thrown as RetentionError;
  expect(error.code).toBe("SKIPQ_RETENTION_FAILED");
  expect([...error.failures.keys()]).toEqual(["outbox"]);
  expect(error.message).toMatch(/^retention: 1 of 10 purposes failed, the others ran \(outbox: .*outbox/);
  // Every purpose ran, those before the failed one and those after it.
  expect(Object.keys(error.result.purposes)).toEqual([...PURPOSES]);
  // A missing table reads as a schema not migrated (store.query).
  expect(error.result.purposes.outbox?.error).toMatchObject({ code: "SKIPQ_SCHEMA_NOT_MIGRATED" });
  expect(error.result.purposes.history).toEqual({ count: 1 });
  expect(error.result.purposes.keys).toEqual({ count: 1 });
  expect(error.result).toMatchObject({ leader: true, completed: 1, keys: 1 });
  expect(await labels()).not.toContain("completed-5d-default");
  const again = await new Pruner(t.skipq, {}).runOnce();
  expect(Object.entries(again.purposes).filter(([, p]) => p.error !== undefined)).toEqual([]);
});

test("a new schema has the partitions of today and the next two days before any worker runs", async () => {
  const fresh = await testQueue("pruner_fresh");
  try {
    const { rows } = await fresh.db.query(
      `SELECT parent, count(*)::int AS n, min(lower) <= now() AS covers_now, max(upper) > now() + interval '2 days' AS ahead
         FROM "${fresh.schema}".history_partitions GROUP BY parent ORDER BY parent`,
    );
    expect(rows).toEqual([
      { parent: "job_history_completed", n: 3, covers_now: true, ahead: true },
      { parent: "job_history_failed", n: 3, covers_now: true, ahead: true },
    ]);
  } finally {
    await fresh.cleanup();
  }
});

test("the maintainer never makes a partition whose range has begun: outcomes may be writing into it", async () => {
  await reset();
  const { rows } = await t.db.query(
    `SELECT ${s}.skipq_history_partition(p, d, d + interval '1 day') AS name
       FROM unnest(ARRAY['job_history_completed', 'job_history_failed']) AS p,
            (SELECT date_bin(interval '1 day', now(), '2000-01-01 00:00+00') AS d) x`,
  );
  expect(rows).toEqual([{ name: null }, { name: null }]);
  await new Pruner(t.skipq).runOnce();
  const { rows: made } = await t.db.query(`SELECT min(lower) > now() AS future FROM ${s}.history_partitions`);
  expect(made).toEqual([{ future: true }]);
});

test("making partitions while an outcome transaction writes both history tables neither waits for it nor blocks it", async () => {
  await reset();
  // Today's partitions, as the migration makes them; the coming ones are left to the pruner.
  await t.db.query(
    `SELECT ${s}.skipq_history_make(p, d, d + interval '1 day')
       FROM unnest(ARRAY['job_history_completed', 'job_history_failed']) AS p,
            (SELECT date_bin(interval '1 day', now(), '2000-01-01 00:00+00') AS d) x`,
  );
  const outcome = await t.db.connect();
  try {
    await outcome.query("BEGIN");
    for (const [id, status] of [
      [424241, "dead"],
      [424242, "completed"],
    ] as const)
      await outcome.query(
        `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at)
         VALUES ($1, 'q', 'k', '{}', $2, 0, 1, 1, now(), now(), now())`,
        [id, status],
      );
    // The open outcome holds both history tables; the pass must not need a lock that conflicts with it.
    const pass = await new Pruner(t.skipq).runOnce();
    expect(pass.leader).toBe(true);
    const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM ${s}.history_partitions WHERE lower > now()`);
    expect(rows[0].n).toBeGreaterThanOrEqual(2);
    await outcome.query("COMMIT");
    const { rows: landed } = await t.db.query(
      `SELECT tableoid::regclass::text AS part FROM ${s}.job_history WHERE id IN (424241, 424242) ORDER BY id`,
    );
    expect(landed.map((r) => r.part.endsWith("_default"))).toEqual([false, false]);
  } finally {
    await outcome.query("ROLLBACK").catch(() => undefined);
    outcome.release();
  }
});

test("with no partition for today (outcomes land in DEFAULT), a maintainer pass and an outcome transaction writing both history tables never deadlock", async () => {
  await reset();
  const outcome = await t.db.connect();
  const row = (id: number, status: string) =>
    outcome.query(
      `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at)
       VALUES ($1, 'q', 'k', '{}', $2, 0, 1, 1, now(), now(), now())`,
      [id, status],
    );
  try {
    await outcome.query("BEGIN");
    await row(424251, "dead");
    const pass = new Pruner(t.skipq).runOnce();
    await until("the pass waits for the outcome's lock on a DEFAULT partition", async () => {
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
          WHERE NOT l.granted AND c.relname LIKE 'job_history_%_default'
            AND c.relnamespace = $1::regnamespace`,
        [t.schema],
      );
      return rows[0].n > 0;
    });
    await row(424252, "completed");
    await outcome.query("COMMIT");
    expect((await pass).leader).toBe(true);
    const { rows } = await t.db.query(`SELECT id::int FROM ${s}.job_history WHERE id IN (424251, 424252) ORDER BY id`);
    expect(rows.map((r) => r.id)).toEqual([424251, 424252]);
  } finally {
    await outcome.query("ROLLBACK").catch(() => undefined);
    outcome.release();
  }
});
