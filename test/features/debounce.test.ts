/**
 * Debounce (docs/jobs.md): while a job with the key is pending, an enqueue
 * replaces its payload and moves its run_at to now + delay; the job runs once,
 * with the last payload; once it is running, an enqueue starts a new pending
 * job. Concurrent enqueuers — skipq's and plain SQL transactions — never make
 * two pending jobs of one key, and the last enqueue's payload always runs.
 */
import pg from "pg";
import { afterAll, expect, test } from "vitest";
import { Admin, defineJob, Skipq, silentLogger, type Worker } from "../../src/index.js";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("debounce");
const workers: Worker[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

const reindex = defineJob<{ version: number }>("reindex");

async function pending(queue: string) {
  const { rows } = await t.db.query(
    `SELECT id, payload, EXTRACT(EPOCH FROM run_at - now())::float AS due_in FROM "${t.schema}".jobs
      WHERE queue = $1 AND status = 'pending' ORDER BY id`,
    [queue],
  );
  return rows;
}

test("enqueues while the job is pending update it: last payload, run_at moved to now + delay, one job", async () => {
  const first = await t.skipq.enqueue(reindex, { version: 1 }, { queue: "d1", debounce: { key: "idx", delay: "1h" } });
  const second = await t.skipq.enqueue(reindex, { version: 2 }, { queue: "d1", debounce: { key: "idx", delay: "2h" } });
  expect(first.created).toBe(true);
  expect(second).toEqual({ id: first.id, created: false });
  const rows = await pending("d1");
  expect(rows).toHaveLength(1);
  expect(rows[0].payload).toEqual({ version: 2 });
  expect(rows[0].due_in).toBeGreaterThan(7190);
  expect(rows[0].due_in).toBeLessThanOrEqual(7200);
});

test("the job runs once, with the last payload, delay after the last enqueue", async () => {
  const ran: number[] = [];
  const w = t.skipq.worker({ queues: ["d2"], pollInterval: 20 }).register(reindex, (payload) => {
    ran.push(payload.version);
  });
  workers.push(w);
  await w.start();
  const times: number[] = [];
  for (let version = 1; version <= 5; version++) {
    times.push(Date.now());
    await t.skipq.enqueue(reindex, { version }, { queue: "d2", debounce: { delay: 300 } });
  }
  const { id } = (await pending("d2"))[0];
  await until("completed", async () => (await new Admin(t.skipq).getJob(id))?.status === "completed");
  expect(ran).toEqual([5]);
  // It waited for the delay after the last enqueue, not the first.
  const { rows } = await t.db.query(
    `SELECT EXTRACT(EPOCH FROM run_at - created_at) * 1000 AS ms FROM "${t.schema}".all_jobs WHERE id = $1`,
    [id],
  );
  expect(Number(rows[0].ms)).toBeGreaterThanOrEqual((times[4] as number) - (times[0] as number) + 250);
});

test("once the job is running, an enqueue starts a new pending job", async () => {
  let release = () => {};
  const held = new Promise<void>((resolve) => {
    release = resolve;
  });
  const ran: number[] = [];
  const w = t.skipq.worker({ queues: ["d3"], pollInterval: 20 }).register(reindex, async (payload) => {
    ran.push(payload.version);
    if (payload.version === 1) await held;
  });
  workers.push(w);
  await w.start();
  const first = await t.skipq.enqueue(reindex, { version: 1 }, { queue: "d3", debounce: { delay: 0 } });
  await until("running", async () => (await new Admin(t.skipq).getJob(first.id))?.status === "running");
  const second = await t.skipq.enqueue(reindex, { version: 2 }, { queue: "d3", debounce: { delay: "1h" } });
  expect(second.created).toBe(true);
  expect(second.id).not.toBe(first.id);
  release();
  await until("first completed", async () => (await new Admin(t.skipq).getJob(first.id))?.status === "completed");
  expect((await pending("d3")).map((r) => r.id)).toEqual([second.id]);
});

test("keys are per queue, and a job without a key is never debounced", async () => {
  const a = await t.skipq.enqueue(reindex, { version: 1 }, { queue: "d4", debounce: { key: "k", delay: "1h" } });
  const b = await t.skipq.enqueue(reindex, { version: 1 }, { queue: "d4b", debounce: { key: "k", delay: "1h" } });
  const c = await t.skipq.enqueue(reindex, { version: 1 }, { queue: "d4" });
  expect([a.created, b.created, c.created]).toEqual([true, true, true]);
});

test("concurrent enqueuers (skipq clients and plain SQL transactions) leave one pending job with the last payload", async () => {
  const clients = Array.from(
    { length: 4 },
    () => new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger: silentLogger, poolSize: 4 }),
  );
  const sql = Array.from({ length: 4 }, () => new pg.Client({ connectionString: DATABASE_URL }));
  await Promise.all(sql.map((c) => c.connect()));
  const s = `"${t.schema}"`;
  let version = 0;
  /** Each writer's last version: the one pending at the end must be one of them (the last committed). */
  const lasts: number[] = [];
  try {
    await Promise.all([
      ...clients.map(async (c) => {
        let mine = 0;
        for (let i = 0; i < 20; i++) {
          mine = ++version;
          await c.enqueue(reindex, { version: mine }, { queue: "d5", debounce: { key: "k", delay: "1h" } });
        }
        lasts.push(mine);
      }),
      ...sql.map(async (c) => {
        let mine = 0;
        for (let i = 0; i < 10; i++) {
          mine = ++version;
          // What docs/jobs.md shows for plain SQL, held open across a round trip so transactions overlap.
          await c.query("BEGIN");
          await c.query(
            `INSERT INTO ${s}.jobs (queue, kind, payload, run_at, debounce_key)
             VALUES ('d5', 'reindex', jsonb_build_object('version', $1::int), now() + interval '1 hour', 'k')
             ON CONFLICT (queue, debounce_key) WHERE debounce_key IS NOT NULL AND status = 'pending'
             DO UPDATE SET payload = EXCLUDED.payload, run_at = EXCLUDED.run_at, updated_at = now()`,
            [mine],
          );
          await c.query("SELECT pg_sleep(0.005)");
          await c.query("COMMIT");
        }
        lasts.push(mine);
      }),
    ]);
    const rows = await pending("d5");
    expect(rows).toHaveLength(1);
    expect(lasts).toHaveLength(8);
    expect(lasts).toContain(rows[0].payload.version);
    const { rows: all } = await t.db.query(`SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'd5'`);
    expect(all[0].n).toBe(1);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
    await Promise.all(sql.map((c) => c.end()));
  }
});

test("racing a worker's claims, every enqueue lands in a job that runs after it: the last payload always runs", async () => {
  const ran: number[] = [];
  const w = t.skipq
    .worker({ queues: ["d6"], pollInterval: 5, concurrency: 4 })
    .register(reindex, (payload) => void ran.push(payload.version));
  workers.push(w);
  await w.start();
  const enqueued: Array<{ id: string; created: boolean }> = [];
  for (let version = 1; version <= 200; version++) {
    enqueued.push(await t.skipq.enqueue(reindex, { version }, { queue: "d6", debounce: { delay: 0 } }));
    if (version % 10 === 0) await new Promise((r) => setTimeout(r, 2));
  }
  const jobs = new Set(enqueued.map((e) => e.id));
  await until("every job ran", async () => {
    const { rows } = await t.db.query(
      `SELECT count(*)::int AS n FROM "${t.schema}".job_history WHERE queue = 'd6' AND status = 'completed'`,
    );
    return rows[0].n === jobs.size;
  });
  // Each job ran once, and the last enqueue's payload was among what ran.
  expect(ran).toHaveLength(jobs.size);
  expect(ran).toContain(200);
  expect(enqueued.filter((e) => e.created)).toHaveLength(jobs.size);
  expect((await pending("d6")).length).toBe(0);
});

test("debounce is validated before any SQL", async () => {
  const bad = [
    { debounce: { delay: "soon" } },
    { debounce: { key: "", delay: "1s" } },
    { debounce: { delay: "1s" }, delay: "1s" },
    { debounce: { delay: "1s" }, runAt: new Date() },
    { debounce: { delay: "1s" }, idempotencyKey: "k" },
    { debounce: "1s" },
  ];
  for (const options of bad)
    await expect(
      t.skipq.enqueue(reindex, { version: 0 }, { queue: "d7", ...(options as object) }),
    ).rejects.toMatchObject({ code: "SKIPQ_INVALID_ARGUMENT" });
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".jobs WHERE queue = 'd7'`);
  expect(rows[0].n).toBe(0);
});

test("a debounced job that fails while a newer job of its key is pending goes back to pending beside it, and its batch's other outcomes are recorded", async () => {
  const started = { a: 0, c: 0 };
  const both = { a: false, c: false };
  let open = () => {};
  const gate = new Promise<void>((resolve) => {
    open = resolve;
  });
  const plain = defineJob<Record<string, never>>("plain");
  const w = t.skipq
    .worker({ queues: ["d8"], pollInterval: 20, concurrency: 2, lockTimeout: "3s" })
    .register(reindex, async () => {
      started.a++;
      both.a = true;
      await gate;
      throw new Error("reindex failed");
    })
    .register(plain, async () => {
      started.c++;
      both.c = true;
      await gate;
    });
  workers.push(w);
  const a = await t.skipq.enqueue(reindex, { version: 1 }, { queue: "d8", debounce: { key: "k", delay: 0 } });
  const c = await t.skipq.enqueue(plain, {}, { queue: "d8" });
  await w.start();
  await until("both running", async () => both.a && both.c);
  // The key has no pending job while A runs: this enqueue makes B, pending for an hour.
  const b = await t.skipq.enqueue(reindex, { version: 2 }, { queue: "d8", debounce: { key: "k", delay: "1h" } });
  expect(b.created).toBe(true);
  open(); // A fails and C completes in the same tick: one outcome flush.
  const admin = new Admin(t.skipq);
  await until("C completed and A pending again", async () => {
    const [ja, jc] = await Promise.all([admin.getJob(a.id), admin.getJob(c.id)]);
    return jc?.status === "completed" && ja?.status === "pending" && ja.attempts === 1;
  });
  expect((await pending("d8")).map((r) => r.id).sort()).toEqual([a.id, b.id].sort());
  expect(started).toEqual({ a: 1, c: 1 });
  expect(w.stats.staleOutcomes).toBe(0);
});

test("the reaper returns an expired debounced job to pending while a newer job of its key is pending, with other queues' expired jobs", async () => {
  const s = `"${t.schema}"`;
  const a = await t.skipq.enqueue(reindex, { version: 1 }, { queue: "d9", debounce: { key: "k", delay: 0 } });
  const other = await t.skipq.enqueue("other", {}, { queue: "d9b" });
  await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [["d9", "d9b"], 10, "crashed", 30_000]);
  const b = await t.skipq.enqueue(reindex, { version: 2 }, { queue: "d9", debounce: { key: "k", delay: "1h" } });
  expect(b.created).toBe(true);
  await t.db.query(`UPDATE ${s}.jobs SET lease_expires_at = now() - interval '1 ms' WHERE status = 'running'`);
  // The reaper's statement, as the leader's pass runs it (the workers of other tests hold the leader lease).
  const { rows: reaped } = await t.db.query(t.skipq.store.sql.maintenance.jobReapExpired.text, [100]);
  expect(new Set(reaped.map((r) => String(r.id)))).toEqual(new Set([a.id, other.id]));
  const { rows } = await t.db.query(`SELECT id::text, status FROM ${s}.jobs WHERE id = ANY($1) ORDER BY id`, [
    [a.id, b.id, other.id],
  ]);
  expect(rows.map((r) => r.status)).toEqual(["pending", "pending", "pending"]);
});

test("the protocol's skipq_fail and skipq_release return a debounced job to pending while a newer job of its key is pending", async () => {
  const s = `"${t.schema}"`;
  for (const call of ["fail", "release"] as const) {
    const queue = `d10${call}`;
    const a = await t.skipq.enqueue(reindex, { version: 1 }, { queue, debounce: { key: "k", delay: 0 } });
    const { rows: claimed } = await t.db.query(`SELECT id, lease FROM ${s}.skipq_claim(ARRAY[$1], 1, 'py', 30000)`, [
      queue,
    ]);
    expect(claimed.map((r) => String(r.id))).toEqual([a.id]);
    await t.skipq.enqueue(reindex, { version: 2 }, { queue, debounce: { key: "k", delay: "1h" } });
    const sql =
      call === "fail"
        ? `SELECT ${s}.skipq_fail($1, $2, 'boom', 0) AS r`
        : `SELECT ${s}.skipq_release($1, $2)::text AS r`;
    const { rows } = await t.db.query(sql, [claimed[0].id, claimed[0].lease]);
    expect(rows[0].r).toBe(call === "fail" ? "pending" : "true");
    expect(await pending(queue)).toHaveLength(2);
  }
});
