/**
 * Retention: the pruner deletes only terminal jobs older than their ages, in
 * batches; never pending or running ones; idempotency keys stay honoured for
 * keyRetention; one pass at a time across processes.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Pruner } from "../../src/index.js";
import { type TestQueue, testQueue } from "../helpers.js";

let t: TestQueue;
beforeAll(async () => {
  t = await testQueue("pruner");
});
afterAll(async () => {
  await t.cleanup();
});

/** Inserts a job in `status`, last updated `daysAgo` days ago on the database clock. */
async function job(label: string, status: string, daysAgo: number, key: string | null = null): Promise<string> {
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".jobs (kind, status, idempotency_key, updated_at, lease, lease_expires_at, payload)
     VALUES ('k', $1, $2, now() - $3 * interval '1 day',
             CASE WHEN $1 = 'running' THEN 1 END, CASE WHEN $1 = 'running' THEN now() END, jsonb_build_object('label', $4::text))
     RETURNING id`,
    [status, key, daysAgo, label],
  );
  return rows[0].id;
}

async function labels(): Promise<string[]> {
  const { rows } = await t.db.query(`SELECT payload->>'label' AS label FROM "${t.schema}".jobs ORDER BY id`);
  return rows.map((r) => r.label);
}

test("the pruner deletes only finished jobs past their age, in batches, and never a pending or running one", async () => {
  await t.db.query(`DELETE FROM "${t.schema}".jobs`);
  for (let i = 0; i < 5; i++) await job(`old-completed-${i}`, "completed", 2);
  await job("recent-completed", "completed", 1 / 24);
  await job("old-completed-with-key", "completed", 2, "order-1");
  await job("older-completed-with-key", "completed", 4, "order-2");
  await job("old-dead", "dead", 40);
  await job("recent-dead", "dead", 10);
  await job("old-cancelled", "cancelled", 40);
  await job("ancient-running", "running", 100);
  await job("ancient-pending", "pending", 100);

  const pruner = new Pruner(t.skipq, { completedAfter: "1d", deadAfter: "30d", keyRetention: "3d", batchSize: 2 });
  const result = await pruner.runOnce();
  expect(result).toEqual({ leader: true, completed: 6, dead: 1, cancelled: 1 });
  expect(await labels()).toEqual([
    "recent-completed",
    "old-completed-with-key",
    "recent-dead",
    "ancient-running",
    "ancient-pending",
  ]);
  expect(await pruner.runOnce()).toEqual({ leader: true, completed: 0, dead: 0, cancelled: 0 });
});

test("an idempotency key keeps refusing duplicates for keyRetention after its job completed", async () => {
  await t.db.query(`DELETE FROM "${t.schema}".jobs`);
  const first = await t.skipq.enqueue("send", { n: 1 }, { idempotencyKey: "invoice-7" });
  await t.db.query(`UPDATE "${t.schema}".jobs SET status = 'completed', updated_at = now() - interval '2 days'`);

  await new Pruner(t.skipq, { completedAfter: "1h", keyRetention: "3d" }).runOnce();
  const again = await t.skipq.enqueue("send", { n: 2 }, { idempotencyKey: "invoice-7" });
  expect(again).toEqual({ id: first.id, created: false });

  await new Pruner(t.skipq, { completedAfter: "1h", keyRetention: "1d" }).runOnce();
  const later = await t.skipq.enqueue("send", { n: 3 }, { idempotencyKey: "invoice-7" });
  expect(later.created).toBe(true);
});

test("a pruner that is not the maintenance leader deletes nothing and says so", async () => {
  await t.db.query(`DELETE FROM "${t.schema}".jobs`);
  await job("old-completed", "completed", 2);
  let leading = false;
  const pruner = new Pruner(t.skipq, {}, () => leading);
  expect(await pruner.runOnce()).toEqual({ leader: false, completed: 0, dead: 0, cancelled: 0 });
  expect(await labels()).toEqual(["old-completed"]);
  leading = true;
  expect((await pruner.runOnce()).completed).toBe(1);
});
