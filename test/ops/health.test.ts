import pg from "pg";
import { expect, test } from "vitest";
import { Admin, defineJob, type HealthReport } from "../../src/index.js";
import { DATABASE_URL, testQueue, until } from "../helpers.js";

test("a session idle in a transaction, and one with a long transaction, are reported with their pids", async () => {
  const t = await testQueue("health_xmin");
  const admin = new Admin(t.skipq);
  const idle = new pg.Client({ connectionString: DATABASE_URL, application_name: "idle-holder" });
  const busy = new pg.Client({ connectionString: DATABASE_URL, application_name: "long-holder" });
  await idle.connect();
  await busy.connect();
  busy.on("error", () => undefined);
  try {
    const idlePid = (await idle.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const busyPid = (await busy.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const before = await admin.health({ idleInTransaction: 0, longTransaction: 0 });
    expect(before.warnings.filter((w) => w.detail.pid === idlePid || w.detail.pid === busyPid)).toEqual([]);

    await idle.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await idle.query(`SELECT count(*) FROM "${t.schema}".all_jobs`);
    await busy.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await busy.query("SELECT 1");
    const sleeping = busy.query("SELECT pg_sleep(60)").catch(() => undefined);
    // Until its sleep has started, the busy session is idle in its transaction too.
    await until("the long transaction is running its statement", async () => {
      const { rows } = await t.db.query("SELECT wait_event FROM pg_stat_activity WHERE pid = $1", [busyPid]);
      return rows[0]?.wait_event === "PgSleep";
    });

    const report = (await until("both holders reported", async () => {
      const r = await admin.health({ idleInTransaction: 0, longTransaction: 0 });
      const mine = r.warnings.filter((w) => w.detail.pid === idlePid || w.detail.pid === busyPid);
      return mine.length === 2 && r;
    })) as HealthReport;
    const byPid = new Map(report.warnings.map((w) => [w.detail.pid, w]));
    expect(byPid.get(idlePid)?.check).toBe("idle-in-transaction");
    expect(byPid.get(idlePid)?.message).toContain("idle-holder");
    expect(byPid.get(busyPid)?.check).toBe("long-transaction");
    expect(report.oldestXminAge).toBeGreaterThanOrEqual(0);

    const relaxed = await admin.health();
    expect(relaxed.warnings.filter((w) => w.detail.pid === idlePid || w.detail.pid === busyPid)).toEqual([]);
    await t.db.query("SELECT pg_cancel_backend($1)", [busyPid]);
    await sleeping;
  } finally {
    await idle.end();
    await busy.end().catch(() => undefined);
    await t.cleanup();
  }
});

test("dead tuples on the jobs table are reported once they pass both thresholds", async () => {
  const t = await testQueue("health_dead");
  const admin = new Admin(t.skipq);
  try {
    // Autovacuum would remove the dead tuples (its threshold is 50 + 20 % of 300) before the check reads them.
    await t.db.query(`ALTER TABLE "${t.schema}".jobs SET (autovacuum_enabled = false)`);
    await t.skipq.enqueueMany(Array.from({ length: 300 }, (_, i) => ({ job: "k", payload: { i } })));
    const client = await t.db.connect();
    try {
      await client.query(`DELETE FROM "${t.schema}".jobs WHERE (payload->>'i')::int < 250`);
      await client.query("SELECT pg_stat_force_next_flush()");
    } finally {
      client.release();
    }
    let seen: HealthReport["jobsTable"] = null;
    const report = (await until(
      "dead tuples counted",
      async () => {
        const r = await admin.health({ minDeadTuples: 200, deadTupleRatio: 1 });
        seen = r.jobsTable;
        return r.warnings.some((w) => w.check === "dead-tuples") && r;
      },
      60_000,
      100,
    ).catch((error: Error) => {
      throw new Error(`${error.message}; the statistics last showed ${JSON.stringify(seen)}`);
    })) as HealthReport;
    expect(report.jobsTable?.dead).toBeGreaterThanOrEqual(200);
    expect((await admin.health({ minDeadTuples: 100_000 })).warnings.some((w) => w.check === "dead-tuples")).toBe(
      false,
    );
  } finally {
    await t.cleanup();
  }
});

test("pending jobs of a kind no live worker handles are reported; kinds a live worker handles are not", async () => {
  const t = await testQueue("health_kinds");
  const admin = new Admin(t.skipq);
  const slow = defineJob<Record<string, never>>("slow");
  let release: () => void = () => undefined;
  // prefetch 0: a retried orphan must not wait, leased, in the buffer behind the busy slot (it would not be pending).
  const worker = t.skipq.worker({ concurrency: 1, prefetch: 0, presenceInterval: "1s" }).register(
    slow,
    () =>
      new Promise<void>((resolve) => {
        release = resolve;
      }),
  );
  try {
    await t.skipq.enqueue("orphan", {});
    await t.skipq.enqueue("orphan", {}, { queue: "elsewhere" });
    await t.skipq.enqueue(slow, {});
    await t.skipq.enqueue(slow, {});
    await worker.start();
    await until("worker recorded", async () =>
      (await admin.workers()).some((w) => w.id === worker.id && w.kinds.includes("slow")),
    );
    await until("one slow job running", async () => worker.running === 1);
    // The orphan was claimed and handed back (due in 30 s) before the slow job started; written by the next flush.
    await until("the orphan handed back", () => worker.unwrittenOutcomes === 0);

    const { warnings } = await admin.health({ unhandledAfter: 0 });
    const unhandled = warnings
      .filter((w) => w.check === "unhandled-kind")
      .map((w) => [w.detail.queue, w.detail.kind, w.detail.pending]);
    // The worker takes "default" jobs but has no "orphan" handler: it claims and hands back that one, still unhandled.
    expect(unhandled.sort()).toEqual([
      ["default", "orphan", 1],
      ["elsewhere", "orphan", 1],
    ]);

    await admin.pauseQueue("elsewhere");
    const paused = (await admin.health({ unhandledAfter: 0 })).warnings.filter((w) => w.check === "unhandled-kind");
    expect(paused.map((w) => w.detail.queue)).toEqual(["default"]);
  } finally {
    release();
    await worker.stop();
    expect((await admin.workers()).some((w) => w.id === worker.id)).toBe(false);
    await t.cleanup();
  }
});

test("claims stepping over dead index entries under a held snapshot are reported with the holder, and claims from floors are not", async () => {
  const t = await testQueue("health_claim_pages");
  const admin = new Admin(t.skipq);
  const holder = new pg.Client({ connectionString: DATABASE_URL, application_name: "report-holder" });
  await holder.connect();
  const s = `"${t.schema}"`;
  const client = await t.db.connect();
  try {
    await t.db.query(`ALTER TABLE ${s}.jobs SET (autovacuum_enabled = false)`);
    await t.db.query(
      `INSERT INTO ${s}.jobs (queue, kind, run_at) SELECT 'q', 'k', now() - interval '1 hour' FROM generate_series(1, 6000)`,
    );
    await t.db.query(`VACUUM ANALYZE ${s}.jobs`);
    await holder.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await holder.query("SELECT 1");
    const holderPid = (await holder.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
    const sql = t.skipq.store.sql.jobs;
    // 5,000 jobs consumed under the snapshot: their claim-index entries stay alive.
    for (let i = 0; i < 10; i++) {
      const { rows } = await client.query(sql.jobClaimBatch.text, [["q"], 500, "w", 60_000]);
      await client.query(sql.jobCompleteMany.text, [rows.map((r) => r.id), rows.map((r) => r.lease)]);
    }
    await client.query("SELECT pg_stat_force_next_flush()");
    await admin.health(); // the baseline this process compares with
    // Claims that read the queue from its start (no floors, like an SQL-protocol worker) step over them all.
    for (let i = 0; i < 5; i++) {
      await client.query("BEGIN");
      await client.query(sql.jobClaimBatch.text, [["q"], 1, "w", 60_000]);
      await client.query("ROLLBACK");
    }
    await client.query("SELECT pg_stat_force_next_flush()");
    const report = (await until("claim-index pages reported", async () => {
      const r = await admin.health();
      return r.warnings.some((w) => w.check === "claim-index-pages") && r;
    })) as HealthReport;
    expect(report.claimIndexPagesPerScan).toBeGreaterThanOrEqual(20);
    // The oldest holder of the database (other tests' sessions may hold older ones than ours): named, with its start.
    expect(report.oldestXmin?.holder).toMatch(/^(session \d+|prepared transaction|replication slot)/);
    if (report.oldestXmin?.pid === holderPid) expect(report.oldestXmin?.holder).toContain("report-holder");
    expect(report.oldestXmin?.ageTransactions).toBeGreaterThanOrEqual(0);
    // Claims from a floor past the consumed jobs read a few pages per scan: no warning.
    const { rows: next } = await client.query(
      `SELECT run_at::text AS run_at, id::text AS id FROM ${s}.jobs WHERE status = 'pending' ORDER BY run_at, id LIMIT 1`,
    );
    for (let i = 0; i < 5; i++) {
      await client.query("BEGIN");
      await client.query(sql.jobClaimFrom.text, [
        ["q"],
        1,
        "w",
        60_000,
        null,
        ["q"],
        [0],
        [next[0].run_at],
        [String(BigInt(next[0].id) - 1n)],
      ]);
      await client.query("ROLLBACK");
    }
    await client.query("SELECT pg_stat_force_next_flush()");
    const calm = (await until("a check after floored claims", async () => {
      const r = await admin.health();
      return r.claimIndexPagesPerScan !== null && r;
    })) as HealthReport;
    expect(calm.warnings.some((w) => w.check === "claim-index-pages")).toBe(false);
  } finally {
    client.release();
    await holder.end();
    await t.cleanup();
  }
});
