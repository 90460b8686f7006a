/**
 * The fair claim keeps its statements' generic plans (plan_cache_mode =
 * force_generic_plan on skipq_claim_fair): a plan made without seeing the
 * queue or the key must still read only that queue's, and that key's, rows.
 * Checked where a generic plan could go wrong — one key holding almost all of
 * the queue, a small key and keyless jobs beside it, another queue's backlog
 * and many small queues skewing the statistics — from the plans auto_explain
 * reports for the statements the function ran (test/plans.ts).
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

test("the fair claim's generic plans read one key's rows through the queue's indexes, under skew", async () => {
  await new Admin(t.skipq).setQueueLimits("fair", { fairness: {} });
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, concurrency_key)
                    SELECT 'fair', 'k', 'big' FROM generate_series(1, 30000)`);
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, concurrency_key)
                    SELECT 'fair', 'k', CASE WHEN i % 2 = 0 THEN 'small' END FROM generate_series(1, 40) i`);
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, concurrency_key)
                    SELECT 'other', 'k', CASE WHEN i % 2 = 0 THEN 'p' || (i % 100) END FROM generate_series(1, 30000) i`);
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind) SELECT 'q' || i, 'k' FROM generate_series(1, 200) i`);
  await t.db.query(`VACUUM ANALYZE ${s}.jobs`);
  const client = await t.db.connect();
  try {
    // Past the first calls of the session (auto mode's five custom plans), claims of 1 and of 10.
    for (let i = 0; i < 8; i++)
      await client.query(`SELECT * FROM ${s}.skipq_claim_fair($1, 5, 'w', 60000)`, [["fair"]]);
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
      // The plans were generic ones: the key fetch's index condition holds parameters, not the key's value.
      // The plans were generic ones, made once: each scan's condition holds parameters, not this call's values
      // (under plan_cache_mode auto, the keyless walk and the claim itself were planned afresh at every call).
      for (const node of reads) expect(node["Index Cond"], JSON.stringify(node)).toMatch(/\$\d/);
    }
  } finally {
    client.release();
  }
}, 300_000);
