/**
 * The claim statements' plans: every claim (plain, aging, limited, and the
 * SQL protocol's) reads each queue it was asked for through one ordered index
 * scan that stops after LIMIT rows, and never a row of another queue or of the
 * history; outcomes find rows by primary key. And priority aging bounds a
 * low-priority job's wait under a flood.
 */
import { expect, test } from "vitest";
import { limitedClaimText } from "../../src/db/sql/flow.js";
import { Admin, type Job } from "../../src/index.js";
import { insertHistory, until, useTestQueue } from "../helpers.js";
import { nestedPlans, nodes, type PlanNode } from "../plans.js";

const t = useTestQueue("claimer");

/** The plan of `text`; with `analyze`, run (and rolled back) for real, with actual row counts. */
async function explain(text: string, values: unknown[] = [], analyze = false): Promise<PlanNode[]> {
  const client = await t.db.connect();
  try {
    await client.query("BEGIN");
    const { rows } = await client.query(`EXPLAIN (FORMAT JSON${analyze ? ", ANALYZE, BUFFERS" : ""}) ${text}`, values);
    return nodes(rows[0]["QUERY PLAN"][0].Plan);
  } finally {
    await client.query("ROLLBACK");
    client.release();
  }
}
/**
 * Every node of every statement a claim ran, the claim function's included (auto_explain), run and rolled
 * back. `generic`: with plan_cache_mode = force_generic_plan, as the function's cached plans are once reused.
 */
async function claimPlan(text: string, values: unknown[], generic = false): Promise<PlanNode[]> {
  const client = await t.db.connect();
  try {
    if (generic) await client.query("SET plan_cache_mode = force_generic_plan");
    return (await nestedPlans(client, text, values)).flatMap((p) => p.nodes);
  } finally {
    await client.query("RESET plan_cache_mode").catch(() => undefined);
    client.release();
  }
}
const scansOfJobs = (plan: PlanNode[]) =>
  plan.filter((n) => n["Relation Name"] === "jobs" && n["Node Type"] !== "ModifyTable");
/**
 * The kinds of use of the pending-rows indexes: each an ordered index scan by queue (never a bitmap
 * scan feeding a sort). The priority order also descends jobs_pending_claim once per priority level
 * (an index-only scan reading one entry); those count as the same kind.
 */
function pendingScans(plan: PlanNode[]): string[] {
  const kinds = plan
    .filter((n) => n["Index Name"] === "jobs_pending_claim" || n["Index Name"] === "jobs_pending_age")
    .map(
      (n) =>
        `${n["Node Type"].replace("Index Only Scan", "Index Scan")} ${n["Index Name"]}${n["Index Cond"]?.includes("queue =") ? " by queue" : ""}`,
    );
  return [...new Set(kinds)].sort();
}
/** Index pages the claim touched in the pending-rows indexes (with EXPLAIN's BUFFERS). */
const pendingPages = (plan: PlanNode[]) =>
  plan
    .filter((n) => n["Index Name"] === "jobs_pending_claim" || n["Index Name"] === "jobs_pending_age")
    .reduce((sum, n) => sum + (n["Shared Hit Blocks"] ?? 0) + (n["Shared Read Blocks"] ?? 0), 0);
/** Rows the claim read from the jobs table's pending indexes (all loops). */
const pendingRowsRead = (plan: PlanNode[]) =>
  plan
    .filter((n) => n["Index Name"] === "jobs_pending_claim" || n["Index Name"] === "jobs_pending_age")
    .reduce(
      (sum, n) => sum + (n["Actual Rows"] ?? 0) * (n["Actual Loops"] ?? 1) + (n["Rows Removed by Filter"] ?? 0),
      0,
    );

async function resetJobs(): Promise<void> {
  await t.db.query(`TRUNCATE "${t.schema}".jobs, "${t.schema}".job_history, "${t.schema}".queues`);
}

test("no claim reads a row of a queue it was not asked for: 50,000 pending in an idle queue cost a claim of another nothing", async () => {
  await resetJobs();
  const jobs = `"${t.schema}".jobs`;
  // A deep backlog in a queue nobody claims from, with higher priorities; a little work in "hot" and "warm";
  // and a long history, which claims never see.
  await t.db.query(`INSERT INTO ${jobs} (queue, kind, priority, concurrency_key)
                    SELECT 'idle', 'bulk', 5, 'c' || (i % 50) FROM generate_series(1, 50000) i`);
  await t.db.query(`INSERT INTO ${jobs} (queue, kind, priority, run_at, concurrency_key)
                    SELECT CASE WHEN i % 2 = 0 THEN 'hot' ELSE 'warm' END, 'new', i % 3,
                           now() - (i % 600) * interval '1 second', 'c' || (i % 50)
                      FROM generate_series(1, 200) i`);
  await insertHistory(t.db, t.schema, 50000, { status: "completed" });
  await t.db.query(`ANALYZE ${jobs}`);
  const sql = t.skipq.store.sql.jobs;

  const plain = await claimPlan(sql.jobClaimBatch.text, [["hot", "warm"], 10, "w", 30000]);
  expect(pendingScans(plain)).toEqual(["Index Scan jobs_pending_claim by queue"]);
  expect(scansOfJobs(plain).map((n) => n["Node Type"])).not.toContain("Seq Scan");
  // At most LIMIT rows per queue asked for, plus one entry per priority level (3) found and one to see
  // there are no more: not one of the 50,000 idle rows.
  expect(pendingRowsRead(plain)).toBeLessThanOrEqual(2 * (10 + 3));

  // Most jobs of both queues waited over a minute: the aged scan fills each queue's batch, and no level is read.
  const aged = await claimPlan(sql.jobClaimBatchAged.text, [["hot", "warm"], 10, "w", 30000, 60000]);
  expect(pendingScans(aged)).toEqual(["Index Scan jobs_pending_age by queue"]);
  // Aging of an hour: nothing aged, the levels fill it.
  const fresh = await claimPlan(sql.jobClaimBatchAged.text, [["hot", "warm"], 10, "w", 30000, 3_600_000]);
  expect(pendingScans(fresh)).toEqual([
    "Index Scan jobs_pending_age by queue",
    "Index Scan jobs_pending_claim by queue",
  ]);
  expect(pendingRowsRead(fresh)).toBeLessThanOrEqual(2 * (10 + 3) + 2);
  expect(pendingRowsRead(aged)).toBeLessThanOrEqual(4 * 10 + 2 * 3);

  await new Admin(t.skipq).setQueueLimits("hot", {
    concurrency: 5,
    keyConcurrency: 1,
    rate: { limit: 100, window: "1s" },
  });
  const text = limitedClaimText({
    schema: `"${t.schema}"`,
    schemaName: t.schema,
    freeQueues: ["warm"],
    limitedQueues: ["hot"],
    limit: 10,
    workerId: "w",
    leaseMs: 30000,
    agingMs: 60000,
    lookahead: 100,
  });
  const limited = await explain(text.slice(text.indexOf("WITH")), [], true);
  expect(scansOfJobs(limited).map((n) => n["Node Type"])).not.toContain("Seq Scan");
  // The limited queue (aging on) and the unlimited queue: all ordered index scans by queue.
  expect(pendingScans(limited)).toEqual([
    "Index Scan jobs_pending_age by queue",
    "Index Scan jobs_pending_claim by queue",
  ]);
  expect(pendingRowsRead(limited)).toBeLessThanOrEqual(2 * 100 + 2 * 10 + 2 * 3);
  await new Admin(t.skipq).setQueueLimits("hot", {});

  // The SQL protocol's claim: the same function, its statements as their cached generic plans will be.
  const protocol = await claimPlan(
    `SELECT * FROM "${t.schema}".skipq_claim(ARRAY['hot', 'warm'], 10, 'w', 30000)`,
    [],
    true,
  );
  expect(pendingScans(protocol)).toEqual(["Index Scan jobs_pending_claim by queue"]);
  // The picked rows are updated through primary-key lookups, not a join against the whole key (0.5–0.8 s on
  // 2M rows before migration 0007).
  const byKey = scansOfJobs(protocol).filter((n) => n["Index Name"] === "jobs_pkey");
  expect(byKey.reduce((sum, n) => sum + (n["Actual Rows"] ?? 0) * (n["Actual Loops"] ?? 1), 0)).toBeLessThanOrEqual(10);
  expect(pendingRowsRead(protocol)).toBeLessThanOrEqual(2 * (10 + 3));
  await resetJobs();
});

test("scheduled jobs cost a claim nothing: 50,000 jobs due tomorrow, at the queue's highest priority and below, are never stepped over", async () => {
  await resetJobs();
  const jobs = `"${t.schema}".jobs`;
  await t.db.query(`INSERT INTO ${jobs} (queue, kind, priority, run_at)
                    SELECT 'mail', 'later', CASE WHEN i % 2 = 0 THEN 5 ELSE 0 END, now() + interval '1 day'
                      FROM generate_series(1, 50000) i`);
  await t.db.query(`ANALYZE ${jobs}`);
  const sql = t.skipq.store.sql.jobs;
  // Nothing due: the claim looks at each level's first entry only.
  const idle = await claimPlan(sql.jobClaimBatch.text, [["mail"], 10, "w", 30000]);
  expect(pendingPages(idle)).toBeLessThan(30);
  // Three jobs due at priority 0, below a level of scheduled ones: found without walking that level.
  await t.db.query(`INSERT INTO ${jobs} (queue, kind, priority) SELECT 'mail', 'now', 0 FROM generate_series(1, 3)`);
  const due = await claimPlan(sql.jobClaimBatch.text, [["mail"], 10, "w", 30000]);
  expect(due.find((n) => n["Node Type"] === "ModifyTable")?.["Actual Rows"]).toBe(3);
  expect(pendingPages(due)).toBeLessThan(30);
  await resetJobs();
});

test("outcome and heartbeat statements find their rows by primary key, never by scanning the table", async () => {
  await resetJobs();
  const jobs = `"${t.schema}".jobs`;
  await t.db.query(`INSERT INTO ${jobs} (kind) SELECT 'backlog' FROM generate_series(1, 50000)`);
  await t.db.query(`ANALYZE ${jobs}`);
  const sql = t.skipq.store.sql.jobs;
  // 2,000 ids, the default outcome batch: joined to unnest(...) alone, the planner scans every row.
  const ids = Array.from({ length: 2000 }, (_, i) => String(i + 1));
  const leases = ids.map(() => "1");
  const statements = {
    jobCompleteMany: [ids, leases],
    jobSettleMany: [
      ids,
      leases,
      ids.map(() => "retry"),
      ids.map(() => "e"),
      ids.map(() => 0),
      ids.map(() => "f"),
      ids.map(() => '{"attempt":1}'),
    ],
    jobHeartbeatMany: [ids, leases, 30000],
  } as const;
  for (const [name, values] of Object.entries(statements)) {
    const plan = await explain(sql[name as keyof typeof statements].text, [...values]);
    const scans = [
      ...new Set(scansOfJobs(plan).map((n) => `${name}: ${n["Node Type"]} ${n["Index Name"] ?? ""}`.trim())),
    ];
    expect(scans).toEqual([`${name}: Index Scan jobs_pkey`]);
  }
  await resetJobs();
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
  const jobs = `"${t.schema}".all_jobs`;
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
