/**
 * The fair claim keeps its statements' generic plans (plan_cache_mode =
 * force_generic_plan on skipq_claim_fair): a plan made without seeing the
 * queue or the key must still read only that queue's, and that key's, rows.
 * Checked where a generic plan went wrong: plans made while the queue held one
 * key. Its statistics then said every row has that key, so reading the queue's
 * claim order and filtering the key out looked as cheap as the key's own index,
 * and a new key's first claim read the whole backlog (100,000 entries: ~50 ms a
 * statement). Migration 0022 sets the key column's n_distinct, so that a key is
 * never estimated as all rows. Another queue's keyless backlog and many small
 * queues skew the statistics too. The plans are the ones auto_explain reports for the
 * statements the function ran (test/plans.ts).
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { type TestQueue, testQueue } from "../helpers.js";
import { nestedPlans } from "../plans.js";

let t: TestQueue;
let s: string;
beforeAll(async () => {
  t = await testQueue("fair_plans");
  s = `"${t.schema}"`;
}, 300_000);
afterAll(async () => {
  await t.cleanup();
}, 300_000);

test("the fair claim's generic plans read one key's rows, though made while the queue held one key", async () => {
  await new Admin(t.skipq).setQueueLimits("fair", { fairness: {} });
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, concurrency_key)
                    SELECT 'fair', 'k', 'big' FROM generate_series(1, 30000)`);
  // The statistics see one key in the table when the session makes its plans.
  await t.db.query(`VACUUM ANALYZE ${s}.jobs`);
  const client = await t.db.connect();
  try {
    for (let i = 0; i < 8; i++)
      await client.query(`SELECT * FROM ${s}.skipq_claim_fair($1, 5, 'w', 60000)`, [["fair"]]);
    // New tenants arrive behind the big key's backlog: a small key, and jobs without a key.
    await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, concurrency_key)
                      SELECT 'fair', 'k', CASE WHEN i % 2 = 0 THEN 'small' END FROM generate_series(1, 40) i`);
    for (const n of [1, 10, 10]) {
      const plans = await nestedPlans(client, `SELECT * FROM ${s}.skipq_claim_fair($1, $2, 'probe', 60000)`, [
        ["fair"],
        n,
      ]);
      const reads = plans
        .flatMap((p) => p.nodes)
        .filter((node) => node["Relation Name"] === "jobs" && node["Node Type"].endsWith("Scan"));
      // No statement scans the table, and none reads more than a stretch of one index.
      expect(reads.filter((node) => node["Node Type"] === "Seq Scan")).toEqual([]);
      for (const node of reads) {
        expect(node["Index Name"], JSON.stringify(node)).toMatch(/^jobs_(pending_key|pending_claim|pkey)$/);
        expect(node["Rows Removed by Filter"] ?? 0, JSON.stringify(node)).toBeLessThanOrEqual(300);
      }
      const blocks = reads.reduce(
        (sum, node) => sum + (node["Shared Hit Blocks"] ?? 0) + (node["Shared Read Blocks"] ?? 0),
        0,
      );
      expect(blocks).toBeLessThanOrEqual(200);
      // The plans were generic ones, made once: each scan's condition holds parameters, not this call's values
      // (under plan_cache_mode auto, the keyless walk and the claim itself were planned afresh at every call).
      for (const node of reads) expect(node["Index Cond"], JSON.stringify(node)).toMatch(/\$\d/);
    }
  } finally {
    client.release();
  }
}, 300_000);
