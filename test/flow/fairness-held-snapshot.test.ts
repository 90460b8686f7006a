/**
 * The fair claim under a held snapshot: each key is read from its floor (the
 * last job claimed there), so the index entries of the jobs it consumed —
 * which a held snapshot keeps alive — are not stepped over again; so is the
 * keyless key's walk of jobs_pending_claim. Pages of both indexes read by one
 * claim, from auto_explain (test/plans.ts).
 */
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { DATABASE_URL, type TestQueue, testQueue } from "../helpers.js";
import { nestedPlans } from "../plans.js";

let t: TestQueue;
let s: string;
let holder: pg.Client;
beforeAll(async () => {
  t = await testQueue("fair_held");
  s = `"${t.schema}"`;
  holder = new pg.Client({ connectionString: DATABASE_URL });
  await holder.connect();
}, 300_000);
afterAll(async () => {
  await holder.query("ROLLBACK").catch(() => undefined);
  await holder.end();
  await t.cleanup();
}, 300_000);

/** Index pages (jobs_pending_key, jobs_pending_claim) one fair claim of 10 reads (no sweep unless `sweep`). */
async function pages(sweep: boolean): Promise<number> {
  // Not due a timed sweep: this measures the claims between sweeps.
  await t.db.query(`UPDATE ${s}.fair_keys SET swept_at = now()`);
  const client = await t.db.connect();
  try {
    const plans = await nestedPlans(client, `SELECT * FROM ${s}.skipq_claim_fair($1, 10, 'probe', 60000, $2)`, [
      ["fair"],
      sweep,
    ]);
    return plans
      .flatMap((p) => p.nodes)
      .filter((n) => n["Index Name"] === "jobs_pending_key" || n["Index Name"] === "jobs_pending_claim")
      .reduce((sum, n) => sum + (n["Shared Hit Blocks"] ?? 0) + (n["Shared Read Blocks"] ?? 0), 0);
  } finally {
    client.release();
  }
}

test("under a held snapshot, a fair claim reads as few index pages after 20,000 jobs consumed as before them", async () => {
  await new Admin(t.skipq).setQueueLimits("fair", { fairness: {} });
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, concurrency_key, run_at)
                    SELECT 'fair', 'k', CASE WHEN i % 10 = 0 THEN 'small-' || (i % 7) WHEN i % 10 = 5 THEN NULL ELSE 'big' END,
                           now() - interval '1 hour' + i * interval '1 ms'
                      FROM generate_series(1, 40000) i`);
  await t.db.query(`VACUUM ANALYZE ${s}.jobs`);
  // Every key met once (floors set), then another session holds a snapshot from here on.
  await t.db.query(`SELECT * FROM ${s}.skipq_claim_fair($1, 100, 'w', 60000)`, [["fair"]]);
  await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  await holder.query("SELECT count(*) FROM pg_class");
  const before = await pages(false);
  // Consume 20,000 jobs, most of them the big key's: claimed and completed (moved to history).
  for (let done = 0; done < 20_000; ) {
    const { rows } = await t.db.query(`SELECT id, lease FROM ${s}.skipq_claim_fair($1, 500, 'w', 60000)`, [["fair"]]);
    await t.skipq.jobs.completeMany(
      rows.map((r) => r.id),
      rows.map((r) => r.lease),
    );
    done += rows.length;
  }
  const after = await pages(false);
  const swept = await pages(true);
  expect(after).toBeLessThanOrEqual(before + 10);
  // The measure can tell: a sweep (every key from its start) steps over what was consumed.
  expect(swept).toBeGreaterThan(after + 50);
}, 300_000);
