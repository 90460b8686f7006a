/**
 * Fair claims (setQueueLimits fairness, skipq_claim_fair): claims go round
 * robin across concurrency keys, weighted, and meet the other features —
 * priorities, delayed jobs, key pauses, keyConcurrency, rate, dependsOn,
 * cancel, history off — and the SQL protocol. One process, claims called
 * directly; the many-process race is fairness-processes.test.ts.
 */
import { beforeAll, beforeEach, expect, test } from "vitest";
import { Admin, defineJob } from "../../src/index.js";
import { clearJobs, testQueue, useTestQueue } from "../helpers.js";

const t = useTestQueue("fairness");
let admin: Admin;
const job = defineJob<{ n?: number }>("fair");

beforeAll(async () => {
  admin = new Admin(t.skipq);
});
beforeEach(async () => {
  await clearJobs(t.db, t.schema);
  await t.db.query(`TRUNCATE "${t.schema}".fair_keys, "${t.schema}".fair_queues, "${t.schema}".queue_keys,
                            "${t.schema}".rate_starts`);
  await t.db.query(`DELETE FROM "${t.schema}".queues`);
});

/** `count` jobs of each key (null: no key) in queue `queue`, enqueued key by key. */
async function backlog(queue: string, keys: Record<string, number>, extra: object = {}): Promise<void> {
  for (const [key, count] of Object.entries(keys))
    await t.skipq.enqueueMany(
      Array.from({ length: count }, (_, i) => ({
        job,
        payload: { n: i },
        queue,
        ...(key === "-" ? {} : { concurrencyKey: key }),
        ...extra,
      })),
    );
}

/** One fair claim of up to n jobs, straight through the SQL function; the keys in claim order ('-': none). */
async function claimKeys(queue: string, n: number): Promise<string[]> {
  const { rows } = await t.db.query(`SELECT concurrency_key FROM "${t.schema}".skipq_claim_fair($1, $2, 'w', 30000)`, [
    [queue],
    n,
  ]);
  return rows.map((r) => r.concurrency_key ?? "-");
}

async function finishRunning(): Promise<void> {
  await t.db.query(`DELETE FROM "${t.schema}".jobs WHERE status = 'running'`);
}

test("a fair queue's claims take one job per key per round, whatever each key's backlog", async () => {
  await admin.setQueueLimits("q", { fairness: {} });
  await backlog("q", { big: 200, a: 3, b: 3 });
  expect(await claimKeys("q", 3)).toEqual(["a", "b", "big"]);
  expect(await claimKeys("q", 4)).toEqual(["a", "b", "big", "a"]);
  expect(await claimKeys("q", 5)).toEqual(["b", "big", "big", "big", "big"]);
});

test("jobs without a key are one key of their own, and a key's weight is its claims per round", async () => {
  await admin.setQueueLimits("q", { fairness: { weights: { heavy: 3, light: 0.5 } } });
  await backlog("q", { "-": 200, heavy: 200, light: 200, plain: 200 });
  const keys: string[] = [];
  for (let i = 0; i < 10; i++) keys.push(...(await claimKeys("q", 11)));
  const share = (k: string) => keys.filter((x) => x === k).length;
  // Per round: 1 (no key) + 3 (heavy) + 0.5 (light) + 1 (plain) = 5.5 claims.
  expect(share("heavy") / keys.length).toBeCloseTo(3 / 5.5, 1);
  expect(share("light") / keys.length).toBeCloseTo(0.5 / 5.5, 1);
  expect(share("-")).toBe(share("plain"));
  expect(Math.abs(share("-") - keys.length / 5.5)).toBeLessThanOrEqual(1);
});

test("jobs without a key behind a keyed backlog longer than one walk's stretch are reached, 256 entries a visit", async () => {
  // Keyless jobs are not in jobs_pending_key: the keyless key walks the queue's claim index, at most
  // FAIR_KEYLESS_WALK (256) due entries a visit, so 2,000 keyed jobs ahead of them take about 8 visits to pass.
  await admin.setQueueLimits("q", { fairness: {} });
  await backlog("q", { big: 2000, "-": 3 });
  // A backlog older than the floors' margin (FLOOR_MARGIN_MS): the walk reads the last 2 s again each visit.
  await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = run_at - interval '1 minute'`);
  const keys: string[] = [];
  let calls = 0;
  while (keys.filter((k) => k === "-").length < 3 && calls < 40) {
    keys.push(...(await claimKeys("q", 2)));
    calls++;
  }
  expect(keys.filter((k) => k === "-")).toHaveLength(3);
  // One keyless visit a round (a call of 2 is a round here): 8 visits to pass the 2,000, then one job a round.
  expect(calls).toBeLessThanOrEqual(2000 / 256 + 4);
  expect(keys.filter((k) => k === "big").length).toBeGreaterThanOrEqual(calls);
});

test("a keyless job put behind the walk is claimed once the walk starts over: when asked, or after 30 s", async () => {
  await admin.setQueueLimits("q", { fairness: {} });
  await backlog("q", { "-": 5 });
  expect(await claimKeys("q", 10)).toEqual(["-", "-", "-", "-", "-"]);
  // A job due an hour ago (as a reaped or released one keeps its run_at): behind the walk's floor.
  // (Each one earlier than the last, so it lies before wherever the walk stopped.)
  let hours = 0;
  const behind = async () =>
    t.db.query(
      `INSERT INTO "${t.schema}".jobs (queue, kind, run_at) VALUES ('q', 'fair', now() - $1 * interval '1 hour')`,
      [++hours],
    );
  await behind();
  expect(await claimKeys("q", 10)).toEqual([]);
  // The worker's sweep flag ('!ready'): the walk is at its end, so its next visit starts from the top.
  const swept = await t.db.query(
    `SELECT concurrency_key FROM "${t.schema}".skipq_claim_fair($1, 10, 'w', 30000, true)`,
    [["q"]],
  );
  expect(swept.rows.length + (await claimKeys("q", 10)).length).toBe(1);
  await behind();
  expect(await claimKeys("q", 10)).toEqual([]);
  // Without the flag, a pass is due 30 s (FAIR_KEYLESS_SWEEP_MS) after the last one began.
  await t.db.query(`UPDATE "${t.schema}".fair_keys SET swept_at = now() - interval '31 seconds' WHERE key = ''`);
  expect([...(await claimKeys("q", 10)), ...(await claimKeys("q", 10))]).toEqual(["-"]);
});

test("jobs_pending_key holds keyed jobs only: a queue without keys writes nothing to it", async () => {
  const fresh = await testQueue("fair_index");
  try {
    const size = async () =>
      Number((await fresh.db.query(`SELECT pg_relation_size('"${fresh.schema}".jobs_pending_key') AS n`)).rows[0].n);
    const empty = await size();
    await fresh.skipq.enqueueMany(
      Array.from({ length: 5000 }, (_, i) => ({ job, payload: { n: i } })),
      {
        returning: false,
      },
    );
    expect(await size()).toBe(empty);
    await fresh.skipq.enqueueMany(
      Array.from({ length: 5000 }, (_, i) => ({ job, payload: { n: i }, concurrencyKey: `k${i % 50}` })),
      { returning: false },
    );
    expect(await size()).toBeGreaterThan(empty + 8192 * 10);
  } finally {
    await fresh.cleanup();
  }
});

test("a new key is claimed within one round of its arrival, behind a large backlog", async () => {
  await admin.setQueueLimits("q", { fairness: {} });
  await backlog("q", { big: 500, k1: 20, k2: 20 });
  await claimKeys("q", 10);
  await backlog("q", { late: 1 });
  // Within the round under way and the next: that first claim of 10 walked whole rounds, so its rounds grew
  // to 4 claims a key (the quantum doubles while one call walks whole rounds); 3 keys, then 4.
  const next: string[] = [];
  while (next.length < 4 * 3 + 4 && !next.includes("late")) next.push(...(await claimKeys("q", 2)));
  expect(next).toContain("late");
});

test("priorities order the jobs within a key; delayed jobs wait for their time", async () => {
  await admin.setQueueLimits("q", { fairness: {} });
  await t.skipq.enqueueMany([
    { job, payload: { n: 1 }, queue: "q", concurrencyKey: "a", priority: 0 },
    { job, payload: { n: 2 }, queue: "q", concurrencyKey: "a", priority: 5 },
    { job, payload: { n: 3 }, queue: "q", concurrencyKey: "b", delay: 3_600_000 },
  ]);
  const { rows } = await t.db.query(`SELECT payload FROM "${t.schema}".skipq_claim_fair($1, 5, 'w', 30000)`, [["q"]]);
  expect(rows.map((r) => r.payload.n)).toEqual([2, 1]);
  expect(await claimKeys("q", 5)).toEqual([]);
  await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() WHERE status = 'pending'`);
  expect(await claimKeys("q", 5)).toEqual(["b"]);
});

test("a paused key gets no claims and the other keys keep theirs", async () => {
  await admin.setQueueLimits("q", { fairness: {} });
  await backlog("q", { a: 5, b: 5 });
  await admin.pauseKey("q", "a", "1h");
  expect(await claimKeys("q", 4)).toEqual(["b", "b", "b", "b"]);
  await admin.resumeKey("q", "a");
  // b's turn may still hold credit (a batch ended inside it); a gets its turn in the round that follows.
  expect((await claimKeys("q", 4)).filter((k) => k === "a").length).toBeGreaterThanOrEqual(1);
});

test("keyConcurrency, concurrency and rate stack with fairness", async () => {
  await admin.setQueueLimits("q", { fairness: {}, keyConcurrency: 2, concurrency: 5 });
  await backlog("q", { a: 10, b: 10, c: 10 });
  const first: string[] = [];
  for (let i = 0; i < 4; i++) first.push(...(await claimKeys("q", 10)));
  expect(first.length).toBe(5);
  expect(first.filter((k) => k === "a").length).toBeLessThanOrEqual(2);
  expect(first.filter((k) => k === "b").length).toBeLessThanOrEqual(2);
  await finishRunning();
  await admin.setQueueLimits("q", { fairness: {}, rate: { limit: 3, window: "1h" } });
  expect((await claimKeys("q", 10)).length).toBe(3);
  expect(await claimKeys("q", 10)).toEqual([]);
});

test("dependsOn children wait for their parent and cancelled jobs are never claimed", async () => {
  await admin.setQueueLimits("q", { fairness: {} });
  const parent = await t.skipq.enqueue(job, { n: 1 }, { queue: "q", concurrencyKey: "a" });
  await t.skipq.enqueue(job, { n: 2 }, { queue: "q", concurrencyKey: "b", dependsOn: [parent.id] });
  const doomed = await t.skipq.enqueue(job, { n: 3 }, { queue: "q", concurrencyKey: "c" });
  await admin.cancelJob(doomed.id);
  expect(await claimKeys("q", 10)).toEqual(["a"]);
});

test("the SQL protocol's skipq_claim claims a fair queue fairly, and other queues as before", async () => {
  await admin.setQueueLimits("q", { fairness: {} });
  await backlog("q", { big: 50, a: 2 });
  await t.skipq.enqueue(job, {}, { queue: "plain" });
  const { rows } = await t.db.query(
    `SELECT queue, (SELECT concurrency_key FROM "${t.schema}".jobs j WHERE j.id = c.id) AS key
       FROM "${t.schema}".skipq_claim($1, 3, 'py-worker', 30000) c`,
    [["q", "plain"]],
  );
  expect(rows).toEqual([
    { queue: "q", key: "a" },
    { queue: "q", key: "big" },
    { queue: "q", key: "a" },
  ]);
  const rest = await t.db.query(`SELECT queue FROM "${t.schema}".skipq_claim($1, 3, 'py', 30000)`, [["plain"]]);
  expect(rest.rows).toEqual([{ queue: "plain" }]);
});

test("a worker drains a fair queue key by key, with completed history off", async () => {
  await t.db.query(`UPDATE "${t.schema}".settings SET keep_completed = false`);
  await admin.setQueueLimits("q", { fairness: {} });
  await backlog("q", { big: 40, a: 4, b: 4 });
  const order: string[] = [];
  const worker = t.skipq.worker({ queues: ["q"], concurrency: 1, batchSize: 1 });
  worker.register(job, async (_payload, ctx) => {
    order.push(ctx.job.concurrencyKey ?? "-");
  });
  for (let i = 0; i < 12; i++) await worker.runOnce();
  await worker.stop();
  await t.db.query(`UPDATE "${t.schema}".settings SET keep_completed = true`);
  expect(order.slice(0, 12)).toEqual(["a", "b", "big", "a", "b", "big", "a", "b", "big", "a", "b", "big"]);
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".job_history`);
  expect(rows[0].n).toBe(0);
});

test("bad fairness settings are refused with a clear error and change nothing", async () => {
  await admin.setQueueLimits("q", { concurrency: 3 });
  const bad: unknown[] = [
    { weights: { a: 0 } },
    { weights: { a: -1 } },
    { weights: { a: Number.POSITIVE_INFINITY } },
    { weights: { a: Number.NaN } },
    { weights: { a: "2" } },
    { weights: { "": 1 } },
    { weights: [1, 2] },
    { weight: { a: 1 } },
    "fair",
  ];
  for (const fairness of bad)
    await expect(admin.setQueueLimits("q", { fairness: fairness as never }), JSON.stringify(fairness)).rejects.toThrow(
      /fairness/,
    );
  expect((await admin.getQueueLimits("q"))[0]).toMatchObject({ concurrency: 3, fairness: null });
  await admin.setQueueLimits("q", { fairness: { weights: { a: 2.5 } } });
  expect((await admin.getQueueLimits("q"))[0]).toMatchObject({ concurrency: null, fairness: { weights: { a: 2.5 } } });
});
