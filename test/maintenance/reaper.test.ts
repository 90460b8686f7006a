/**
 * The reaper: returns expired leases to pending (attempt counted) or dead,
 * never touches a live or finished job, and runs only in the leader.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, type Worker } from "../../src/index.js";
import { finishJobs, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("reaper");
let w: Worker;
beforeAll(async () => {
  w = t.skipq.worker({ listen: false });
  // The worker is never started: take the leader lease by hand, as its maintainer would.
  expect(await w.maintainer?.leader.tryAcquire()).toBe(true);
});
afterAll(async () => {
  await w.stop();
});

async function claimAll(queue: string): Promise<string[]> {
  const { rows } = await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [
    [queue],
    100,
    "crashed-worker",
    30_000,
  ]);
  return rows.map((r) => r.id);
}

test("the reaper returns an expired job to pending with the attempt counted, and exhausted ones to dead", async () => {
  const again = await t.skipq.enqueue("r", {}, { queue: "expire", maxAttempts: 3 });
  const last = await t.skipq.enqueue("r", {}, { queue: "expire", maxAttempts: 1 });
  expect(new Set(await claimAll("expire"))).toEqual(new Set([again.id, last.id]));
  const expired = await t.db.query(
    `UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 ms' WHERE queue = 'expire' AND status = 'running'`,
  );
  expect(expired.rowCount).toBe(2);
  // Its pass skips rows another transaction holds (SKIP LOCKED), so it may take a second pass: until both.
  const reaped = new Set<string>();
  await until("both expired leases reaped", async () => {
    const result = await w.reaper?.runOnce();
    expect(result?.leader).toBe(true);
    for (const r of result?.reaped ?? []) reaped.add(r.id);
    return reaped.size >= 2;
  });
  expect(reaped).toEqual(new Set([again.id, last.id]));
  const admin = new Admin(t.skipq);
  expect(await admin.getJob(again.id)).toMatchObject({ status: "pending", attempts: 1, lease: null });
  expect((await admin.getJob(again.id))?.last_error).toContain("lease expired: worker crashed-worker");
  expect(await admin.getJob(last.id)).toMatchObject({ status: "dead", attempts: 1 });
});

test("a reaped attempt is recorded: its worker, when it was last heard of, and the lease-expired error", async () => {
  const again = await t.skipq.enqueue("r", {}, { queue: "expire-log", maxAttempts: 3 });
  const last = await t.skipq.enqueue("r", {}, { queue: "expire-log", maxAttempts: 1 });
  await claimAll("expire-log");
  await t.db.query(
    `UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 ms' WHERE queue = 'expire-log'`,
  );
  await w.reaper?.runOnce();
  const admin = new Admin(t.skipq);
  for (const [id, status] of [
    [again.id, "pending"],
    [last.id, "dead"],
  ] as const) {
    const job = await admin.getJob(id);
    expect(job?.status).toBe(status);
    expect(job?.attempt_logs).toHaveLength(1);
    const entry = job?.attempt_logs?.[0];
    expect(entry).toMatchObject({ attempt: 1, worker: "crashed-worker", startedAt: null, outcome: "lease expired" });
    expect(entry?.error).toContain("lease expired: worker crashed-worker");
    expect(Date.parse(entry?.lastSeenAt as string)).toBeLessThanOrEqual(Date.parse(entry?.endedAt as string));
  }
});

test("the reaper never touches a live lease or a finished job", async () => {
  const live = await t.skipq.enqueue("r", {}, { queue: "live" });
  const done = await t.skipq.enqueue("r", {}, { queue: "done" });
  await claimAll("live");
  await claimAll("done");
  await t.db.query(`UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 hour' WHERE id = $1`, [
    done.id,
  ]);
  await finishJobs(t.db, t.schema, [done.id], "completed");
  const before = await t.db.query(
    `SELECT id, status, lease, updated_at FROM "${t.schema}".all_jobs WHERE id = ANY($1::bigint[]) ORDER BY id`,
    [[live.id, done.id]],
  );
  const result = await w.reaper?.runOnce();
  expect(result?.reaped.map((r) => r.id)).not.toContain(live.id);
  expect(result?.reaped.map((r) => r.id)).not.toContain(done.id);
  const after = await t.db.query(
    `SELECT id, status, lease, updated_at FROM "${t.schema}".all_jobs WHERE id = ANY($1::bigint[]) ORDER BY id`,
    [[live.id, done.id]],
  );
  expect(after.rows).toEqual(before.rows);
});

test("only the process holding the leader lease reaps", async () => {
  const lease = t.skipq.store.sql.maintenance;
  // Another process takes the lease (this one's ran out).
  await t.db.query(`UPDATE "${t.schema}".leaders SET holder = 'other', expires_at = now() + interval '1 minute'`);
  expect(await w.maintainer?.leader.tryAcquire()).toBe(false);
  expect((await w.reaper?.runOnce())?.leader).toBe(false);
  await t.db.query(lease.leaderRelease.text, ["maintainer", "other"]);
  expect(await w.maintainer?.leader.tryAcquire()).toBe(true);
  expect((await w.reaper?.runOnce())?.leader).toBe(true);
});
