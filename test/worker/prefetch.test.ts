/**
 * The hot path's optimisations keep the guarantees: prefetched jobs stay
 * within the lease bound, run in claim (priority) order, are released without
 * consuming an attempt at stop, and nothing is lost or run twice; coalesced
 * wake-ups and shared single-enqueue statements lose no wake-up and no job,
 * and a failing row fails only its own caller.
 */
import { afterEach, expect, test } from "vitest";
import type { Worker } from "../../src/index.js";
import { statusCounts, type TestQueue, testQueue, until } from "../helpers.js";

let t: TestQueue | undefined;
let worker: Worker | undefined;
afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await t?.cleanup();
  t = undefined;
});

function gate(): { wait: Promise<void>; open: () => void } {
  let open: () => void = () => undefined;
  const wait = new Promise<void>((resolve) => {
    open = resolve;
  });
  return { wait, open };
}

test("a worker holds at most concurrency + prefetch leases, and runs at most concurrency handlers", async () => {
  t = await testQueue("prefetch-bound");
  await t.skipq.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ job: "block", payload: { i } })));
  const release = gate();
  let maxRunning = 0;
  let running = 0;
  worker = t.skipq.worker({ concurrency: 4, prefetch: 3, pollInterval: "50ms" }).register("block", async () => {
    running++;
    maxRunning = Math.max(maxRunning, running);
    await release.wait;
    running--;
  });
  await worker.start();
  // Before any handler has finished, the buffer's target is min(prefetch, concurrency) = 3.
  await until("four handlers running and the buffer full", () => worker?.running === 4 && worker.buffered === 3);
  const held = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE status = 'running'`);
  expect(held.rows[0].n).toBe(7);
  release.open();
  await until("all completed", async () => (await statusCounts(t as TestQueue)).completed === 50);
  expect(maxRunning).toBe(4);
});

test("prefetched jobs start in claim order, so priority order holds within what was claimed", async () => {
  t = await testQueue("prefetch-order");
  const priorities = [0, 5, -3, 9, 1, 7, 2, 5, -1, 3, 8, 4];
  await t.skipq.enqueueMany(priorities.map((priority, i) => ({ job: "p", payload: { priority, i }, priority })));
  const started: number[] = [];
  worker = t.skipq.worker({ concurrency: 1, prefetch: 20 }).register("p", async (payload) => {
    started.push((payload as { priority: number }).priority);
  });
  await worker.start();
  await until("all run", () => started.length === priorities.length);
  expect(started).toEqual([...priorities].sort((a, b) => b - a));
});

test("slow handlers get next to no prefetch: the buffer holds about two claim round trips of work", async () => {
  t = await testQueue("prefetch-adaptive");
  await t.skipq.enqueueMany(Array.from({ length: 12 }, (_, i) => ({ job: "slow", payload: { i } })));
  let maxBuffered = 0;
  let done = 0;
  const w = t.skipq.worker({ concurrency: 1, prefetch: 50 }).register("slow", async () => {
    maxBuffered = Math.max(maxBuffered, w.buffered);
    await new Promise((resolve) => setTimeout(resolve, 100)); // the slow work itself, not synchronisation
    done++;
  });
  worker = w;
  await w.start();
  await until("all run", () => done === 12, 30_000);
  // Before any handler finished the target is `concurrency` (1); at 100 ms per job it stays ~1.
  expect(maxBuffered).toBeLessThanOrEqual(2);
});

test("at stop, buffered jobs go back to pending without consuming an attempt", async () => {
  t = await testQueue("prefetch-release");
  await t.skipq.enqueueMany(Array.from({ length: 20 }, (_, i) => ({ job: "slow", payload: { i } })));
  const release = gate();
  const w = t.skipq.worker({ concurrency: 5, prefetch: 5, shutdownTimeout: "10s" }).register("slow", async () => {
    await release.wait;
  });
  await w.start();
  await until("buffer full", () => w.running === 5 && w.buffered === 5);
  const stopping = w.stop();
  // The buffered jobs are released at once, while the running ones may still finish.
  await until("buffered jobs released", async () => (await statusCounts(t as TestQueue)).pending === 15);
  release.open();
  await stopping;
  const { rows } = await t.db.query(
    `SELECT status, attempts, count(*)::int AS n FROM "${t.schema}".all_jobs GROUP BY 1, 2 ORDER BY 1`,
  );
  expect(rows).toEqual([
    { status: "completed", attempts: 1, n: 5 },
    { status: "pending", attempts: 0, n: 15 },
  ]);
});

test("with prefetch and two claims in flight, every job runs exactly once and none is lost", async () => {
  t = await testQueue("prefetch-once");
  const total = 600;
  await t.skipq.enqueueMany(Array.from({ length: total }, (_, i) => ({ job: "count", payload: { i } })));
  const runs = new Map<number, number>();
  const workers = [0, 1].map(() =>
    (t as TestQueue).skipq.worker({ concurrency: 5, prefetch: 20 }).register("count", async (payload) => {
      const { i } = payload as { i: number };
      runs.set(i, (runs.get(i) ?? 0) + 1);
    }),
  );
  await Promise.all(workers.map((w) => w.start()));
  await until("all completed", async () => (await statusCounts(t as TestQueue)).completed === total);
  await Promise.all(workers.map((w) => w.stop()));
  expect(runs.size).toBe(total);
  expect([...runs.values()].every((n) => n === 1)).toBe(true);
});

test("single enqueues wake an idle worker long before its poll interval, with no wake-up lost", async () => {
  t = await testQueue("notify-coalesce");
  const seen = new Set<number>();
  worker = t.skipq.worker({ concurrency: 10, pollInterval: "60s" }).register("wake", async (payload) => {
    seen.add((payload as { i: number }).i);
  });
  await worker.start();
  await until("listener connected", () => worker?.listener?.connected === true);
  const skipq = t.skipq;
  const sentBefore = skipq.notifier.sent;
  // Bursts of concurrent enqueues, then a lone one after the worker went idle again.
  for (let burst = 0; burst < 5; burst++) {
    await Promise.all(Array.from({ length: 40 }, (_, k) => skipq.enqueue("wake", { i: burst * 40 + k })));
  }
  await until("every burst job ran", () => seen.size === 200, 15_000);
  await skipq.enqueue("wake", { i: 200 });
  await until("the lone job ran", () => seen.has(200), 15_000);
  // 201 enqueues, far fewer NOTIFY statements.
  expect(skipq.notifier.sent - sentBefore).toBeLessThan(100);
});

test("concurrent single enqueues share statements yet each gets its own job, and a failing row fails only its caller", async () => {
  t = await testQueue("single-batch");
  // A row the database itself refuses (validation cannot see it): only that enqueue may fail.
  await t.db.query(`
    CREATE FUNCTION "${t.schema}".refuse_boom() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF NEW.payload ? 'boom' THEN RAISE EXCEPTION 'boom refused'; END IF; RETURN NEW; END $$;
    CREATE TRIGGER refuse_boom BEFORE INSERT ON "${t.schema}".jobs FOR EACH ROW EXECUTE FUNCTION "${t.schema}".refuse_boom();
  `);
  const skipq = t.skipq;
  const calls = Array.from({ length: 30 }, (_, i) =>
    skipq.enqueue("x", i === 17 ? { boom: true } : { i }, i % 3 === 0 ? { idempotencyKey: `k${i % 6}` } : {}),
  );
  const settled = await Promise.allSettled(calls);
  const failed = settled.flatMap((s, i) => (s.status === "rejected" ? [i] : []));
  expect(failed).toEqual([17]);
  const ids = settled.flatMap((s) => (s.status === "fulfilled" ? [s.value] : []));
  // Keys k0 and k3 repeat (i = 0, 6, 12, ... map to k0/k0/k0... and k3): one job per key.
  const created = ids.filter((r) => r.created);
  const { rows } = await t.db.query(`SELECT id::text, payload FROM "${t.schema}".all_jobs ORDER BY id`);
  expect(rows.length).toBe(created.length);
  expect(new Set(created.map((r) => r.id)).size).toBe(created.length);
  for (const [i, s] of settled.entries()) {
    if (s.status !== "fulfilled" || !s.value.created) continue;
    expect(rows.find((r) => r.id === s.value.id)?.payload).toEqual({ i });
  }
});
