/**
 * Batch handlers (worker.registerBatch): one handler call per claimed batch
 * of a kind, outcomes per item or for all, and the batch as the unit of the
 * features around it — cancel, shutdown, timeout, keyed/unique/debounced jobs,
 * dependsOn children, and a batch occupying one concurrency slot.
 */
import { afterAll, beforeAll, expect, expectTypeOf, test } from "vitest";
import { Admin, defineJob, FailPermanently, type Job, type Worker } from "../../src/index.js";
import { gate, type TestQueue, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("batch");
let s: string;
const workers: Worker[] = [];
beforeAll(async () => {
  s = `"${t.schema}"`;
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

const item = defineJob<{ n: number }>("batch-item");

function worker(queue: string, options: Parameters<TestQueue["skipq"]["worker"]>[0] = {}): Worker {
  const w = t.skipq.worker({
    queues: [queue],
    pollInterval: 50,
    maintenance: false,
    backoff: { baseMs: 10, maxMs: 10, jitter: 0 },
    ...options,
  });
  workers.push(w);
  return w;
}

async function enqueueMany(queue: string, count: number, options: Record<string, unknown> = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let n = 0; n < count; n++) ids.push((await t.skipq.enqueue(item, { n }, { queue, ...options })).id);
  return ids;
}

async function rows(ids: readonly string[]) {
  const { rows } = await t.db.query(
    `SELECT id::text, status, attempts, result, last_error, run_at > now() + interval '10 minutes' AS later
       FROM ${s}.all_jobs WHERE id = ANY($1) ORDER BY id`,
    [ids],
  );
  return rows;
}

async function allStatus(ids: readonly string[], status: string): Promise<boolean> {
  return (await rows(ids)).every((r) => r.status === status);
}

test("returning nothing completes every job of the batch: one handler call and one claim for the batch", async () => {
  const ids = await enqueueMany("plain", 5);
  const calls: number[] = [];
  const claims: number[] = [];
  const w = worker("plain").registerBatch(item, { size: 10 }, async (jobs) => {
    calls.push(jobs.length);
  });
  w.on("claimed", (jobs) => claims.push(jobs.length));
  expect(await w.runOnce()).toBe(5);
  expect(calls).toEqual([5]);
  expect(claims).toEqual([5]);
  expect((await rows(ids)).map((r) => r.status)).toEqual(Array(5).fill("completed"));
});

test("a batch costs one claim statement and one outcome statement, whatever its size (a claim asks for size jobs, beyond batchSize)", async () => {
  await enqueueMany("statements", 20);
  const w = worker("statements", { listen: false, presence: false, concurrency: 1, batchSize: 5 }).registerBatch(
    item,
    { size: 20 },
    async () => {},
  );
  const names: string[] = [];
  const query = w.pool.query.bind(w.pool) as (...args: unknown[]) => unknown;
  (w.pool as { query: unknown }).query = (q: unknown, ...rest: unknown[]) => {
    const name = (q as { name?: string } | null)?.name;
    if (typeof name === "string") names.push(name.replace(/^.*_(?=job)/, ""));
    return query(q, ...rest);
  };
  expect(await w.runOnce()).toBe(20);
  expect(names.filter((n) => /^job(Claim|Complete|Settle)/.test(n))).toEqual(["jobClaimFrom", "jobCompleteMany"]);
});

test("a batch is at most `size` jobs and occupies one concurrency slot: concurrency 1 runs the batches one after another", async () => {
  const ids = await enqueueMany("slots", 7);
  const sizes: number[] = [];
  let inFlight = 0;
  let most = 0;
  const w = worker("slots", { concurrency: 1 }).registerBatch(item, { size: 3 }, async (jobs) => {
    inFlight++;
    most = Math.max(most, inFlight);
    sizes.push(jobs.length);
    await new Promise((resolve) => setImmediate(resolve));
    inFlight--;
  });
  await w.start();
  await until("all completed", () => allStatus(ids, "completed"));
  await w.stop();
  expect(most).toBe(1);
  expect(Math.max(...sizes)).toBeLessThanOrEqual(3);
  expect(sizes.reduce((a, b) => a + b, 0)).toBe(7);
});

test("a partial batch waits up to waitMs for more jobs of its kind, then is handed over", async () => {
  const first = await enqueueMany("wait", 2);
  const sizes: number[] = [];
  const w = worker("wait", { concurrency: 1 }).registerBatch(item, { size: 4, waitMs: 2000 }, async (jobs) => {
    sizes.push(jobs.length);
  });
  const claimed = new Promise<void>((resolve) => w.once("claimed", () => resolve()));
  await w.start();
  await claimed;
  // Enqueued while the first two wait for their batch to fill: they join it (the notification wakes a claim).
  const more = await enqueueMany("wait", 2);
  await until("all completed", () => allStatus([...first, ...more], "completed"));
  await w.stop();
  expect(sizes).toEqual([4]);
  // And a batch that never fills is handed over once waitMs is up.
  const alone = await enqueueMany("wait", 1);
  const w2 = worker("wait", { concurrency: 1 }).registerBatch(item, { size: 4, waitMs: 100 }, async (jobs) => {
    sizes.push(jobs.length);
  });
  await w2.start();
  await until("the lone job completed", () => allStatus(alone, "completed"));
  await w2.stop();
  expect(sizes).toEqual([4, 1]);
});

test("mixed per-item outcomes: fail, retry, an Error in the results, FailPermanently, and stored results", async () => {
  const ids = await enqueueMany("mixed", 5);
  const w = worker("mixed").registerBatch(item, { size: 10 }, async (jobs) => {
    (jobs[0] as (typeof jobs)[0]).fail(new Error("item 0 failed"));
    (jobs[1] as (typeof jobs)[0]).retry("1h");
    (jobs[2] as (typeof jobs)[0]).fail(new FailPermanently("item 2 is hopeless"));
    return jobs.map((job, i) => (i === 3 ? new Error("item 3 failed") : { doubled: job.payload.n * 2 }));
  });
  expect(await w.runOnce()).toBe(5);
  const r = await rows(ids);
  expect(r.map((x) => x.status)).toEqual(["pending", "pending", "dead", "pending", "completed"]);
  expect(r[0].last_error).toContain("item 0 failed");
  expect(r[1].later).toBe(true);
  expect(r[2].last_error).toContain("item 2 is hopeless");
  expect(r[3].last_error).toContain("item 3 failed");
  expect(r[4].result).toEqual({ doubled: 8 });
});

test("a throw fails every job of the batch, each by its own retry policy (dead on its last attempt)", async () => {
  const retried = await enqueueMany("throw", 2, { maxAttempts: 3 });
  const last = await enqueueMany("throw", 1, { maxAttempts: 1 });
  const w = worker("throw").registerBatch(item, { size: 10 }, async () => {
    throw new Error("the whole batch failed");
  });
  expect(await w.runOnce()).toBe(3);
  const r = await rows([...retried, ...last]);
  expect(r.map((x) => x.status)).toEqual(["pending", "pending", "dead"]);
  for (const x of r) expect(x.last_error).toContain("the whole batch failed");
});

test("an array of the wrong length fails the batch with an error that says what to return", async () => {
  const ids = await enqueueMany("length", 2);
  const w = worker("length").registerBatch(item, { size: 10 }, async () => [1]);
  await w.runOnce();
  for (const x of await rows(ids)) expect(x.last_error).toMatch(/returned 1 results for 2 jobs: return one per job/);
});

test("a job cancelled mid-batch ends cancelled; a throw on the batch's aborted signal releases the others, which then complete", async () => {
  const ids = await enqueueMany("cancel", 3);
  const started = gate();
  let calls = 0;
  const w = worker("cancel").registerBatch(item, { size: 10 }, async (_jobs, ctx) => {
    calls++;
    if (calls > 1) return;
    started.open();
    await new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)));
  });
  await w.start();
  await started.promise;
  await new Admin(t.skipq).cancelJob(ids[1] as string);
  await until("the others completed on a second batch", async () => {
    const r = await rows(ids);
    return r[0].status === "completed" && r[2].status === "completed";
  });
  await w.stop();
  const r = await rows(ids);
  expect(r.map((x) => x.status)).toEqual(["completed", "cancelled", "completed"]);
  // Released, not failed: the cancel of another job cost them no attempt.
  expect(r[0].attempts).toBe(1);
  expect(r[0].last_error).toBeNull();
});

test("each job of a batch ends with its own loss, whatever the shared signal says: one cancelled, another's lease lost", async () => {
  const ids = await enqueueMany("own-loss", 3);
  const started = gate();
  const ends = new Map<string, string>();
  let calls = 0;
  const w = worker("own-loss").registerBatch(item, { size: 10 }, async (_jobs, ctx) => {
    if (++calls > 1) return;
    started.open();
    await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
    // The cancel aborted the batch; this heartbeat finds the lease taken from job 1.
    await ctx.heartbeat();
    throw ctx.signal.reason;
  });
  w.on("jobEnd", (job, outcome) => {
    if (!ends.has(job.id)) ends.set(job.id, outcome);
  });
  await w.start();
  await started.promise;
  await t.db.query(`UPDATE ${s}.jobs SET lease = lease + 1000 WHERE id = $1`, [ids[1]]);
  await new Admin(t.skipq).cancelJob(ids[0] as string);
  await until("the third job completed on a second batch", async () => (await rows(ids))[2].status === "completed");
  await w.stop();
  // One shared signal, aborted first by the cancel: job 1's jobEnd is still its own lost lease.
  expect(ids.map((id) => ends.get(id))).toEqual(["cancelled", "lease-lost", "released"]);
  expect((await rows(ids)).map((r) => r.status)).toEqual(["cancelled", "running", "completed"]);
  await t.db.query(`DELETE FROM ${s}.jobs WHERE id = $1`, [ids[1]]);
});

test("shutdown mid-batch: the batch's signal aborts and every job goes back to pending without using its attempt", async () => {
  const ids = await enqueueMany("shutdown", 4);
  const started = gate();
  const w = worker("shutdown", { shutdownTimeout: 100 }).registerBatch(item, { size: 10 }, async (_jobs, ctx) => {
    started.open();
    await new Promise((_, reject) => ctx.signal.addEventListener("abort", () => reject(ctx.signal.reason)));
  });
  await w.start();
  await started.promise;
  await w.stop();
  const r = await rows(ids);
  expect(r.map((x) => x.status)).toEqual(Array(4).fill("pending"));
  expect(r.map((x) => x.attempts)).toEqual(Array(4).fill(0));
});

test("a batch that runs past jobTimeout is aborted and every job of it is retried", async () => {
  const ids = await enqueueMany("timeout", 3);
  let aborted = false;
  const w = worker("timeout", { jobTimeout: 200 }).registerBatch(item, { size: 10 }, async (_jobs, ctx) => {
    await new Promise((resolve) =>
      ctx.signal.addEventListener("abort", () => {
        aborted = true;
        resolve(undefined);
      }),
    );
  });
  expect(await w.runOnce()).toBe(3);
  expect(aborted).toBe(true);
  const r = await rows(ids);
  expect(r.map((x) => x.status)).toEqual(Array(3).fill("pending"));
  for (const x of r) expect(x.last_error).toContain("jobTimeout");
});

test("keyed, unique and debounced jobs run in one batch and their keys are freed as each completes", async () => {
  const q = "keyed";
  const a = await t.skipq.enqueue(item, { n: 1 }, { queue: q, idempotencyKey: "k1" });
  const b = await t.skipq.enqueue(item, { n: 2 }, { queue: q, unique: { key: "u1", period: "1h" } });
  const c = await t.skipq.enqueue(item, { n: 3 }, { queue: q, debounce: { key: "d1", delay: 0 } });
  const d = await t.skipq.enqueue(item, { n: 4 }, { queue: q, debounce: { key: "d1", delay: 0 } });
  expect(d.id).toBe(c.id);
  const seen: number[][] = [];
  const w = worker(q).registerBatch(item, { size: 10 }, async (jobs) => {
    seen.push(jobs.map((j) => j.payload.n).sort());
  });
  expect(await w.runOnce()).toBe(3);
  expect(seen).toEqual([[1, 2, 4]]);
  expect(await allStatus([a.id, b.id, c.id], "completed")).toBe(true);
  // The idempotency key still returns the finished job; the unique window holds; the debounce key is free.
  expect((await t.skipq.enqueue(item, { n: 1 }, { queue: q, idempotencyKey: "k1" })).id).toBe(a.id);
  expect((await t.skipq.enqueue(item, { n: 2 }, { queue: q, unique: { key: "u1", period: "1h" } })).id).toBe(b.id);
  const next = await t.skipq.enqueue(item, { n: 5 }, { queue: q, debounce: { key: "d1", delay: 0 } });
  expect(next.id).not.toBe(c.id);
});

test("dependsOn children of batch jobs run once their parents' batch completes, and see the parents' results", async () => {
  const q = "deps";
  const parents = await enqueueMany(q, 3);
  const child = await t.skipq.enqueue("batch-child", {}, { queue: q, dependsOn: parents });
  let seen: Record<string, unknown> | undefined;
  const w = worker(q)
    .registerBatch(item, { size: 10 }, async (jobs) => jobs.map((j) => ({ n: j.payload.n })))
    .register("batch-child", async (_payload, ctx) => {
      seen = Object.fromEntries(Object.entries(ctx.parents).map(([id, p]) => [id, p.result]));
    });
  await w.start();
  await until("the child completed", () => allStatus([child.id], "completed"));
  await w.stop();
  expect(seen).toEqual(Object.fromEntries(parents.map((id, n) => [id, { n }])));
});

test("bad registerBatch input is refused with an error that says what to do, and registers nothing", () => {
  const w = worker("bad");
  expect(() => w.registerBatch(item, { size: 0 }, async () => undefined)).toThrow(/size/);
  expect(() => w.registerBatch(item, { size: 5, waitMs: -1 }, async () => undefined)).toThrow(/waitMs/);
  expect(() => w.registerBatch(item, undefined as never, async () => undefined)).toThrow(/needs options: \{ size \}/);
  expect(() => w.registerBatch(item, { size: 5 }, "nope" as never)).toThrow(/must be a function/);
  expect(w.kinds).toEqual([]);
});

test("jobs[i].fail() after the handler returned throws instead of changing nothing silently", async () => {
  const ids = await enqueueMany("late", 1);
  let kept: Array<Job & { fail(e: unknown): void }> = [];
  const w = worker("late").registerBatch(item, { size: 10 }, async (jobs) => {
    kept = [...jobs];
  });
  await w.runOnce();
  expect(await allStatus(ids, "completed")).toBe(true);
  expect(() => kept[0]?.fail(new Error("late"))).toThrow(/after its batch handler returned/);
});

test("registerBatch is typed by the job definition: each job's payload, and the results it may return", () => {
  const typed = defineJob<{ n: number }, { doubled: number }>("batch-typed");
  const w = worker("types");
  w.registerBatch(typed, { size: 2 }, async (jobs) => {
    expectTypeOf(jobs[0]?.payload).toEqualTypeOf<{ n: number } | undefined>();
    // @ts-expect-error: the payload has no such field
    void jobs[0]?.payload.missing;
    return jobs.map((j) => ({ doubled: j.payload.n * 2 }));
  });
  // @ts-expect-error: a result of the wrong shape for the definition
  w.registerBatch(typed, { size: 2 }, async (jobs) => jobs.map(() => ({ doubled: "two" })));
  expect(w.kinds).toEqual(["batch-typed"]);
});

test("a job whose lease is lost mid-batch is not recorded; ctx.heartbeat() finds it, aborts the batch, and the others still complete", async () => {
  const ids = await enqueueMany("lost", 3);
  const started = gate();
  const taken = gate();
  let alive: boolean | undefined;
  let reason: string | undefined;
  const w = worker("lost").registerBatch(item, { size: 10 }, async (_jobs, ctx) => {
    started.open();
    await taken.promise;
    alive = await ctx.heartbeat();
    reason = (ctx.signal.reason as { code?: string } | undefined)?.code;
  });
  await w.start();
  await started.promise;
  // Another holder takes job 1 over (a new lease): this worker's lease on it is gone.
  await t.db.query(`UPDATE ${s}.jobs SET lease = lease + 1000 WHERE id = $1`, [ids[1]]);
  taken.open();
  await until("the others completed", async () => {
    const r = await rows(ids);
    return r[0].status === "completed" && r[2].status === "completed";
  });
  await w.stop();
  expect(alive).toBe(true);
  expect(reason).toBe("SKIPQ_LEASE_LOST");
  expect((await rows(ids)).map((r) => r.status)).toEqual(["completed", "running", "completed"]);
  expect(w.stats.leasesLost).toBe(1);
  await t.db.query(`DELETE FROM ${s}.jobs WHERE id = $1`, [ids[1]]);
});
