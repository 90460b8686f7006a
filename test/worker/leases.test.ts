/**
 * Leases and outcomes under hostile or failing conditions: a cancel message
 * anyone can forge is checked against the database before it stops a
 * handler, and a database that will not take outcomes makes the worker stop
 * claiming instead of piling up unwritten outcomes.
 */
import pg from "pg";
import { afterAll, expect, test } from "vitest";
import { type Logger, Skipq, type Worker } from "../../src/index.js";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("leases");
const workers: Worker[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

/** A logger that keeps every message, to wait on what the worker says. */
function recordingLogger(): Logger & { messages: string[] } {
  const messages: string[] = [];
  const keep = (_: unknown, msg?: string) => void (msg && messages.push(msg));
  return { messages, debug: keep, info: keep, warn: keep, error: keep };
}

async function status(id: string): Promise<string | undefined> {
  const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  return rows[0]?.status;
}

test("a forged cancel message from a role without rights neither aborts the handler nor drops its result", async () => {
  const role = `forger_${t.schema}`.slice(0, 60);
  await t.db.query(`DROP ROLE IF EXISTS ${role}`);
  await t.db.query(`CREATE ROLE ${role} LOGIN`);
  const logger = recordingLogger();
  const skipq = new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger });
  let release!: () => void;
  const gate = new Promise<void>((r) => {
    release = r;
  });
  let aborted = false;
  const w = skipq.worker({ queues: ["forged"], maintenance: false }).register("slow", async (_payload, ctx) => {
    ctx.signal.addEventListener("abort", () => {
      aborted = true;
    });
    await gate;
    return "done";
  });
  workers.push(w);
  const listening = new Promise<void>((resolve) => w.on("listener", (c) => c && resolve()));
  await w.start();
  await listening;
  const { id } = await t.skipq.enqueue("slow", {}, { queue: "forged", maxAttempts: 1 });
  await until("running", async () => (await status(id)) === "running");

  const url = new URL(DATABASE_URL);
  url.username = role;
  url.password = "";
  const forger = new pg.Client({ connectionString: url.toString() });
  await forger.connect();
  try {
    await forger.query(`NOTIFY "skipq:${t.schema}", '!cancel:${id}'`);
  } finally {
    await forger.end();
    await t.db.query(`DROP ROLE IF EXISTS ${role}`);
  }
  await until("the worker checked the message against the database", () =>
    logger.messages.some((m) => m.includes("ignored a cancel message")),
  );
  release();
  await until("completed", async () => (await status(id)) === "completed");
  expect(aborted).toBe(false);
  expect(w.stats.staleOutcomes).toBe(0);
  await w.stop();
  await skipq.close();
});

test("a heartbeat that finds the lease gone says why: cancelled when history says cancelled, lease-lost otherwise", async () => {
  const skipq = new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger: recordingLogger() });
  const reasons = new Map<string, string>();
  const w = skipq
    .worker({ queues: ["gone"], maintenance: false, lockTimeout: "3s", heartbeatInterval: "100ms" })
    .register("held", async (_payload, ctx) => {
      await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
      reasons.set(ctx.id, (ctx.signal.reason as { code: string }).code);
      throw ctx.signal.reason;
    });
  workers.push(w);
  const ends = new Map<string, string>();
  w.on("jobEnd", (job, outcome) => {
    ends.set(job.id, outcome);
  });
  await w.start();
  const s = `"${t.schema}"`;
  const cancelled = (await t.skipq.enqueue("held", {}, { queue: "gone" })).id;
  const reaped = (await t.skipq.enqueue("held", {}, { queue: "gone" })).id;
  await until(
    "both running",
    async () => (await status(cancelled)) === "running" && (await status(reaped)) === "running",
  );
  // Moved out of the live table without a "!cancel" message: only a heartbeat can notice.
  for (const [id, outcome] of [
    [cancelled, "cancelled"],
    [reaped, "dead"],
  ]) {
    await t.db.query(
      `WITH gone AS (DELETE FROM ${s}.jobs WHERE id = $1 RETURNING *)
       INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at)
       SELECT id, queue, kind, payload, $2, priority, attempts, max_attempts, run_at, created_at, now() FROM gone`,
      [id, outcome],
    );
  }
  await until("both ended", () => ends.size === 2);
  expect(ends.get(cancelled)).toBe("cancelled");
  expect(reasons.get(cancelled)).toBe("SKIPQ_CANCEL");
  expect(ends.get(reaped)).toBe("lease-lost");
  expect(reasons.get(reaped)).toBe("SKIPQ_LEASE_LOST");
  expect(w.stats.leasesLost).toBe(1);
  await w.stop();
  await skipq.close();
});

test("a job leased again while its earlier attempt still runs: the heartbeat loses the earlier hold, not confirms it", async () => {
  // The heartbeat's answer names ids: with both holds of one job sent, the id comes back for the newer lease,
  // and the earlier hold must not take it as its own (it was kept alive, its handler running beside the rerun).
  let release: () => void = () => undefined;
  const rerun = new Promise<void>((resolve) => {
    release = resolve;
  });
  const calls: string[] = [];
  const w = t.skipq
    .worker({
      queues: ["again"],
      maintenance: false,
      lockTimeout: "60s",
      heartbeatInterval: "100ms",
      pollInterval: "50ms",
    })
    .register("twice", async (_payload, ctx) => {
      const n = calls.push("running");
      if (n === 1) {
        await new Promise<void>((resolve) => ctx.signal.addEventListener("abort", () => resolve()));
        calls[0] = (ctx.signal.reason as { code: string }).code;
        throw ctx.signal.reason;
      }
      await rerun;
    });
  workers.push(w);
  await w.start();
  const { id } = await t.skipq.enqueue("twice", {}, { queue: "again" });
  await until("the first attempt running", () => calls.length === 1);
  // The reaper's move, by hand: the job is pending again under no lease, and this worker claims it again.
  await t.db.query(
    `UPDATE "${t.schema}".jobs SET status = 'pending', lease = NULL, lease_expires_at = NULL, run_at = now() WHERE id = $1`,
    [id],
  );
  await until("the rerun running", () => calls.length === 2);
  await until("the earlier attempt aborted, its lease lost", () => calls[0] === "SKIPQ_LEASE_LOST", 5000);
  expect(w.stats.leasesLost).toBe(1);
  release();
  await until("the rerun completed", async () => (await status(id)) === "completed");
  await w.stop();
});

test("while the database refuses outcomes, the worker stops claiming at its backlog cap, and catches up after", async () => {
  const s = `"${t.schema}"`;
  // Completions fail (a trigger raises); claims and heartbeats still work.
  await t.db.query(`CREATE FUNCTION ${s}.refuse_outcomes() RETURNS trigger LANGUAGE plpgsql AS $$
                    BEGIN RAISE EXCEPTION 'outcomes refused for this test'; END $$`);
  await t.db.query(`CREATE TRIGGER refuse BEFORE UPDATE OR DELETE ON ${s}.jobs FOR EACH ROW
                    WHEN (OLD.status = 'running' AND pg_trigger_depth() = 0)
                    EXECUTE FUNCTION ${s}.refuse_outcomes()`);
  const jobs = await t.skipq.enqueueMany(
    Array.from({ length: 200 }, () => ({ job: "fast", payload: {}, queue: "refused" })),
  );
  const w = t.skipq
    .worker({
      queues: ["refused"],
      concurrency: 5,
      prefetch: 0,
      outcomeBatchSize: 5,
      maintenance: false,
      pollInterval: 20,
    })
    .register("fast", () => undefined);
  workers.push(w);
  let outcomeFailures = 0;
  w.on("warning", (_error, context) => {
    if (context === "outcome") outcomeFailures++;
  });
  await w.start();
  // Flushes keep failing for a while: time in which an unbounded worker would claim everything.
  await until("several failed outcome flushes", () => outcomeFailures >= 6, 20_000);
  const cap = 2 * 5;
  expect(w.unwrittenOutcomes).toBeLessThanOrEqual(cap + 5);
  expect(w.stats.claimed).toBeLessThanOrEqual(cap + 5);
  expect(w.stats.claimed).toBeLessThan(jobs.length);

  await t.db.query(`DROP TRIGGER refuse ON ${s}.jobs`);
  await until(
    "every job completed",
    async () => {
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE queue = 'refused' AND status = 'completed'`,
      );
      return rows[0].n === jobs.length;
    },
    30_000,
  );
  await w.stop();
});
