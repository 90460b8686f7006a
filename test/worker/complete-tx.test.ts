/**
 * ctx.completeTx (docs/jobs.md, "Completion inside your transaction"): a job's
 * completion written in the handler's own transaction, fenced by its lease —
 * completed exactly when that transaction commits, not at all when it rolls
 * back (the handler's own outcome applies then); a second completion of the
 * attempt and a stale lease are refused before the caller commits; and what
 * completion carries (results, dependents, uniqueness windows, waiters,
 * completed history off, ctx.spawn children) comes with the commit.
 */
import type pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  AlreadyCompletedError,
  type JobContext,
  LeaseLostError,
  type Outcome,
  ValidationError,
  type Worker,
} from "../../src/index.js";
import { gate, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("complete_tx");
let s: string;
const workers: Worker[] = [];
beforeAll(async () => {
  s = `"${t.schema}"`;
  await t.db.query(`CREATE TABLE ${s}.orders (job_id bigint PRIMARY KEY, note text)`);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

type Body = (payload: unknown, ctx: JobContext) => unknown;

/** A worker for `queue` running `body` for kind "order", with the outcomes its jobEnd events reported. */
function worker(queue: string, body: Body, options: { start?: boolean } = {}) {
  const ended: Array<{ id: string; outcome: Outcome }> = [];
  const w = t.skipq
    .worker({ queues: [queue], maintenance: false, listen: options.start ?? false, pollInterval: 50 })
    .register("order", body);
  w.on("jobEnd", (job, outcome) => ended.push({ id: job.id, outcome }));
  workers.push(w);
  return { w, ended };
}

/** Runs `body` in a transaction on a client of the test's pool; commits, or rolls back when it throws. */
async function inTransaction(body: (client: pg.PoolClient) => Promise<void>, rollback = false): Promise<void> {
  const client = await t.db.connect();
  try {
    await client.query("BEGIN");
    await body(client);
    await client.query(rollback ? "ROLLBACK" : "COMMIT");
  } catch (error) {
    await client.query("ROLLBACK");
    throw error;
  } finally {
    client.release();
  }
}

async function job(id: string) {
  const { rows } = await t.db.query(
    `SELECT status, attempts, result, lease::text, last_error FROM ${s}.all_jobs WHERE id = $1`,
    [id],
  );
  return rows[0];
}

async function orders(id: string): Promise<number> {
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM ${s}.orders WHERE job_id = $1`, [id]);
  return rows[0].n;
}

const order = (client: pg.PoolClient, ctx: JobContext) =>
  client.query(`INSERT INTO ${s}.orders (job_id) VALUES ($1)`, [ctx.id]);

test("a completeTx that commits completes the job with its result then, and the worker records no second outcome", async () => {
  let seenInside: string | undefined;
  const { w, ended } = worker("commit", async (_p, ctx) => {
    await inTransaction(async (client) => {
      await order(client, ctx);
      await ctx.completeTx(client, { charged: 42 });
      // Not yet visible outside the transaction: the job is still running there.
      seenInside = (await job(ctx.id))?.status;
    });
    return { ignored: true };
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "commit" });
  expect(await w.runOnce()).toBe(1);
  expect(seenInside).toBe("running");
  expect(await job(id)).toMatchObject({ status: "completed", attempts: 1, result: { charged: 42 } });
  expect(await orders(id)).toBe(1);
  expect(ended).toEqual([{ id, outcome: "completed" }]);
  // A second, fenced outcome from the worker would have been refused and counted here.
  expect(w.stats).toMatchObject({ completed: 1, staleOutcomes: 0, failed: 0 });
});

test("a completeTx that rolls back records nothing, and the handler's returned result completes the job", async () => {
  const { w, ended } = worker("rollback-return", async (_p, ctx) => {
    await inTransaction(async (client) => {
      await order(client, ctx);
      await ctx.completeTx(client, { charged: 42 });
    }, true);
    return { fallback: true };
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "rollback-return" });
  expect(await w.runOnce()).toBe(1);
  expect(await job(id)).toMatchObject({ status: "completed", result: { fallback: true } });
  expect(await orders(id)).toBe(0);
  expect(ended).toEqual([{ id, outcome: "completed" }]);
  expect(w.stats).toMatchObject({ completed: 1, staleOutcomes: 0 });
});

test("a completeTx that rolls back before the handler throws leaves the job to its retry policy", async () => {
  const { w, ended } = worker("rollback-throw", async (_p, ctx) => {
    await inTransaction(async (client) => {
      await order(client, ctx);
      await ctx.completeTx(client);
      throw new Error("charge declined");
    });
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "rollback-throw" });
  expect(await w.runOnce()).toBe(1);
  const row = await job(id);
  expect(row).toMatchObject({ status: "pending", attempts: 1, lease: null });
  expect(row.last_error).toContain("charge declined");
  expect(await orders(id)).toBe(0);
  expect(ended).toEqual([{ id, outcome: "retry" }]);
});

test("a handler that throws after its completeTx committed leaves the job completed, not retried", async () => {
  const { w, ended } = worker("commit-throw", async (_p, ctx) => {
    await inTransaction(async (client) => {
      await order(client, ctx);
      await ctx.completeTx(client);
    });
    throw new Error("after the commit");
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "commit-throw" });
  expect(await w.runOnce()).toBe(1);
  expect(await job(id)).toMatchObject({ status: "completed", last_error: null });
  expect(ended).toEqual([{ id, outcome: "completed" }]);
  expect(w.stats).toMatchObject({ completed: 1, failed: 0, staleOutcomes: 0 });
});

test("a second completion of the same attempt is refused with AlreadyCompletedError, in the same or a later transaction", async () => {
  const errors: unknown[] = [];
  const { w } = worker("twice", async (_p, ctx) => {
    await inTransaction(async (client) => {
      await ctx.completeTx(client, 1);
      errors.push(await ctx.completeTx(client, 2).catch((e) => e));
    });
    await inTransaction(async (client) => {
      await order(client, ctx);
      errors.push(await ctx.completeTx(client, 3).catch((e) => e));
    });
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "twice" });
  expect(await w.runOnce()).toBe(1);
  expect(errors).toHaveLength(2);
  for (const error of errors) {
    expect(error).toBeInstanceOf(AlreadyCompletedError);
    expect(error).toMatchObject({ code: "SKIPQ_ALREADY_COMPLETED", jobId: id });
  }
  expect(await job(id)).toMatchObject({ status: "completed", result: 1 });
  expect(await orders(id)).toBe(1); // the second transaction committed its own row, not a completion
});

test("after a rolled-back completeTx the attempt may complete in a new transaction", async () => {
  const { w } = worker("again", async (_p, ctx) => {
    await inTransaction((client) => ctx.completeTx(client, "first"), true);
    await inTransaction(async (client) => {
      await order(client, ctx);
      await ctx.completeTx(client, "second");
    });
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "again" });
  expect(await w.runOnce()).toBe(1);
  expect(await job(id)).toMatchObject({ status: "completed", result: "second" });
  expect(await orders(id)).toBe(1);
});

test("a stale lease makes completeTx throw LeaseLostError before the caller commits, and nothing is written", async () => {
  const thrown: unknown[] = [];
  const { w } = worker("stale", async (_p, ctx) => {
    // Another claim holds the job now (as after an expired lease, reaped and claimed again).
    await t.db.query(`UPDATE ${s}.jobs SET lease = lease + 1 WHERE id = $1`, [ctx.id]);
    await inTransaction(async (client) => {
      await order(client, ctx);
      await ctx.completeTx(client, { charged: 1 });
    }).catch((error) => {
      thrown.push(error);
      throw error;
    });
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "stale" });
  expect(await w.runOnce()).toBe(1);
  expect(thrown).toHaveLength(1);
  expect(thrown[0]).toBeInstanceOf(LeaseLostError);
  expect(thrown[0]).toMatchObject({ code: "SKIPQ_LEASE_LOST", jobId: id });
  expect(await orders(id)).toBe(0);
  // The new holder's job is untouched: still running, no result; the worker's own retry was fenced out.
  expect(await job(id)).toMatchObject({ status: "running", result: null });
  expect(w.stats.staleOutcomes).toBe(1);
});

test("completeTx refuses a pool or a non-client and changes nothing; a result it cannot store is refused too", async () => {
  const thrown: unknown[] = [];
  const { w } = worker("bad-input", async (_p, ctx) => {
    thrown.push(await ctx.completeTx(t.db).catch((e) => e));
    thrown.push(await ctx.completeTx({} as never).catch((e) => e));
    thrown.push(await inTransaction((client) => ctx.completeTx(client, { big: "x".repeat(70_000) })).catch((e) => e));
    await inTransaction((client) => ctx.completeTx(client, "ok"));
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "bad-input" });
  expect(await w.runOnce()).toBe(1);
  expect(thrown[0]).toBeInstanceOf(ValidationError);
  expect(String(thrown[0])).toContain("pg.Pool");
  expect(thrown[1]).toBeInstanceOf(ValidationError);
  expect(String(thrown[1])).toContain("needs the client your transaction runs on");
  expect(thrown[2]).toMatchObject({ code: "SKIPQ_RESULT_TOO_LARGE" });
  expect(await job(id)).toMatchObject({ status: "completed", result: "ok", attempts: 1 });
});

test("a handler that returns with its completeTx transaction still open is settled when that transaction ends", async () => {
  const open: pg.PoolClient[] = [];
  const returned = gate();
  const { w, ended } = worker(
    "left-open",
    async (_p, ctx) => {
      const client = await t.db.connect();
      await client.query("BEGIN");
      await order(client, ctx);
      await ctx.completeTx(client, { late: true });
      open.push(client);
      returned.open();
      return { handler: true };
    },
    { start: true },
  );
  await w.start();
  const first = await t.skipq.enqueue("order", {}, { queue: "left-open" });
  await returned.promise;
  // The handler returned; the worker waits for the open transaction and writes nothing meanwhile.
  await until("the worker waits on the open transaction", async () => {
    const { rows } = await t.db.query(
      `SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%' AND query LIKE '%${t.schema}%'`,
    );
    return rows[0].n === 1;
  });
  expect(ended).toEqual([]);
  expect(await job(first.id)).toMatchObject({ status: "running" });
  const client = open[0] as pg.PoolClient;
  await client.query("ROLLBACK");
  client.release();
  // Rolled back: the handler's own outcome (its result) is recorded.
  await until("the handler's outcome is recorded", async () => (await job(first.id))?.status === "completed");
  expect(await job(first.id)).toMatchObject({ result: { handler: true } });
  expect(await orders(first.id)).toBe(0);
  expect(ended).toEqual([{ id: first.id, outcome: "completed" }]);
  await w.stop();
  expect(w.stats.staleOutcomes).toBe(0);
});

test("a completeTx job's dependents become ready, its waiters settle and its live uniqueness window ends exactly at the commit", async () => {
  const committed = gate();
  const inside = gate();
  const { w } = worker("features", async (_p, ctx) => {
    await inTransaction(async (client) => {
      await ctx.completeTx(client, { total: 7 });
      inside.open();
      await committed.promise;
    });
  });
  const parent = await t.skipq.enqueue(
    "order",
    {},
    { queue: "features", unique: { key: "order:1", period: "1h", states: "live" } },
  );
  const child = await t.skipq.enqueue("after", {}, { queue: "features-children", dependsOn: [parent.id] });
  const held = await t.skipq.enqueue(
    "order",
    {},
    { queue: "features", unique: { key: "order:1", period: "1h", states: "live" } },
  );
  expect(held).toEqual({ id: parent.id, created: false });
  let settled = false;
  const waited = t.skipq.waitFor(parent.id, { timeout: "30s" }).finally(() => {
    settled = true;
  });
  // runOnce is one claim, and the wait's mark locks the job's row while it is written (a claim meanwhile skips
  // it; a running worker is woken again for it, runOnce is not): claim once the mark is in.
  await until("the wait's mark is on the job", async () => {
    const { rows } = await t.db.query(`SELECT notify_on_finish FROM ${s}.jobs WHERE id = $1`, [parent.id]);
    return rows[0]?.notify_on_finish === true;
  });
  const ran = w.runOnce();
  await inside.promise;
  // Inside the open transaction: nothing of it is visible yet (an enqueue of the key would wait for it).
  expect((await job(child.id)).status).toBe("waiting");
  expect((await job(parent.id)).status).toBe("running");
  expect(settled).toBe(false);
  committed.open();
  await ran;
  expect((await job(child.id)).status).toBe("pending");
  expect(await waited).toMatchObject({ status: "completed", result: { total: 7 } });
  const next = await t.skipq.enqueue(
    "order",
    {},
    { queue: "features", unique: { key: "order:1", period: "1h", states: "live" } },
  );
  expect(next.created).toBe(true);
});

test("with completed history off a committed completeTx leaves no row, and its children spawned with ctx.spawn exist", async () => {
  await t.db.query(`UPDATE ${s}.settings SET keep_completed = false`);
  try {
    const { w } = worker("history-off", async (_p, ctx) => {
      await ctx.spawn([{ job: "child", payload: { n: 1 }, queue: "history-off-children" }]);
      await inTransaction(async (client) => {
        await order(client, ctx);
        await ctx.completeTx(client);
      });
    });
    const { id } = await t.skipq.enqueue("order", {}, { queue: "history-off" });
    expect(await w.runOnce()).toBe(1);
    expect(await job(id)).toBeUndefined();
    expect(await orders(id)).toBe(1);
    const { rows } = await t.db.query(`SELECT status FROM ${s}.all_jobs WHERE queue = 'history-off-children'`);
    expect(rows).toEqual([{ status: "pending" }]);
  } finally {
    await t.db.query(`UPDATE ${s}.settings SET keep_completed = true`);
  }
});

test("ctx.spawn children of a rolled-back completeTx do not exist until the handler's own outcome commits them", async () => {
  let childrenInside = -1;
  const { w } = worker("spawn-rollback", async (_p, ctx) => {
    await ctx.spawn([{ job: "child", payload: {}, queue: "spawn-rollback-children" }]);
    await inTransaction(async (client) => {
      await ctx.completeTx(client);
      const { rows } = await client.query(
        `SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'spawn-rollback-children'`,
      );
      childrenInside = rows[0].n;
    }, true);
    const { rows } = await t.db.query(
      `SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'spawn-rollback-children'`,
    );
    if (rows[0].n !== 0) throw new Error("children survived the rollback");
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "spawn-rollback" });
  expect(await w.runOnce()).toBe(1);
  expect(childrenInside).toBe(1);
  expect(await job(id)).toMatchObject({ status: "completed" });
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'spawn-rollback-children'`,
  );
  expect(rows[0].n).toBe(1);
});

test("a completeTx attempt's ctx.log lines are stored with the job it completes", async () => {
  const { w } = worker("logs", async (_p, ctx) => {
    ctx.log.info({ step: 1 }, "charging");
    await inTransaction((client) => ctx.completeTx(client));
  });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "logs" });
  expect(await w.runOnce()).toBe(1);
  const { rows } = await t.db.query(`SELECT attempt_logs FROM ${s}.all_jobs WHERE id = $1`, [id]);
  expect(rows[0].attempt_logs).toHaveLength(1);
  expect(rows[0].attempt_logs[0]).toMatchObject({ attempt: 1, outcome: "completed" });
  expect(JSON.stringify(rows[0].attempt_logs[0].lines)).toContain("charging");
});

test("a handler that times out after its completeTx committed leaves the job completed, not retried", async () => {
  const ended: Outcome[] = [];
  const w = t.skipq
    .worker({ queues: ["timeout"], maintenance: false, listen: false, jobTimeout: 200 })
    .register("order", async (_p, ctx) => {
      await inTransaction(async (client) => {
        await order(client, ctx);
        await ctx.completeTx(client, "done");
      });
      await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
    });
  w.on("jobEnd", (_job, outcome) => ended.push(outcome));
  workers.push(w);
  const { id } = await t.skipq.enqueue("order", {}, { queue: "timeout" });
  expect(await w.runOnce()).toBe(1);
  expect(await job(id)).toMatchObject({ status: "completed", result: "done", attempts: 1, last_error: null });
  expect(ended).toEqual(["completed"]);
  expect(w.stats).toMatchObject({ completed: 1, failed: 0, staleOutcomes: 0 });
});

test("a worker stopped while a handler is inside its completeTx transaction lets it commit: completed, nothing released", async () => {
  const inside = gate();
  const finish = gate();
  const { w, ended } = worker(
    "shutdown",
    async (_p, ctx) => {
      await inTransaction(async (client) => {
        await order(client, ctx);
        await ctx.completeTx(client, "committed during shutdown");
        inside.open();
        await finish.promise;
      });
    },
    { start: true },
  );
  await w.start();
  const { id } = await t.skipq.enqueue("order", {}, { queue: "shutdown" });
  await inside.promise;
  const stopped = w.stop();
  finish.open();
  await stopped;
  expect(await job(id)).toMatchObject({ status: "completed", result: "committed during shutdown", attempts: 1 });
  expect(await orders(id)).toBe(1);
  expect(ended).toEqual([{ id, outcome: "completed" }]);
  expect(w.stats).toMatchObject({ completed: 1, released: 0, staleOutcomes: 0 });
});

test("while a completeTx transaction is open, the worker's other jobs keep their heartbeats, and the commit is no lost lease", async () => {
  const inside = gate();
  const finish = gate();
  const lost: string[] = [];
  const w = t.skipq
    .worker({
      queues: ["beats"],
      concurrency: 2,
      maintenance: false,
      listen: false,
      pollInterval: 50,
      lockTimeout: 3000,
      heartbeatInterval: 50,
    })
    .register("order", async (_p, ctx) => {
      await inTransaction(async (client) => {
        await ctx.completeTx(client, "held open");
        inside.open();
        await finish.promise;
      });
    })
    .register("ticker", () => finish.promise);
  w.on("leaseLost", (job) => lost.push(job.id));
  workers.push(w);
  const ticker = await t.skipq.enqueue("ticker", {}, { queue: "beats" });
  const { id } = await t.skipq.enqueue("order", {}, { queue: "beats" });
  await w.start();
  await inside.promise;
  const lockedAt = async () =>
    (await t.db.query(`SELECT locked_at FROM ${s}.jobs WHERE id = $1`, [ticker.id])).rows[0].locked_at.getTime();
  // A heartbeat that included the completed job would wait on the open transaction's lock, and the ticker's with it.
  let seen = await lockedAt();
  let beats = 0;
  await until("the ticker's lease is extended three times meanwhile", async () => {
    const now = await lockedAt();
    if (now > seen) {
      beats++;
      seen = now;
    }
    return beats >= 3;
  });
  finish.open();
  await until("both finished", async () => w.stats.completed === 2);
  await w.stop();
  expect(await job(id)).toMatchObject({ status: "completed", result: "held open" });
  expect(lost).toEqual([]);
  expect(w.stats).toMatchObject({ leasesLost: 0, staleOutcomes: 0 });
});
