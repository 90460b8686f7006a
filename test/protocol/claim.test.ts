/**
 * The SQL protocol's claim function (for workers in other languages) honours
 * what the TypeScript claim honours without limits: paused queues are skipped,
 * and queues with limits are left to the TypeScript worker.
 */
import { readFileSync } from "node:fs";
import { beforeAll, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { useTestQueue } from "../helpers.js";

const t = useTestQueue("protocol_claim");
let admin: Admin;
beforeAll(async () => {
  admin = new Admin(t.skipq);
});

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

test("docs/protocol.md's claim with floors starts after the floor's job, and without floors from the queue's start", async () => {
  const doc = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
  const section = doc.slice(doc.indexOf("### Claims under a held snapshot"));
  const sql = /```sql\n([\s\S]*?)```/.exec(section)?.[1];
  expect(sql).toContain("skipq_claim_next");
  const statement = (sql as string)
    .replaceAll("skipq.", `"${t.schema}".`)
    .replace("$last_run_at", "$1")
    .replace("$last_id", "$2")
    .replace(/;\s*$/, "");
  // Three jobs due a minute ago, a second apart (a floor closer to now than 2 s would read from now - 2 s);
  // run_at as text: a JavaScript Date would drop its microseconds and put the floor before the job.
  const { rows: jobs } = await t.db.query(
    `INSERT INTO "${t.schema}".jobs (kind, queue, run_at)
     SELECT 'p', 'default', now() - interval '60 s' + i * interval '1 s' FROM generate_series(0, 2) i
     RETURNING id, run_at::text AS run_at`,
  );
  const ids = jobs.map((r) => r.id as string);
  const first = jobs[0];
  // Claiming with the first job as the floor (as if this worker had claimed it) takes the two after it.
  const { rows } = await t.db.query(statement, [first.run_at, first.id]);
  expect(rows.map((r) => r.id)).toEqual([ids[1], ids[2]]);
  expect(await claim("default")).toEqual([ids[0]]);
});
