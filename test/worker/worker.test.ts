/**
 * The worker: outcomes (complete, retry, dead, snooze, cancel), fencing of
 * stale outcomes, heartbeats, lost leases, unknown kinds, hostile handlers,
 * graceful shutdown, listener loss and pool sizing.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { z } from "zod";
import {
  Admin,
  CancelJob,
  defineJob,
  FailPermanently,
  type JobContext,
  type Outcome,
  PoolTooSmallError,
  RetryIn,
  silentLogger,
  type Worker,
  type WorkerOptions,
} from "../../src/index.js";
import { Reaper } from "../../src/maintenance/reaper.js";
import { until, useTestQueue } from "../helpers.js";

const t = useTestQueue("worker");
let admin: Admin;
const workers: Worker[] = [];
beforeAll(async () => {
  admin = new Admin(t.skipq);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

/** A worker on its own queue, so tests in this file never take each other's jobs. */
function worker(queue: string, options: WorkerOptions = {}): Worker {
  const w = t.skipq.worker({ queues: [queue], pollInterval: 100, ...options });
  workers.push(w);
  return w;
}

async function job(id: string) {
  const row = await admin.getJob(id);
  if (!row) throw new Error(`job ${id} vanished`);
  return row;
}

test("a job whose handler resolves is completed once", async () => {
  let runs = 0;
  const w = worker("ok").register("ok", () => {
    runs++;
  });
  await w.start();
  const { id } = await t.skipq.enqueue("ok", {}, { queue: "ok" });
  await until("completed", async () => (await job(id)).status === "completed");
  expect(runs).toBe(1);
  expect((await job(id)).completed_at).not.toBeNull();
  expect((await job(id)).lease).toBeNull();
});

test("a failing job goes back to pending with backoff from the database clock, then dead when attempts are used up", async () => {
  const w = worker("fail", { backoff: { baseMs: 60_000, jitter: 0 } }).register("fail", () => {
    throw new Error("boom 42");
  });
  await w.start();
  const { id } = await t.skipq.enqueue("fail", {}, { queue: "fail", maxAttempts: 2 });
  await until("first failure", async () => (await job(id)).attempts === 1 && (await job(id)).status === "pending");
  const { rows } = await t.db.query(
    `SELECT EXTRACT(EPOCH FROM run_at - updated_at)::float AS wait FROM "${t.schema}".all_jobs WHERE id = $1`,
    [id],
  );
  expect(rows[0].wait).toBeCloseTo(60, 0);
  const first = await job(id);
  expect(first.last_error).toMatch(/boom 42/);
  expect(first.last_error).toMatch(/at /); // the stack is kept
  expect(first.error_fingerprint).toMatch(/^[0-9a-f]{16}$/);
  await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() WHERE id = $1`, [id]);
  await until("dead", async () => (await job(id)).status === "dead");
  expect((await job(id)).attempts).toBe(2);
});

test("jobEnd reports the attempt that uses up a job's attempts as dead, the ones before it as retry", async () => {
  const ends: Array<[number, Outcome]> = [];
  const w = worker("last-attempt", { backoff: { baseMs: 1, jitter: 0 } }).register("last", () => {
    throw new Error("no luck");
  });
  w.on("jobEnd", (ended, outcome) => ends.push([ended.attempt, outcome]));
  await w.start();
  const { id } = await t.skipq.enqueue("last", {}, { queue: "last-attempt", maxAttempts: 2 });
  await until("dead", async () => (await job(id)).status === "dead");
  await until("both attempts ended", () => ends.length === 2);
  expect(ends).toEqual([
    [1, "retry"],
    [2, "dead"],
  ]);
  expect(w.stats.failed).toBe(2);
  expect((await job(id)).last_error).toMatch(/no luck/);
});

test("non-Error throws, rejected promises and late rejections are recorded and never crash the process", async () => {
  const shapes: Array<(ctx: JobContext) => unknown> = [
    () => {
      throw "a string";
    },
    () => Promise.reject({ weird: true }),
    () => {
      throw null;
    },
    async () => {
      throw new Error("x\u0000y".repeat(10_000)); // NUL bytes and 40 KB of message
    },
  ];
  const w = worker("shapes").register("shape", (payload, ctx) => {
    const shape = shapes[(payload as { n: number }).n];
    return shape?.(ctx);
  });
  await w.start();
  const ids = await Promise.all(
    shapes.map((_, n) => t.skipq.enqueue("shape", { n }, { queue: "shapes", maxAttempts: 1 })),
  );
  await until("all dead", async () => {
    for (const { id } of ids) if ((await job(id)).status !== "dead") return false;
    return true;
  });
  expect((await job(ids[0]?.id as string)).last_error).toContain("non-Error thrown: a string");
  expect((await job(ids[1]?.id as string)).last_error).toContain('{"weird":true}');
  const long = (await job(ids[3]?.id as string)).last_error ?? "";
  expect(long).not.toContain("\u0000");
  expect(long.length).toBeLessThan(9000);
});

test("RetryIn snoozes without using an attempt; FailPermanently is dead at once; CancelJob ends cancelled", async () => {
  let snoozes = 0;
  const w = worker("helpers")
    .register("snooze", () => {
      if (snoozes++ === 0) throw new RetryIn(10);
    })
    .register("fatal", () => {
      throw new FailPermanently("card declined");
    })
    .register("cancel", () => {
      throw new CancelJob("user left");
    });
  await w.start();
  const s = await t.skipq.enqueue("snooze", {}, { queue: "helpers", maxAttempts: 1 });
  const f = await t.skipq.enqueue("fatal", {}, { queue: "helpers", maxAttempts: 5 });
  const c = await t.skipq.enqueue("cancel", {}, { queue: "helpers" });
  await until(
    "settled",
    async () =>
      (await job(s.id)).status === "completed" &&
      (await job(f.id)).status === "dead" &&
      (await job(c.id)).status === "cancelled",
  );
  expect((await job(s.id)).attempts).toBe(1); // two runs, one attempt counted
  expect((await job(f.id)).attempts).toBe(1);
  expect((await job(f.id)).last_error).toContain("card declined");
});

test("a kind this worker has no handler for is handed back without using an attempt, and runs where it is handled", async () => {
  const w = worker("unknown").register("known-kind", () => undefined);
  await w.start();
  const unknown = await t.skipq.enqueue("knwon-kind", {}, { queue: "unknown", maxAttempts: 1 });
  const known = await t.skipq.enqueue("known-kind", {}, { queue: "unknown" });
  await until("the unknown kind handed back, the known one completed", async () => {
    const u = await job(unknown.id);
    return u.status === "pending" && u.last_error !== null && (await job(known.id)).status === "completed";
  });
  const u = await job(unknown.id);
  // maxAttempts 1, and not dead: an old worker in a rolling deploy must not bury the new version's jobs.
  expect(u.attempts).toBe(0);
  expect(u.last_error).toContain('no handler is registered for job kind "knwon-kind" (did you mean "known-kind"?)');
  const due = await t.db.query(
    `SELECT extract(epoch FROM run_at - now())::float8 AS s FROM "${t.schema}".jobs WHERE id = $1`,
    [unknown.id],
  );
  expect(due.rows[0].s).toBeGreaterThan(20);
  expect(due.rows[0].s).toBeLessThanOrEqual(30);
  // The new version's worker handles the kind and runs it once it is due (made due now, not in 30 s).
  await w.stop();
  await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() WHERE id = $1`, [unknown.id]);
  await worker("unknown")
    .register("knwon-kind", () => undefined)
    .start();
  await until("handled where it is registered", async () => (await job(unknown.id)).status === "completed");
  expect((await job(unknown.id)).attempts).toBe(1);
});

test("a payload that fails the job's schema goes to dead after one attempt, without a retry storm", async () => {
  const typed = defineJob("typed", { schema: z.object({ n: z.number() }), queue: "typed" });
  let runs = 0;
  const w = worker("typed").register(typed, () => {
    runs++;
  });
  await w.start();
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".jobs (queue, kind, payload) VALUES ('typed', 'typed', '{"n":"nope"}') RETURNING id`,
  );
  await until("dead", async () => (await job(rows[0].id)).status === "dead");
  expect((await job(rows[0].id)).attempts).toBe(1);
  expect(runs).toBe(0);
});

test("a stale outcome is rejected and counted: a worker whose lease expired cannot overwrite the new holder", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  // A long poll and a listener: the worker wakes for the enqueue, then never claims
  // again by itself while the test reaps and re-claims the job as another worker.
  // Concurrency 1: its one slot stays busy with the stale handler, so the reaper's '!ready' wakes no claim of its own.
  const w = worker("stale", { maintenance: false, pollInterval: 60_000, concurrency: 1, prefetch: 0 }).register(
    "slow",
    () => gate,
  );
  const listening = new Promise<void>((resolve) => w.on("listener", (c) => c && resolve()));
  await w.start();
  await listening;
  const { id } = await t.skipq.enqueue("slow", {}, { queue: "stale" });
  await until("running", async () => (await job(id)).status === "running");
  const firstLease = (await job(id)).lease;
  // The lease expires (back-dated, no waiting), the reaper returns the job, another worker claims it.
  await t.db.query(`UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [id]);
  // A reaper pass (whichever process leads, the statement is the same).
  const reaped = await new Reaper({ store: t.skipq.store, intervalMs: 1000, logger: silentLogger }).runOnce();
  expect(reaped.reaped.map((r) => r.id)).toEqual([id]);
  const { rows } = await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [["stale"], 1, "thief", 30_000]);
  expect(rows[0].id).toBe(id);
  const stale = new Promise<string[]>((resolve) => w.once("staleOutcome", resolve));
  release();
  expect(await stale).toEqual([id]);
  expect(w.stats.staleOutcomes).toBe(1);
  const after = await job(id);
  expect(after.status).toBe("running");
  expect(after.locked_by).toBe("thief");
  expect(after.lease).not.toBe(firstLease);
});

test("a running job's lease is extended by heartbeats while its handler runs", async () => {
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  const w = worker("beat", { lockTimeout: 1500, heartbeatInterval: 100 }).register("long", () => gate);
  await w.start();
  const { id } = await t.skipq.enqueue("long", {}, { queue: "beat" });
  await until("running", async () => (await job(id)).status === "running");
  const first = (await job(id)).lease_expires_at as Date;
  await until("lease extended", async () => ((await job(id)).lease_expires_at as Date) > first);
  release();
  await until("completed", async () => (await job(id)).status === "completed");
  expect(w.stats.leasesLost).toBe(0);
});

test("cancelling a running job aborts its handler's signal and its outcome is not recorded, even without the notification", async () => {
  let aborted: unknown;
  // No listener: the cancel's NOTIFY never arrives, so the next heartbeat finds the lease gone (test/cancel.test.ts covers the NOTIFY).
  const w = worker("cancel-running", { heartbeatInterval: 100, listen: false }).register(
    "waits",
    (_p, ctx) =>
      new Promise<void>((resolve) => {
        ctx.signal.addEventListener("abort", () => {
          aborted = ctx.signal.reason;
          resolve(); // even a handler that "succeeds" after abort cannot complete the job
        });
      }),
  );
  await w.start();
  const { id } = await t.skipq.enqueue("waits", {}, { queue: "cancel-running" });
  await until("running", async () => (await job(id)).status === "running");
  await admin.cancelJob(id);
  await until("aborted", () => aborted !== undefined);
  // The heartbeat sees the lease gone and the job's history says why: a cancel, not a lost lease.
  expect(aborted).toMatchObject({ code: "SKIPQ_CANCEL" });
  expect((await job(id)).status).toBe("cancelled");
  expect(w.stats.leasesLost).toBe(0);
});

test("a graceful stop finishes in-flight jobs, then releases those that overrun without using an attempt, leaving nothing running", async () => {
  const w = worker("shutdown", { concurrency: 4, shutdownTimeout: 200, abortGrace: 100 })
    .register("quick", () => new Promise((r) => setTimeout(r, 20)))
    .register("stubborn", () => new Promise(() => undefined)); // ignores its signal, never settles
  await w.start();
  const quick = await t.skipq.enqueue("quick", {}, { queue: "shutdown" });
  const stubborn = await t.skipq.enqueue("stubborn", {}, { queue: "shutdown" });
  await until("both claimed", async () => (await job(stubborn.id)).status === "running");
  await w.stop();
  expect((await job(quick.id)).status).toBe("completed");
  const released = await job(stubborn.id);
  expect(released.status).toBe("pending");
  expect(released.attempts).toBe(0);
  expect(released.lease).toBeNull();
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE queue = 'shutdown' AND status = 'running'`,
  );
  expect(rows[0].n).toBe(0);
});

test("a second stop() skips the soft timeout", async () => {
  const w = worker("twice", { shutdownTimeout: 60_000, abortGrace: 50 }).register(
    "hang",
    () => new Promise(() => undefined),
  );
  await w.start();
  const { id } = await t.skipq.enqueue("hang", {}, { queue: "twice" });
  await until("running", async () => (await job(id)).status === "running");
  const started = Date.now();
  const first = w.stop();
  await until("stopping", () => Date.now() - started > 50);
  await w.stop();
  await first;
  expect(Date.now() - started).toBeLessThan(10_000);
  expect((await job(id)).status).toBe("pending");
});

test("a per-job timeout frees the slot of a handler that never resolves, and the job is retried", async () => {
  let hung = 0;
  const w = worker("timeout", { concurrency: 1, jobTimeout: 100 })
    .register("hangs", () => {
      hung++;
      return new Promise(() => undefined);
    })
    .register("next", () => undefined);
  await w.start();
  const h = await t.skipq.enqueue("hangs", {}, { queue: "timeout", maxAttempts: 1, priority: 1 });
  const n = await t.skipq.enqueue("next", {}, { queue: "timeout" });
  // Completions and failures are separate statements of one flush: wait for both.
  await until(
    "next completed and the hung job dead",
    async () => (await job(n.id)).status === "completed" && (await job(h.id)).status === "dead",
  );
  expect((await job(h.id)).last_error).toContain("jobTimeout");
  expect(hung).toBe(1);
});

test("a job enqueued while the listener is down starts once it reconnects, not a poll interval later", async () => {
  const w = worker("relisten", { pollInterval: "20s" }).register("l", () => undefined);
  await w.start();
  await until("listening", () => w.listener?.connected);
  await t.db.query("SELECT pg_terminate_backend($1)", [w.listener?.backendPid]);
  await until("the listener is down", () => w.listener?.connected === false);
  const { id } = await t.skipq.enqueue("l", {}, { queue: "relisten" });
  await t.skipq.notifier.idle();
  // Its NOTIFY went out while nobody of this worker listened: only a claim after the reconnect finds it.
  const missed = w.listener?.connected === false;
  await until("completed", async () => (await job(id)).status === "completed", 30_000);
  const { rows } = await t.db.query(
    `SELECT EXTRACT(EPOCH FROM locked_at - created_at) * 1000 AS ms FROM "${t.schema}".job_history WHERE id = $1`,
    [id],
  );
  expect(missed).toBe(true);
  expect(Number(rows[0].ms)).toBeLessThan(10_000);
});

test("a killed listener connection does not stop processing, and it reconnects", async () => {
  const w = worker("listen", { pollInterval: 200 }).register("l", () => undefined);
  const connected = new Promise<void>((resolve) => w.on("listener", (c) => c && resolve()));
  await w.start();
  await connected;
  const pid = w.listener?.backendPid;
  expect(pid).toBeTypeOf("number");
  const reconnected = new Promise<void>((resolve) => {
    w.on("listener", (c) => {
      if (c) resolve();
    });
  });
  await t.db.query("SELECT pg_terminate_backend($1)", [pid]);
  const { id } = await t.skipq.enqueue("l", {}, { queue: "listen" });
  await until("completed while the listener is down or back", async () => (await job(id)).status === "completed");
  await reconnected;
  expect(w.listener?.backendPid).not.toBe(pid);
  const again = await t.skipq.enqueue("l", {}, { queue: "listen" });
  await until("completed after reconnect", async () => (await job(again.id)).status === "completed");
});

test("a lease shorter than 500 ms is refused when the worker is made, saying why, before any SQL", () => {
  for (const lockTimeout of [1, 499, "100ms"] as const)
    expect(() => t.skipq.worker({ lockTimeout }), String(lockTimeout)).toThrow(
      /lockTimeout must be at least 500 ms.*statement_timeout/,
    );
  expect(() => t.skipq.worker({ lockTimeout: 500 })).not.toThrow();
});

test("a worker given a pool too small for its concurrency says how large it must be", () => {
  const pool = new pg.Pool({ max: 5 });
  expect(() => t.skipq.worker({ pool, concurrency: 10 })).toThrow(PoolTooSmallError);
  expect(() => t.skipq.worker({ pool, concurrency: 10 })).toThrow(/at least 14/);
  void pool.end();
});

test("runOnce claims a batch, runs it and records the outcomes", async () => {
  const w = worker("once", { listen: false, maintenance: false }).register("o", () => undefined);
  await t.skipq.enqueueMany([1, 2, 3].map((n) => ({ job: "o", payload: { n }, queue: "once" })));
  expect(await w.runOnce()).toBe(3);
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE queue = 'once' AND status = 'completed'`,
  );
  expect(rows[0].n).toBe(3);
});
