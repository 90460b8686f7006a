/**
 * A held snapshot (a long report, an idle-in-transaction session, a replica
 * with hot_standby_feedback) keeps the index entries of every job consumed
 * since it began alive: vacuum cannot remove them and scans cannot mark them
 * dead, so a claim that reads a queue from its start visits each one's heap
 * row. A worker's claims read each level from its floor (where its last claim
 * there stopped), so however many jobs were consumed under the snapshot, a
 * claim reads about as many index pages as with none; a sweep (no floors)
 * still reads them all, which is why sweeps are rare. The SQL protocol gets
 * the same by passing floors to skipq_claim_next.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { JobStore } from "../../src/db/jobStore.js";
import { silentLogger } from "../../src/index.js";
import { Claimer } from "../../src/worker/claimer.js";
import { DATABASE_URL, useTestQueue } from "../helpers.js";
import { nestedPlans } from "../plans.js";

const t = useTestQueue("held_snapshot");
let s: string;
let holder: pg.Client;
beforeAll(async () => {
  s = `"${t.schema}"`;
  holder = new pg.Client({ connectionString: DATABASE_URL });
  await holder.connect();
});
afterAll(async () => {
  await holder.query("ROLLBACK").catch(() => undefined);
  await holder.end();
});

/** Index pages of the pending-rows indexes that `text` read, summed over every statement it ran. */
async function pages(text: string, values: unknown[]): Promise<number> {
  const client = await t.db.connect();
  try {
    const plans = await nestedPlans(client, text, values);
    return plans
      .flatMap((p) => p.nodes)
      .filter((n) => n["Index Name"] === "jobs_pending_claim" || n["Index Name"] === "jobs_pending_age")
      .reduce((sum, n) => sum + (n["Shared Hit Blocks"] ?? 0) + (n["Shared Read Blocks"] ?? 0), 0);
  } finally {
    client.release();
  }
}

test("under a held snapshot, a worker's claim reads as few index pages after 20,000 jobs consumed as before them", async () => {
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, priority, run_at)
                    SELECT 'held', 'k', i % 2, now() - interval '1 hour' + i * interval '1 ms'
                      FROM generate_series(1, 30000) i`);
  await t.db.query(`VACUUM ANALYZE ${s}.jobs`);
  // Another session holds a snapshot from here on.
  await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
  await holder.query("SELECT count(*) FROM pg_class");
  const jobs = new JobStore(t.skipq.store);
  const claimer = new Claimer({
    jobs,
    queues: ["held"],
    workerId: "w",
    leaseMs: 60_000,
    agingMs: undefined,
    refreshMs: 60_000,
    sweepEveryMs: 3_600_000,
    logger: silentLogger,
  });
  const sql = t.skipq.store.sql.jobs;
  const floorsNow = () => claimer.floors.args(["held"], Date.now());
  const before = await pages(sql.jobClaimFrom.text, [
    ["held"],
    10,
    "probe",
    60_000,
    null,
    ...Object.values(floorsNow()),
  ]);
  // Consume 20,000 jobs: claimed with floors, completed (moved to history), under the held snapshot.
  for (let done = 0; done < 20_000; ) {
    const rows = await claimer.claim(500);
    await jobs.completeMany(
      rows.map((r) => r.id),
      rows.map((r) => r.lease),
    );
    done += rows.length;
  }
  const f = floorsNow();
  expect(f.queues.length).toBeGreaterThan(0);
  const withFloors = await pages(sql.jobClaimFrom.text, [
    ["held"],
    10,
    "probe",
    60_000,
    null,
    f.queues,
    f.levels,
    f.runAt,
    f.ids,
  ]);
  const sweep = await pages(sql.jobClaimBatch.text, [["held"], 10, "probe", 60_000]);
  // The same floors through the function a protocol worker calls.
  const protocol = await pages(`SELECT * FROM ${s}.skipq_claim_next($1, 10, 'py', 60000, NULL, $2, $3, $4, $5)`, [
    ["held"],
    f.queues,
    f.levels,
    f.runAt,
    f.ids,
  ]);
  expect(withFloors).toBeLessThanOrEqual(before + 10);
  expect(protocol).toBeLessThanOrEqual(before + 10);
  // Without floors the claim walks the 20,000 entries the snapshot keeps alive.
  expect(sweep).toBeGreaterThan(10 * withFloors);
});
