/**
 * Waiting for a job (docs/jobs.md): waitFor resolves once the job is
 * completed, dead or cancelled — at once for one that already is — woken by
 * the finishing statement's notification, with polling as the fallback; a
 * timeout rejects with WaitTimeoutError; enqueueAndWait combines the two.
 * Across processes, with many waiters on one job, and with the waiter's
 * LISTEN connection killed.
 */
import pg from "pg";
import { afterAll, expect, test } from "vitest";
import {
  Admin,
  type Duration,
  defineJob,
  Skipq,
  silentLogger,
  WaitTimeoutError,
  type Worker,
} from "../../src/index.js";
import { DATABASE_URL, gate, until, useTestQueue } from "../helpers.js";
import { startWorkerProcesses } from "../processes.js";

// A poll far longer than any test: a wait that resolves did so by notification (or the reconnect's read).
const t = useTestQueue("wait", { waitPollInterval: "10m" });
const workers: Worker[] = [];
const clients: Skipq[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await Promise.all(clients.map((c) => c.close()));
});

/** Another client of the same schema (a separate LISTEN connection and pool). */
function client(pollInterval: Duration = "10m"): Skipq {
  const c = new Skipq({
    connectionString: DATABASE_URL,
    schema: t.schema,
    logger: silentLogger,
    waitPollInterval: pollInterval,
  });
  clients.push(c);
  return c;
}

const square = defineJob<{ n: number; fail?: boolean }>("square");

function worker(queue: string, gate?: Promise<void>): Worker {
  const w = t.skipq.worker({ queues: [queue], pollInterval: 50 }).register(square, async (payload) => {
    await gate;
    if (payload.fail) throw new Error(`cannot square ${payload.n}`);
    return { squared: payload.n * payload.n };
  });
  workers.push(w);
  return w;
}

test("waitFor resolves with the result once the job completes, woken by the finishing statement", async () => {
  const g = gate();
  await worker("w1", g.promise).start();
  const { id } = await t.skipq.enqueue(square, { n: 7 }, { queue: "w1" });
  const waiting = t.skipq.waitFor(id, { timeout: "20s" });
  let settled = false;
  void waiting.then(() => {
    settled = true;
  });
  await until("running", async () => (await new Admin(t.skipq).getJob(id))?.status === "running");
  expect(settled).toBe(false);
  g.open();
  expect(await waiting).toEqual({ status: "completed", result: { squared: 49 }, error: null });
});

test("waitFor on a job that finished before the call resolves at once, dead ones with their error", async () => {
  await worker("w2").start();
  const ok = await t.skipq.enqueue(square, { n: 3 }, { queue: "w2" });
  const bad = await t.skipq.enqueue(square, { n: 4, fail: true }, { queue: "w2", maxAttempts: 1 });
  const admin = new Admin(t.skipq);
  await until("both finished", async () => {
    const [a, b] = [await admin.getJob(ok.id), await admin.getJob(bad.id)];
    return a?.status === "completed" && b?.status === "dead";
  });
  expect(await client().waitFor(ok.id, { timeout: "5s" })).toEqual({
    status: "completed",
    result: { squared: 9 },
    error: null,
  });
  const dead = await client().waitFor(bad.id, { timeout: "5s" });
  expect(dead.status).toBe("dead");
  expect(dead.result).toBeUndefined();
  expect(dead.error).toMatch(/cannot square 4/);
});

test("a cancelled job resolves its waiters as cancelled", async () => {
  const { id } = await t.skipq.enqueue(square, { n: 1 }, { queue: "w3-nobody" });
  const waiting = t.skipq.waitFor(id, { timeout: "20s" });
  await until("marked", async () => {
    const { rows } = await t.db.query(`SELECT notify_on_finish FROM "${t.schema}".jobs WHERE id = $1`, [id]);
    return rows[0]?.notify_on_finish === true;
  });
  await new Admin(t.skipq).cancelJob(id);
  expect(await waiting).toMatchObject({ status: "cancelled", result: undefined });
});

test("a timeout rejects with WaitTimeoutError naming the job and its status, and leaves the job alone", async () => {
  const { id } = await t.skipq.enqueue(square, { n: 2 }, { queue: "w4-nobody" });
  const error = await t.skipq.waitFor(id, { timeout: 200 }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(WaitTimeoutError);
  expect(error).toMatchObject({ code: "SKIPQ_WAIT_TIMEOUT", jobId: id, lastStatus: "pending" });
  expect((await new Admin(t.skipq).getJob(id))?.status).toBe("pending");
});

test("waitFor rejects for a job that does not exist, and on bad input before any SQL", async () => {
  await expect(t.skipq.waitFor("999999999", { timeout: "5s" })).rejects.toMatchObject({ code: "SKIPQ_NOT_FOUND" });
  await expect(t.skipq.waitFor("abc")).rejects.toMatchObject({ code: "SKIPQ_INVALID_ARGUMENT" });
  await expect(t.skipq.waitFor("1", { timeout: "soon" as Duration })).rejects.toMatchObject({
    code: "SKIPQ_INVALID_ARGUMENT",
  });
});

test("an aborted signal rejects the wait with its reason", async () => {
  const { id } = await t.skipq.enqueue(square, { n: 2 }, { queue: "w5-nobody" });
  const controller = new AbortController();
  const waiting = t.skipq.waitFor(id, { signal: controller.signal });
  controller.abort(new Error("user left"));
  await expect(waiting).rejects.toThrow("user left");
});

test("enqueueAndWait enqueues and resolves with { status, result, error }", async () => {
  await worker("w6").start();
  expect(await t.skipq.enqueueAndWait(square, { n: 12 }, { queue: "w6", timeout: "20s" })).toEqual({
    status: "completed",
    result: { squared: 144 },
    error: null,
  });
});

test("many waiters on one job, in several clients, all resolve with the same outcome from one mark", async () => {
  const g = gate();
  await worker("w7", g.promise).start();
  const { id } = await t.skipq.enqueue(square, { n: 5 }, { queue: "w7" });
  const others = [client(), client(), client()];
  const waits = [
    ...Array.from({ length: 100 }, () => t.skipq.waitFor(id, { timeout: "20s" })),
    ...others.flatMap((c) => Array.from({ length: 20 }, () => c.waitFor(id, { timeout: "20s" }))),
  ];
  await until("marked", async () => {
    const { rows } = await t.db.query(`SELECT notify_on_finish FROM "${t.schema}".jobs WHERE id = $1`, [id]);
    return rows[0]?.notify_on_finish === true;
  });
  g.open();
  const results = await Promise.all(waits);
  expect(results).toHaveLength(160);
  for (const r of results) expect(r).toEqual({ status: "completed", result: { squared: 25 }, error: null });
});

test("a job finished by a worker in another process wakes the waiter here", async () => {
  const queue = "w8";
  const [proc] = startWorkerProcesses(1, { SKIPQ_SCHEMA: t.schema, QUEUES: queue });
  try {
    await t.db.query(`CREATE TABLE IF NOT EXISTS "${t.schema}".ledger (job_id text PRIMARY KEY, queue text, key text,
                        pid int, started timestamptz NOT NULL, ended timestamptz, note text)`);
    await proc?.ready;
    const { id } = await t.skipq.enqueue("ledgered", { ms: 300 }, { queue });
    const started = Date.now();
    const outcome = await t.skipq.waitFor(id, { timeout: "20s" });
    expect(outcome).toEqual({ status: "completed", result: undefined, error: null });
    // Woken by the notification, not the 10-minute poll.
    expect(Date.now() - started).toBeLessThan(10_000);
  } finally {
    await proc?.stop();
  }
});

test("with the waiter's LISTEN connection killed, a job finishing meanwhile still resolves (read on reconnect)", async () => {
  const g = gate();
  await worker("w9", g.promise).start();
  const waiterClient = client();
  const { id } = await t.skipq.enqueue(square, { n: 9 }, { queue: "w9" });
  const waiting = waiterClient.waitFor(id, { timeout: "30s" });
  const pid = await until("listening", () => waiterClient.waiterListenerPid);
  await until("marked", async () => {
    const { rows } = await t.db.query(`SELECT notify_on_finish FROM "${t.schema}".jobs WHERE id = $1`, [id]);
    return rows[0]?.notify_on_finish === true;
  });
  await t.db.query("SELECT pg_terminate_backend($1)", [pid]);
  // The job finishes while the waiter is (most likely) still reconnecting: its notification reaches nobody.
  g.open();
  await until("finished", async () => (await new Admin(t.skipq).getJob(id))?.status === "completed");
  expect(await waiting).toEqual({ status: "completed", result: { squared: 81 }, error: null });
  expect(waiterClient.waiterListenerPid).not.toBe(pid);
});

test("without a LISTEN connection (a client given a pool), polling alone finds the finish", async () => {
  const pooled = new Skipq({ pool: t.db, schema: t.schema, logger: silentLogger, waitPollInterval: 50 });
  await worker("w10").start();
  const outcome = await pooled.enqueueAndWait(square, { n: 11 }, { queue: "w10", timeout: "20s" });
  expect(outcome).toEqual({ status: "completed", result: { squared: 121 }, error: null });
  await pooled.close();
});

test("close() rejects the waits still open", async () => {
  const c = new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger: silentLogger });
  const { id } = await t.skipq.enqueue(square, { n: 2 }, { queue: "w11-nobody" });
  const waiting = c.waitFor(id);
  await until("marked", async () => {
    const { rows } = await t.db.query(`SELECT notify_on_finish FROM "${t.schema}".jobs WHERE id = $1`, [id]);
    return rows[0]?.notify_on_finish === true;
  });
  const rejected = expect(waiting).rejects.toMatchObject({ code: "SKIPQ_SHUTDOWN" });
  await c.close();
  await rejected;
});

test("only waited-for jobs announce their finish: a plain job's completion sends no notification", async () => {
  const listen = new pg.Client({ connectionString: DATABASE_URL });
  await listen.connect();
  const heard: string[] = [];
  listen.on("notification", (m) => heard.push(m.payload ?? ""));
  await listen.query(`LISTEN "skipq:${t.schema}:done"`);
  try {
    await worker("w12").start();
    const plain = await t.skipq.enqueue(square, { n: 1 }, { queue: "w12" });
    await until("plain completed", async () => (await new Admin(t.skipq).getJob(plain.id))?.status === "completed");
    const waited = await t.skipq.enqueueAndWait(square, { n: 2 }, { queue: "w12", timeout: "20s" });
    expect(waited.status).toBe("completed");
    await until("the waited job's notification", () => heard.length > 0);
    expect(heard).not.toContain(plain.id);
    expect(heard).toHaveLength(1);
  } finally {
    await listen.end();
  }
});

test("with completed history off, a waited job that completes resolves as completed without a result", async () => {
  const schema = `"${t.schema}"`;
  await t.db.query(`UPDATE ${schema}.settings SET keep_completed = false`);
  try {
    const g = gate();
    await worker("w13", g.promise).start();
    const { id } = await t.skipq.enqueue(square, { n: 3 }, { queue: "w13" });
    const waiting = t.skipq.waitFor(id, { timeout: "20s" });
    await until("marked", async () => {
      const { rows } = await t.db.query(`SELECT notify_on_finish FROM ${schema}.jobs WHERE id = $1`, [id]);
      return rows[0]?.notify_on_finish === true;
    });
    g.open();
    expect(await waiting).toEqual({ status: "completed", result: undefined, error: null });
    const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM ${schema}.all_jobs WHERE id = $1`, [id]);
    expect(rows[0].n).toBe(0);
  } finally {
    await t.db.query(`UPDATE ${schema}.settings SET keep_completed = true`);
  }
});

test("enqueueAndWait with an aborted signal enqueues nothing", async () => {
  const controller = new AbortController();
  controller.abort(new Error("gone"));
  await expect(t.skipq.enqueueAndWait(square, { n: 1 }, { queue: "w14", signal: controller.signal })).rejects.toThrow(
    "gone",
  );
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".jobs WHERE queue = 'w14'`);
  expect(rows[0].n).toBe(0);
});

/** Runs `body` with completed history off (completedAfter: 0: a completed job leaves no row). */
async function historyOff(body: () => Promise<void>): Promise<void> {
  await t.db.query(`UPDATE "${t.schema}".settings SET keep_completed = false`);
  try {
    await body();
  } finally {
    await t.db.query(`UPDATE "${t.schema}".settings SET keep_completed = true`);
  }
}

test("with completed history off, waitFor on an id that never existed rejects with SKIPQ_NOT_FOUND", async () => {
  await historyOff(async () => {
    await expect(t.skipq.waitFor("999999998", { timeout: "5s" })).rejects.toMatchObject({ code: "SKIPQ_NOT_FOUND" });
  });
});

test("with completed history off, a pending job deleted without running rejects its waiter with SKIPQ_NOT_FOUND", async () => {
  await historyOff(async () => {
    const { id } = await t.skipq.enqueue(square, { n: 1 }, { queue: "w15-nobody" });
    const waiting = t.skipq.waitFor(id, { timeout: "20s" }).catch((e: unknown) => e);
    await until("marked", async () => {
      const { rows } = await t.db.query(`SELECT notify_on_finish FROM "${t.schema}".jobs WHERE id = $1`, [id]);
      return rows[0]?.notify_on_finish === true;
    });
    expect(await new Admin(t.skipq).bulk("delete", { ids: [id] })).toBe(1);
    expect(await waiting).toMatchObject({ code: "SKIPQ_NOT_FOUND", message: expect.stringMatching(/deleted/) });
  });
});

test("with completed history off, waitFor on a job that completed before the call rejects with SKIPQ_NOT_FOUND", async () => {
  await worker("w16").start();
  await historyOff(async () => {
    const { id } = await t.skipq.enqueue(square, { n: 2 }, { queue: "w16" });
    await until("completed and gone", async () => {
      const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
      return rows[0].n === 0;
    });
    await expect(client().waitFor(id, { timeout: "5s" })).rejects.toMatchObject({ code: "SKIPQ_NOT_FOUND" });
  });
});

test("with completed history off, enqueueAndWait resolves completed even when the job completed before the wait began", async () => {
  await worker("w17").start();
  // Middleware holds enqueueAndWait between its enqueue and its wait until the job has completed and left no row.
  const c = client().useEnqueue(async (call, next) => {
    const r = await next();
    if (r && call.options.queue === "w17")
      await until("completed before the wait", async () => {
        const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE id = $1`, [
          r.id,
        ]);
        return rows[0].n === 0;
      });
    return r;
  });
  await historyOff(async () => {
    expect(await c.enqueueAndWait(square, { n: 3 }, { queue: "w17", timeout: "20s" })).toEqual({
      status: "completed",
      result: undefined,
      error: null,
    });
    // An idempotency key held by a job gone without history: the job it returns is waited for as by waitFor —
    // gone before the wait, it is not found (it may as well have been deleted: the key outlives the job).
    const first = await c.enqueueAndWait(square, { n: 4 }, { queue: "w17", idempotencyKey: "k17", timeout: "20s" });
    expect(first.status).toBe("completed");
    await expect(
      c.enqueueAndWait(square, { n: 4 }, { queue: "w17", idempotencyKey: "k17", timeout: "20s" }),
    ).rejects.toMatchObject({ code: "SKIPQ_NOT_FOUND" });
  });
});

test("with completed history off and no LISTEN connection, polling alone resolves a completed job", async () => {
  const pooled = new Skipq({ pool: t.db, schema: t.schema, logger: silentLogger, waitPollInterval: 50 });
  const g = gate();
  await worker("w18", g.promise).start();
  try {
    await historyOff(async () => {
      const { id } = await pooled.enqueue(square, { n: 5 }, { queue: "w18" });
      const waiting = pooled.waitFor(id, { timeout: "20s" });
      await until("running", async () => (await new Admin(t.skipq).getJob(id))?.status === "running");
      g.open();
      expect(await waiting).toEqual({ status: "completed", result: undefined, error: null });
    });
  } finally {
    await pooled.close();
  }
});

test("with completed history off, enqueueAndWait of a job deleted before its wait began rejects with SKIPQ_NOT_FOUND", async () => {
  const c = client().useEnqueue(async (call, next) => {
    const r = await next();
    if (r && call.options.queue === "w19-nobody") await new Admin(t.skipq).bulk("delete", { ids: [r.id] });
    return r;
  });
  await historyOff(async () => {
    const outcome = await c.enqueueAndWait(square, { n: 6 }, { queue: "w19-nobody", timeout: "20s" }).catch((e) => e);
    expect(outcome).toMatchObject({ code: "SKIPQ_NOT_FOUND", message: expect.stringMatching(/deleted/) });
  });
});

/** How long each finished job of `queue` waited from its insert to its claim (database clock), ms. */
async function startDelays(queue: string): Promise<number[]> {
  const { rows } = await t.db.query(
    `SELECT (EXTRACT(EPOCH FROM locked_at - created_at) * 1000)::float8 AS ms FROM "${t.schema}".job_history
      WHERE queue = $1 ORDER BY id`,
    [queue],
  );
  return rows.map((r) => r.ms as number);
}

/**
 * A worker whose poll is 5 s, LISTENing already: a job its claim skipped waits that long, far beyond a woken
 * claim's few ms.
 */
async function slowPoller(queue: string): Promise<Worker> {
  const w = t.skipq.worker({ queues: [queue], pollInterval: "5s" }).register(square, async (p) => ({ squared: p.n }));
  workers.push(w);
  await w.start();
  await until("the worker listens", () => w.listener?.connected);
  return w;
}

test.each([
  ["enqueueAndWait", "late1", (n: number) => t.skipq.enqueueAndWait(square, { n }, { queue: "late1", timeout: "30s" })],
  [
    "waitFor just after enqueue",
    "late2",
    async (n: number) => t.skipq.waitFor((await t.skipq.enqueue(square, { n }, { queue: "late2" })).id),
  ],
  [
    "enqueueAndWait with an idempotency key",
    "late3",
    (n: number) => t.skipq.enqueueAndWait(square, { n }, { queue: "late3", idempotencyKey: `k${n}`, timeout: "30s" }),
  ],
  [
    "enqueueAndWait with a uniqueness window",
    "late4",
    (n: number) => t.skipq.enqueueAndWait(square, { n }, { queue: "late4", unique: { period: "1h" }, timeout: "30s" }),
  ],
] as const)(
  "a waited job starts well within the worker's poll interval, never left for its next poll (%s)",
  async (_, queue, run) => {
    await slowPoller(queue);
    for (let n = 0; n < 20; n++) expect((await run(n)).status).toBe("completed");
    const delays = await startDelays(queue);
    expect(delays).toHaveLength(20);
    expect(delays.filter((ms) => ms > 1000)).toEqual([]);
  },
  120_000,
);

test("every waited job is claimed by a wake-up, none left for a poll: 0 of 30 late with a 10-minute poll", async () => {
  // The worker polls every 10 minutes, so each claim it makes during the test was woken (the job's enqueue,
  // or the wake-up sent after a mark that held the job). A job a woken claim skipped is never claimed in
  // the test: it counts as late (its wait times out) instead of starting one poll later.
  const queue = "late-count";
  const w = t.skipq.worker({ queues: [queue], pollInterval: "10m" }).register(square, async (p) => ({ squared: p.n }));
  workers.push(w);
  const claimedIds = new Set<string>();
  w.on("claimed", (jobs) => {
    for (const job of jobs) claimedIds.add(job.id);
  });
  await w.start();
  await until("the worker listens", () => w.listener?.connected);
  const late: number[] = [];
  for (let n = 0; n < 30; n++) {
    const outcome = await t.skipq.enqueueAndWait(square, { n }, { queue, timeout: "3s" }).catch((e: unknown) => e);
    if (outcome instanceof WaitTimeoutError) late.push(n);
    else expect(outcome).toMatchObject({ status: "completed" });
  }
  expect(late, "jobs no woken claim took (late starts)").toEqual([]);
  expect(claimedIds.size).toBe(30);
}, 150_000);
