/**
 * Progress (docs/jobs.md): ctx.progress(value) is emitted as a worker event at
 * once and stored with the job by the next heartbeat, at most progressInterval
 * later; however often a handler calls it, the writes are coalesced into a
 * bounded number of statements; the last value is written before the outcome
 * and stays with the job's history.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, defineJob, type JobContext, type Worker, type WorkerOptions } from "../../src/index.js";
import { skipq as cli } from "../cli/run.js";
import { DATABASE_URL, gate, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("progress");
let admin: Admin;
const workers: Worker[] = [];
const pools: pg.Pool[] = [];
beforeAll(async () => {
  admin = new Admin(t.skipq);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await Promise.all(pools.map((p) => p.end()));
});

/** A worker on its own pool whose statements that write progress are counted. */
function countingWorker(queue: string, options: WorkerOptions = {}): { worker: Worker; writes: () => number } {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 20 });
  pools.push(pool);
  let writes = 0;
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const config = args[0] as { text?: string } | string;
    const text = typeof config === "string" ? config : (config.text ?? "");
    if (text.includes("progress = COALESCE")) writes++;
    return query(...args);
  };
  const worker = t.skipq.worker({ queues: [queue], pollInterval: 50, pool, ...options });
  workers.push(worker);
  return { worker, writes: () => writes };
}

const report = defineJob<{ steps: number }>("report");

test("progress is emitted at once, stored while the job runs, and shown by getJob and the CLI", async () => {
  const g = gate();
  const { worker } = countingWorker("p1", { progressInterval: 50 });
  const events: unknown[] = [];
  worker.on("progress", (job, value) => events.push([job.id, value]));
  worker.register(report, async (_payload, ctx) => {
    await ctx.progress(25);
    await ctx.progress({ done: 3, total: 12 });
    await g.promise;
  });
  await worker.start();
  const { id } = await t.skipq.enqueue(report, { steps: 12 }, { queue: "p1" });
  await until("progress stored", async () => {
    const job = await admin.getJob(id);
    return job?.status === "running" && (job.progress as { done?: number } | null)?.done === 3;
  });
  expect(events).toEqual([
    [id, 25],
    [id, { done: 3, total: 12 }],
  ]);
  const json = await cli(["job", id, "--json"], { DATABASE_URL, SKIPQ_SCHEMA: t.schema });
  expect(JSON.parse(json.stdout)).toMatchObject({ status: "running", progress: { done: 3, total: 12 } });
  g.open();
  await until("completed", async () => (await admin.getJob(id))?.status === "completed");
  // The last value moves to history with the job.
  expect((await admin.getJob(id))?.progress).toEqual({ done: 3, total: 12 });
});

test("10,000 progress calls cost a bounded number of statements, and the last value is the one stored", async () => {
  const { worker, writes } = countingWorker("p2", { progressInterval: "1s" });
  worker.register(report, async (payload, ctx) => {
    for (let i = 0; i < payload.steps; i++) await ctx.progress((i * 100) / payload.steps);
    await ctx.progress(100);
  });
  await worker.start();
  const { id } = await t.skipq.enqueue(report, { steps: 10_000 }, { queue: "p2" });
  await until("completed", async () => (await admin.getJob(id))?.status === "completed");
  expect((await admin.getJob(id))?.progress).toBe(100);
  // The loop takes far less than a progressInterval: at most the one interval write and the final one.
  expect(writes()).toBeGreaterThanOrEqual(1);
  expect(writes()).toBeLessThanOrEqual(3);
});

test("a handler reporting for longer costs about one statement per progressInterval", async () => {
  const { worker, writes } = countingWorker("p3", { progressInterval: 100 });
  worker.register(report, async (_payload, ctx) => {
    const end = Date.now() + 1000;
    let calls = 0;
    while (Date.now() < end) {
      await ctx.progress(Math.min(99, calls++ / 1000));
      if (calls % 100 === 0) await new Promise((r) => setImmediate(r));
    }
    return { calls };
  });
  await worker.start();
  const { id } = await t.skipq.enqueue(report, { steps: 0 }, { queue: "p3" });
  await until("completed", async () => (await admin.getJob(id))?.status === "completed");
  const calls = ((await admin.getJob(id))?.result as { calls: number } | undefined)?.calls ?? 0;
  expect(calls).toBeGreaterThan(1000);
  expect(writes()).toBeGreaterThanOrEqual(3);
  expect(writes()).toBeLessThanOrEqual(1000 / 100 + 3);
});

test("a job that reports no progress writes none, and no progress statement runs for it", async () => {
  const { worker, writes } = countingWorker("p4", { progressInterval: 10 });
  worker.register(report, () => undefined);
  await worker.start();
  const { id } = await t.skipq.enqueue(report, { steps: 1 }, { queue: "p4" });
  await until("completed", async () => (await admin.getJob(id))?.status === "completed");
  expect((await admin.getJob(id))?.progress).toBeNull();
  expect(writes()).toBe(0);
});

test("bad progress values reject with ValidationError and change nothing", async () => {
  const errors: unknown[] = [];
  const { worker } = countingWorker("p5");
  worker.register(report, async (_payload, ctx: JobContext) => {
    const bad: unknown[] = [101, -1, Number.NaN, "half", [1, 2], null, { blob: "x".repeat(2000) }, { at: new Date() }];
    for (const value of bad)
      errors.push(
        await ctx.progress(value as number).then(
          () => "accepted",
          (e: { code: string; message: string }) => e,
        ),
      );
  });
  await worker.start();
  const { id } = await t.skipq.enqueue(report, { steps: 1 }, { queue: "p5" });
  await until("completed", async () => (await admin.getJob(id))?.status === "completed");
  expect(errors).toHaveLength(8);
  for (const e of errors) expect(e).toMatchObject({ code: "SKIPQ_INVALID_ARGUMENT" });
  expect((errors[6] as Error).message).toMatch(/over the limit of 1024/);
  expect((errors[7] as Error).message).toMatch(/progress\.at is a Date instance/);
  expect((await admin.getJob(id))?.progress).toBeNull();
});

test("the last progress of a failed attempt is written before the job goes back to pending", async () => {
  const { worker } = countingWorker("p6", { progressInterval: "1h", backoff: { baseMs: 3_600_000, jitter: 0 } });
  worker.register(report, async (_payload, ctx) => {
    await ctx.progress(60);
    throw new Error("disk full at 60%");
  });
  await worker.start();
  const { id } = await t.skipq.enqueue(report, { steps: 1 }, { queue: "p6" });
  await until("failed once", async () => (await admin.getJob(id))?.attempts === 1);
  await until("back to pending", async () => (await admin.getJob(id))?.status === "pending");
  expect((await admin.getJob(id))?.progress).toBe(60);
});
