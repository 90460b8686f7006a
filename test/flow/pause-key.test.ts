/**
 * "Pause this key until T" from inside a handler (a provider's Retry-After):
 * no worker starts a job with that key before T; other keys keep running.
 */
import { expect, test } from "vitest";
import { Admin, defineJob, type JobContext, RetryIn } from "../../src/index.js";
import { until, useTestQueue } from "../helpers.js";

const t = useTestQueue("pausekey");

async function claimTimes(): Promise<Map<string, { lockedAt: Date; status: string }>> {
  const { rows } = await t.db.query(`SELECT id, locked_at, status FROM "${t.schema}".all_jobs`);
  return new Map(rows.map((r) => [r.id, { lockedAt: r.locked_at, status: r.status }]));
}

test("a key paused by a handler starts no job before the pause ends, in any worker; other keys keep running", async () => {
  let pausedUntil: Date | undefined;
  // RetryIn does not use up an attempt, so remember who already backed off.
  const backedOff = new Set<string>();
  const call = defineJob<{ retryAfterMs?: number }>("call");
  const handler = async (payload: { retryAfterMs?: number }, ctx: JobContext<{ retryAfterMs?: number }>) => {
    if (payload.retryAfterMs && !backedOff.has(ctx.id)) {
      backedOff.add(ctx.id);
      pausedUntil = await ctx.pauseKey(payload.retryAfterMs);
      throw new RetryIn(payload.retryAfterMs);
    }
  };
  const options = { concurrency: 4, pollInterval: 50, maintenance: false } as const;
  const workers = [t.skipq.worker(options).register(call, handler), t.skipq.worker(options).register(call, handler)];
  await Promise.all(workers.map((w) => w.start()));

  const first = await t.skipq.enqueue("call", { retryAfterMs: 1000 }, { concurrencyKey: "acme" });
  await until("the first call asked to back off", () => pausedUntil);
  const sameKey = await t.skipq.enqueueMany(
    Array.from({ length: 4 }, () => ({ job: "call", payload: {}, concurrencyKey: "acme" })),
  );
  const otherKey = await t.skipq.enqueue("call", {}, { concurrencyKey: "globex" });
  const noKey = await t.skipq.enqueue("call", {});
  await until("every job completed", async () => {
    const times = await claimTimes();
    return [...times.values()].every((j) => j.status === "completed");
  });
  await Promise.all(workers.map((w) => w.stop()));

  const times = await claimTimes();
  const until_ = pausedUntil as Date;
  for (const { id } of [first, ...sameKey])
    expect(times.get(id)?.lockedAt.getTime()).toBeGreaterThanOrEqual(until_.getTime());
  // Jobs of other keys, and without a key, were not held back.
  expect(times.get(otherKey.id)?.lockedAt.getTime()).toBeLessThan(until_.getTime());
  expect(times.get(noKey.id)?.lockedAt.getTime()).toBeLessThan(until_.getTime());
  expect(await new Admin(t.skipq).pausedKeys()).toEqual([]);
});

test("a queue-wide timed pause holds every job of the queue until it ends, and resumeKey ends it early", async () => {
  const admin = new Admin(t.skipq);
  await admin.pauseKey("q2", null, "1h");
  expect(await admin.pausedKeys("q2")).toEqual([{ queue: "q2", key: null, pausedUntil: expect.any(Date) }]);
  const worker = t.skipq.worker({ queues: ["q2"], pollInterval: 50, maintenance: false }).register("call", () => {});
  await worker.start();
  const { id } = await t.skipq.enqueue("call", {}, { queue: "q2" });
  expect(await worker.runOnce()).toBe(0);
  expect(await admin.resumeKey("q2", null)).toBe(true);
  await until("the job ran after the pause ended", async () => (await admin.getJob(id))?.status === "completed");
  await worker.stop();
});
