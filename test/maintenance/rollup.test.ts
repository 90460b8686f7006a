/**
 * The statistics rollup: closed minutes counted from history by outcome, the
 * wait at p50/p95, the current minute's depth sampled, idempotent passes,
 * 7-day retention, leader gating; and the series the dashboard charts read.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, silentLogger } from "../../src/index.js";
import { Rollup } from "../../src/maintenance/rollup.js";
import { type TestQueue, testQueue } from "../helpers.js";

let t: TestQueue;
let s: string;

beforeAll(async () => {
  t = await testQueue("rollup");
  s = `"${t.schema}"`;
});
afterAll(() => t.cleanup());

/** Finished jobs of `queue` `minutesAgo` minutes back (whole minutes), each having waited waits[i] ms. */
async function finished(queue: string, status: string, minutesAgo: number, waits: number[]) {
  await t.db.query(
    `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, locked_at,
                                   created_at, finished_at)
     SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')), $1, 'k', '{}', $2, 0, 1, 3,
            m - interval '1 hour', m - interval '1 hour' + w * interval '1 millisecond', m - interval '1 hour', m + interval '10 seconds'
       FROM unnest($4::int[]) AS w, LATERAL (SELECT date_trunc('minute', now()) - $3 * interval '1 minute' AS m) x`,
    [queue, status, minutesAgo, waits],
  );
}

test("a pass counts closed minutes by outcome, with the wait's p50 and p95, and samples the depth of the current minute", async () => {
  await finished("mail", "completed", 3, [100, 200, 300, 400, 500, 600, 700, 800, 900, 1000]);
  await finished("mail", "dead", 3, [50]);
  await finished("mail", "completed", 5, [10]);
  await finished("sms", "cancelled", 2, []);
  await t.db.query(`INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at,
                                                 created_at, finished_at)
                    VALUES (nextval(pg_get_serial_sequence('${s}.jobs', 'id')), 'sms', 'k', '{}', 'cancelled', 0, 0, 3, now(), now(),
                            date_trunc('minute', now()) - interval '2 minutes' + interval '5 seconds')`);
  for (let i = 0; i < 4; i++) await t.skipq.enqueue("k", {}, { queue: "mail" });
  await t.skipq.enqueue("k", {}, { queue: "mail", delay: "1h" });
  const rollup = new Rollup({ store: t.skipq.store, intervalMs: 60_000, logger: silentLogger });
  const first = await rollup.runOnce();
  expect(first.leader).toBe(true);

  const { rows } = await t.db.query(
    `SELECT queue, round(EXTRACT(EPOCH FROM date_trunc('minute', now()) - bucket) / 60)::int AS ago, completed, failed, cancelled,
            depth, running, wait_p50_ms, wait_p95_ms, closed
       FROM ${s}.queue_stats_minute ORDER BY queue, bucket`,
  );
  const mail3 = rows.find((r) => r.queue === "mail" && r.ago === 3);
  expect(mail3).toMatchObject({ completed: 10, failed: 1, cancelled: 0, closed: true });
  // p50 and p95 of the eleven waits (ten completed, one dead): 100..1000 and 50.
  expect(mail3.wait_p50_ms).toBeCloseTo(500, 0);
  expect(mail3.wait_p95_ms).toBeCloseTo(950, 0);
  expect(rows.find((r) => r.queue === "mail" && r.ago === 5)).toMatchObject({ completed: 1, wait_p50_ms: 10 });
  expect(rows.find((r) => r.queue === "sms" && r.ago === 2)).toMatchObject({ cancelled: 1, completed: 0 });
  // The current minute: 4 runnable (the delayed one is not), not closed.
  expect(rows.find((r) => r.queue === "mail" && r.ago === 0)).toMatchObject({ depth: 4, running: 0, closed: false });
  expect(rows.find((r) => r.queue === "sms" && r.ago === 0)).toMatchObject({ depth: 0 });

  // Passes are idempotent: the same minutes again give the same rows.
  await rollup.runOnce();
  const again = await t.db.query(
    `SELECT queue, bucket, completed, failed, cancelled FROM ${s}.queue_stats_minute WHERE closed ORDER BY 1, 2`,
  );
  expect(again.rows.map((r) => [r.queue, r.completed, r.failed, r.cancelled])).toEqual(
    rows.filter((r) => r.closed).map((r) => [r.queue, r.completed, r.failed, r.cancelled]),
  );

  // The series the charts read: 60 one-minute buckets, oldest first, every bucket present.
  const admin = new Admin(t.skipq);
  const hour = await admin.queueSeries("mail", "1h");
  expect(hour).toHaveLength(60);
  expect(hour.at(-4)).toMatchObject({ completed: 10, failed: 1 });
  expect(hour.at(-1)?.depth).toBe(4);
  expect(hour.reduce((a, p) => a + p.completed, 0)).toBe(11);
  expect(await admin.queueSeries(undefined, "24h")).toHaveLength(144);
  const week = await admin.queueSeries("mail", "7d");
  expect(week).toHaveLength(168);
  expect(week.reduce((a, p) => a + p.completed, 0)).toBe(11);
  await expect(admin.queueSeries("mail", "2h" as "1h")).rejects.toThrow(/range must be one of 1h, 24h, 7d/);
});

test("buckets older than 7 days are deleted, and a process that is not the leader does nothing", async () => {
  await t.db.query(
    `INSERT INTO ${s}.queue_stats_minute (queue, bucket, completed, closed) VALUES ('old', now() - interval '8 days', 5, true)`,
  );
  const follower = new Rollup({
    store: t.skipq.store,
    intervalMs: 60_000,
    logger: silentLogger,
    isLeader: () => false,
  });
  expect(await follower.runOnce()).toEqual({ leader: false, closed: 0, sampled: 0, deleted: 0 });
  const leader = new Rollup({ store: t.skipq.store, intervalMs: 60_000, logger: silentLogger });
  expect((await leader.runOnce()).deleted).toBe(1);
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM ${s}.queue_stats_minute WHERE queue = 'old'`);
  expect(rows[0].n).toBe(0);
});
