/**
 * The claim statements: priority aging keeps the claim an index scan and
 * bounds a low-priority job's wait under a flood; the limited claim never
 * scans the whole table; paused keys are honoured.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { limitedClaimText } from "../../src/db/sql/flow.js";
import { Admin, type Job } from "../../src/index.js";
import { type TestQueue, testQueue, until } from "../helpers.js";

let t: TestQueue;
beforeAll(async () => {
  t = await testQueue("claimer");
});
afterAll(async () => {
  await t.cleanup();
});

type PlanNode = { "Node Type": string; "Relation Name"?: string; "Index Name"?: string; Plans?: PlanNode[] };
function nodes(plan: PlanNode): PlanNode[] {
  return [plan, ...(plan.Plans ?? []).flatMap(nodes)];
}
async function explain(text: string, values: unknown[] = []): Promise<PlanNode[]> {
  const { rows } = await t.db.query(`EXPLAIN (FORMAT JSON) ${text}`, values);
  return nodes(rows[0]["QUERY PLAN"][0].Plan);
}
const scansOfJobs = (plan: PlanNode[]) => plan.filter((n) => n["Relation Name"] === "jobs");
/** Every use of a pending-rows index is an ordered Index Scan (never a bitmap scan feeding a sort). */
function pendingScans(plan: PlanNode[]): string[] {
  return plan
    .filter((n) => n["Index Name"] === "jobs_pending_claim" || n["Index Name"] === "jobs_pending_age")
    .map((n) => `${n["Node Type"]} ${n["Index Name"]}`);
}

test("the plain, aging and limited claims are index scans, never a scan of the whole jobs table", async () => {
  const jobs = `"${t.schema}".jobs`;
  // A long history of finished jobs and a deep backlog: an ordered index scan stops after LIMIT rows,
  // a bitmap scan + sort would read all 20,000 pending rows on every claim.
  await t.db.query(`INSERT INTO ${jobs} (kind, status, completed_at, concurrency_key)
                    SELECT 'old', 'completed', now(), 'c' || (i % 50) FROM generate_series(1, 50000) i`);
  await t.db.query(`INSERT INTO ${jobs} (kind, priority, run_at, concurrency_key)
                    SELECT 'new', i % 5, now() - (i % 600) * interval '1 second', 'c' || (i % 50)
                      FROM generate_series(1, 20000) i`);
  await t.db.query(`ANALYZE ${jobs}`);
  const sql = t.skipq.store.sql.jobs;

  const plain = await explain(sql.jobClaimBatch.text, [["default"], 10, "w", 30000]);
  expect(scansOfJobs(plain).map((n) => n["Node Type"])).not.toContain("Seq Scan");
  expect(pendingScans(plain)).toEqual(["Index Scan jobs_pending_claim"]);
  expect(plain.map((n) => n["Node Type"])).not.toContain("Sort");

  const aged = await explain(sql.jobClaimBatchAged.text, [["default"], 10, "w", 30000, 60000]);
  expect(scansOfJobs(aged).map((n) => n["Node Type"])).not.toContain("Seq Scan");
  expect(pendingScans(aged).sort()).toEqual(["Index Scan jobs_pending_age", "Index Scan jobs_pending_claim"]);
  expect(aged.map((n) => n["Node Type"])).not.toContain("Sort");

  await new Admin(t.skipq).setQueueLimits("default", {
    concurrency: 5,
    keyConcurrency: 1,
    rate: { limit: 100, window: "1s" },
  });
  const text = limitedClaimText({
    schema: `"${t.schema}"`,
    schemaName: t.schema,
    freeQueues: ["other"],
    limitedQueues: ["default"],
    limit: 10,
    workerId: "w",
    leaseMs: 30000,
    agingMs: 60000,
    lookahead: 100,
  });
  const claim = text.slice(text.indexOf("WITH"));
  const limited = await explain(claim);
  expect(scansOfJobs(limited).map((n) => n["Node Type"])).not.toContain("Seq Scan");
  // Limited queue (two scans, aging on) and the unlimited queue "other" (two scans): all ordered index scans.
  expect(pendingScans(limited).sort()).toEqual([
    "Index Scan jobs_pending_age",
    "Index Scan jobs_pending_age",
    "Index Scan jobs_pending_claim",
    "Index Scan jobs_pending_claim",
  ]);
  await new Admin(t.skipq).setQueueLimits("default", {});
  await t.db.query(`DELETE FROM ${jobs}`);
});

test("outcome and heartbeat statements find their rows by primary key, never by scanning the history", async () => {
  const jobs = `"${t.schema}".jobs`;
  await t.db.query(`INSERT INTO ${jobs} (kind, status, completed_at)
                    SELECT 'old', 'completed', now() FROM generate_series(1, 50000)`);
  await t.db.query(`ANALYZE ${jobs}`);
  const sql = t.skipq.store.sql.jobs;
  // 2,000 ids, the default outcome batch: joined to unnest(...) alone, the planner scans every row.
  const ids = Array.from({ length: 2000 }, (_, i) => String(i + 1));
  const leases = ids.map(() => "1");
  const statements = {
    jobCompleteMany: [ids, leases],
    jobSettleMany: [ids, leases, ids.map(() => "retry"), ids.map(() => "e"), ids.map(() => 0), ids.map(() => "f")],
    jobHeartbeatMany: [ids, leases, 30000],
  } as const;
  for (const [name, values] of Object.entries(statements)) {
    const plan = await explain(sql[name as keyof typeof statements].text, [...values]);
    const scans = scansOfJobs(plan).filter((n) => n["Node Type"] !== "ModifyTable");
    expect(scans.map((n) => `${name}: ${n["Node Type"]} ${n["Index Name"] ?? ""}`.trim())).toEqual([
      `${name}: Index Scan jobs_pkey`,
    ]);
  }
  await t.db.query(`DELETE FROM ${jobs}`);
});

test("under a steady high-priority flood, a low-priority job that waited the aging threshold is overtaken by no younger job", async () => {
  // Every high-priority job enqueues its replacement as it starts: the flood never ends.
  const flood = async () => {
    await t.skipq.enqueue("high", {}, { priority: 10 });
    await new Promise((r) => setTimeout(r, 5));
  };
  await t.skipq.enqueueMany(Array.from({ length: 20 }, () => ({ job: "high", payload: {}, priority: 10 })));
  const options = { concurrency: 2, pollInterval: 100, listen: false, maintenance: false } as const;

  // Strict priority: the low job never gets a turn.
  const strict = t.skipq
    .worker(options)
    .register("high", flood)
    .register("low", async () => {});
  let highRuns = 0;
  strict.on("jobStart", () => highRuns++);
  await strict.start();
  const starved = await t.skipq.enqueue("low", {}, { priority: 0 });
  await until("the flood ran a while", () => highRuns >= 150);
  await strict.stop();
  const job = await new Admin(t.skipq).getJob(starved.id);
  expect(job?.status).toBe("pending");
  await new Admin(t.skipq).cancelJob(starved.id);

  // With aging at 300 ms: the low job runs 300 ms after it became runnable, plus one claim cycle.
  const aging = t.skipq
    .worker({ ...options, priorityAging: "300ms" })
    .register("high", flood)
    .register("low", async () => {});
  const lowStarted: Job[] = [];
  aging.on("jobStart", (j) => {
    if (j.kind === "low") lowStarted.push(j);
    else highRuns++;
  });
  await aging.start();
  highRuns = 0;
  await until("the flood is running", () => highRuns >= 20);
  const low = await t.skipq.enqueue("low", {}, { priority: 0 });
  await until("the low-priority job started", () => lowStarted.length === 1, 10_000);
  await aging.stop();
  const jobs = `"${t.schema}".jobs`;
  const { rows } = await t.db.query(
    `SELECT EXTRACT(EPOCH FROM low.locked_at - low.run_at) * 1000 AS waited_ms,
            (SELECT count(*)::int FROM ${jobs} h
              WHERE h.kind = 'high' AND h.run_at > low.run_at
                AND h.locked_at > low.run_at + interval '300 ms' AND h.locked_at < low.locked_at)
              AS overtaken_after_aging
       FROM ${jobs} low WHERE low.id = $1`,
    [low.id],
  );
  // Not before the threshold (strict priority until then)...
  expect(Number(rows[0].waited_ms)).toBeGreaterThanOrEqual(300);
  // ...and once aged, nothing that had waited less overtook it (aged jobs run oldest first, whatever their priority).
  expect(rows[0].overtaken_after_aging).toBe(0);
  // (Wall clock: 300 ms + about one claim cycle; generous, as CI machines are loaded.)
  expect(Number(rows[0].waited_ms)).toBeLessThan(5000);
});
