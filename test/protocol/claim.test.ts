/**
 * The SQL protocol's claim function (for workers in other languages) honours
 * what the TypeScript claim honours without limits: paused queues are skipped,
 * and queues with limits are left to the TypeScript worker.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { type TestQueue, testQueue } from "../helpers.js";

let t: TestQueue;
let admin: Admin;
beforeAll(async () => {
  t = await testQueue("protocol_claim");
  admin = new Admin(t.skipq);
});
afterAll(async () => t.cleanup());

async function claim(queue: string): Promise<string[]> {
  const { rows } = await t.db.query(`SELECT id FROM "${t.schema}".skipq_claim($1, 10, 'py-worker', 30000)`, [[queue]]);
  return rows.map((r) => r.id);
}

test("skipq_claim skips a paused queue until it is resumed", async () => {
  const { id } = await t.skipq.enqueue("p", {}, { queue: "proto-paused" });
  await admin.pauseQueue("proto-paused");
  expect(await claim("proto-paused")).toEqual([]);
  await admin.resumeQueue("proto-paused");
  expect(await claim("proto-paused")).toEqual([id]);
});

test("skipq_claim leaves a queue with concurrency limits to the TypeScript worker", async () => {
  await t.skipq.enqueue("p", {}, { queue: "proto-limited" });
  await admin.setQueueLimits("proto-limited", { concurrency: 1 });
  expect(await claim("proto-limited")).toEqual([]);
});

test("skipq_claim takes jobs in priority order, leased, from the queues named", async () => {
  const low = await t.skipq.enqueue("p", {}, { queue: "proto-order", priority: 0 });
  const high = await t.skipq.enqueue("p", {}, { queue: "proto-order", priority: 5 });
  await t.skipq.enqueue("p", {}, { queue: "proto-other" });
  expect(await claim("proto-order")).toEqual([high.id, low.id]);
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE queue = 'proto-order' AND status = 'running' AND lease IS NOT NULL`,
  );
  expect(rows[0].n).toBe(2);
});
