/**
 * The fetch loop's timing (issue 25, item 6): while the database is
 * unreachable a worker waits between claim attempts instead of spinning (a
 * failed claim's own wake-up must not cut its backoff short), and it wakes
 * for a retry or a delayed job at the job's run_at, not at the next poll; and
 * a notification that arrives while a claim is in flight is never lost, even
 * when another claim came back short meanwhile.
 */
import { expect, it } from "vitest";
import type { ClaimedRow } from "../../src/db/jobStore.js";
import { type Logger, Skipq, silentLogger } from "../../src/index.js";
import { Fetcher } from "../../src/worker/fetcher.js";
import { HeldJobs } from "../../src/worker/heldJobs.js";
import { ChaosProxy } from "../chaos/proxy.js";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("claim-loop");

/** A logger that counts the lines it is given (every level that reaches stderr by default). */
function countingLogger(): Logger & { lines: Array<{ t: number; msg: string | undefined }> } {
  const lines: Array<{ t: number; msg: string | undefined }> = [];
  const keep = (_obj: Record<string, unknown>, msg?: string) => lines.push({ t: Date.now(), msg });
  return { lines, debug() {}, info() {}, warn: keep, error: keep };
}

it("a worker cut off from the database for 5 s makes at most a few claim attempts and log lines a second", async () => {
  const url = new URL(DATABASE_URL);
  const proxy = new ChaosProxy(Number(url.port || 5432));
  await proxy.start();
  const logger = countingLogger();
  const skipq = new Skipq({ connectionString: proxy.url(DATABASE_URL), schema: t.schema, logger });
  const worker = skipq.worker({ pollInterval: "200ms", queues: ["outage"], concurrency: 10, batchSize: 5 });
  worker.register("k", async () => undefined);
  const failedClaims: number[] = [];
  worker.on("warning", (_error, context) => {
    if (context === "claim") failedClaims.push(Date.now());
  });
  try {
    await worker.start();
    const before = await skipq.enqueue("k", {}, { queue: "outage" });
    await until("a job done before the outage", async () => {
      const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [before.id]);
      return rows[0]?.status === "completed";
    });
    await proxy.refuse();
    const downAt = Date.now();
    // The outage lasts 5 s; the worker keeps trying meanwhile.
    await until("5 s of outage", () => Date.now() - downAt >= 5000 && failedClaims.length > 0, 10_000, 50);
    const upAt = Date.now();
    const claims = failedClaims.filter((at) => at >= downAt && at <= upAt).length;
    const lines = logger.lines.filter((l) => l.t >= downAt && l.t <= upAt);
    await proxy.reopen();
    // It comes back by itself: a job enqueued after the outage runs.
    const after = await t.skipq.enqueue("k", {}, { queue: "outage" });
    await until(
      "a job done after the outage",
      async () => {
        const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [after.id]);
        return rows[0]?.status === "completed";
      },
      15_000,
    );
    // Capped exponential backoff (50 ms doubling to 5 s) allows about 8 attempts in 5 s; a spin makes thousands.
    expect(claims, "claim attempts during the 5 s outage").toBeLessThanOrEqual(15);
    // One line per part that noticed (claim, listener, each idle pooled connection, maintenance passes).
    expect(lines.length, `log lines during the outage: ${lines.map((l) => l.msg).join(" | ")}`).toBeLessThanOrEqual(10);
  } finally {
    await worker.stop();
    await skipq.close();
    await proxy.close();
  }
});

/** How late job `id` started: its claim's locked_at after its run_at, ms (both from the database clock). */
async function lateness(id: string): Promise<number | undefined> {
  const { rows } = await t.db.query(
    `SELECT extract(epoch FROM locked_at - run_at) * 1000 AS ms FROM "${t.schema}".all_jobs WHERE id = $1 AND locked_at IS NOT NULL`,
    [id],
  );
  return rows[0] === undefined ? undefined : Number(rows[0].ms);
}

it("a failed job's retry starts at its backoff (300 ms), not at the next poll (30 s)", async () => {
  const worker = t.skipq.worker({
    pollInterval: "30s",
    queues: ["retry-due"],
    backoff: { baseMs: 300, jitter: 0 },
  });
  const starts: number[] = [];
  worker.register("flaky", async (_payload, ctx) => {
    starts.push(Date.now());
    if (ctx.job.attempt === 1) throw new Error("first attempt fails");
  });
  try {
    await worker.start();
    const job = await t.skipq.enqueue("flaky", {}, { queue: "retry-due" });
    await until("the retry done", async () => {
      const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [job.id]);
      return rows[0]?.status === "completed";
    });
    expect(starts).toHaveLength(2);
    // The retry's run_at is 300 ms after the failure; it started within a few hundred ms of that.
    expect(await lateness(job.id)).toBeLessThan(500);
  } finally {
    await worker.stop();
  }
});

it("a delayed job the worker's claim passed over starts at its run_at, not at the next poll (30 s)", async () => {
  const worker = t.skipq.worker({ pollInterval: "30s", queues: ["delay-due"] });
  worker.register("k", async () => undefined);
  try {
    await worker.start();
    // The delayed job first (its enqueue wakes nobody: it is not due), then a due one that wakes the worker.
    const delayed = await t.skipq.enqueue("k", {}, { queue: "delay-due", delay: "700ms" });
    const due = await t.skipq.enqueue("k", {}, { queue: "delay-due" });
    await until("both done", async () => {
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE id = ANY($1) AND status = 'completed'`,
        [[delayed.id, due.id]],
      );
      return rows[0].n === 2;
    });
    expect(await lateness(delayed.id)).toBeLessThan(500);
  } finally {
    await worker.stop();
  }
});

it("the next-due query reads one index entry per queue: 100,000 jobs due tomorrow and a due backlog cost it nothing", async () => {
  const s = `"${t.schema}"`;
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, run_at)
                    SELECT 'far', 'k', now() + interval '1 day' + i * interval '1 ms' FROM generate_series(1, 100000) i`);
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, run_at)
                    SELECT 'far', 'k', now() - i * interval '1 ms' FROM generate_series(1, 50000) i`);
  await t.db.query(`ANALYZE ${s}.jobs`);
  const text = t.skipq.store.sql.wakeups.jobNextDue.text;
  const { rows } = await t.db.query(`EXPLAIN (FORMAT JSON, ANALYZE, BUFFERS) ${text}`, [["far", "none"]]);
  type Node = {
    "Index Name"?: string;
    "Relation Name"?: string;
    "Node Type": string;
    "Shared Hit Blocks"?: number;
    Plans?: Node[];
  };
  const all = (n: Node): Node[] => [n, ...(n.Plans ?? []).flatMap(all)];
  const plan = all(rows[0]["QUERY PLAN"][0].Plan);
  const scans = plan.filter((n) => n["Index Name"] === "jobs_pending_age");
  expect(scans.length).toBeGreaterThan(0);
  expect(plan.filter((n) => n["Relation Name"] === "jobs").map((n) => n["Node Type"])).not.toContain("Seq Scan");
  // A descent per queue: a handful of pages, not the 150,000 rows' worth.
  expect(scans.reduce((sum, n) => sum + (n["Shared Hit Blocks"] ?? 0), 0)).toBeLessThan(20);
  const due = await t.skipq.jobs.nextDueMs(["far", "none"]);
  expect(due).toBeGreaterThan(86_000_000);
  await t.db.query(`DELETE FROM ${s}.jobs WHERE queue = 'far'`);
});

it("a notification during a claim is never lost when another claim came back short meanwhile (a worker that only NOTIFY can wake)", async () => {
  // The fetch loop alone, its claims answered by the test: two claims in flight, the first comes back empty
  // before a job is announced, the second (its snapshot taken before the job committed) comes back empty
  // after. Its verdict is stale, so the loop must claim again; with an hour's poll it otherwise sleeps an
  // hour (the runtime smoke's worker left 50 jobs pending in about 1 round in 10).
  const claims: Array<{ limit: number; answer: (rows: ClaimedRow[]) => void }> = [];
  let running = true;
  const fetcher: Fetcher = new Fetcher({
    claimer: { claim: (limit: number) => new Promise((answer) => claims.push({ limit, answer })) },
    queues: ["q"],
    concurrency: 4,
    prefetch: 1000,
    leaseMs: 30_000,
    batchSize: 1000,
    maxClaims: 2,
    pollMs: 3_600_000,
    nextDue: async () => null,
    held: new HeldJobs(() => undefined),
    stats: { claimed: 0, completed: 0, failed: 0, staleOutcomes: 0, leasesLost: 0, released: 0 },
    logger: silentLogger,
    hooks: undefined,
    running: () => running,
    completer: { saturated: false },
    handlers: { batchOf: () => undefined, largestBatch: 1 },
    executor: { execute: async () => undefined, executeBatch: async () => undefined },
    onClaimed: () => undefined,
    onIdle: () => undefined,
    onWarning: () => undefined,
  });
  const loop = fetcher.loop();
  try {
    await until("the first claim in flight", () => claims.length === 1);
    // Handlers turn out fast, so the prefetch target grows: a second, larger claim starts beside the first.
    fetcher.noteHandlerMs(0.01);
    fetcher.wakeup.wake();
    await until("two claims in flight", () => claims.length === 2);
    claims[0]?.answer([]);
    // The loop has heard the first claim's empty answer (each settle wakes it) before the job is announced.
    await new Promise((resolve) => setTimeout(resolve, 0));
    fetcher.notified(); // a job committed after the second claim's snapshot
    claims[1]?.answer([]);
    await until("a claim after the notification", () => claims.length === 3, 5_000);
  } finally {
    running = false;
    fetcher.wakeup.wake();
    for (const claim of claims) claim.answer([]);
    await loop;
  }
});
