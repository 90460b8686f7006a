/**
 * Database and connection faults (matrix 7.2): backends terminated mid-claim,
 * mid-outcome and on the LISTEN connection; PostgreSQL restarted three times
 * during a drain; PostgreSQL down when workers start.
 *
 * Invariants: lost = 0; no job is left running without a live lease; workers
 * reconnect on their own and never exit.
 */
import { describe, expect, it } from "vitest";
import type { Job, Worker } from "../../src/index.js";
import {
  CHAOS_WORKER,
  type ChaosQueue,
  enqueueChaos,
  ledgerOf,
  maxOf,
  recordResult,
  SLACK_MS,
  spawnWorker,
  statusCounts,
  terminalCount,
  until,
} from "./harness.js";
import { reconcile } from "./ledger.js";
import { CHAOS_CONFIG, chaosSuite } from "./suite.js";

const DRAIN_JOBS = Number(process.env.CHAOS_DRAIN_JOBS ?? 100_000);
const suite = chaosSuite();
const queue = (label: string) => suite.queue(label);
const { workers } = suite;

/**
 * Makes the first `times` row updates or deletes matching `when` sleep in the server, so a test can catch the
 * statement mid-flight (a claim is an UPDATE; a completion DELETEs the live row to move it to history).
 */
async function stallUpdates(q: ChaosQueue, when: string, times: number): Promise<void> {
  const s = `"${q.schema}"`;
  await q.db.query(`CREATE SEQUENCE ${s}.chaos_ticks`);
  await q.db.query(`CREATE FUNCTION ${s}.chaos_stall() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- nextval is not transactional: a rolled-back stall still counts, so only the first few stall.
      IF ${when} AND nextval('${s}.chaos_ticks') <= ${times} THEN PERFORM pg_sleep(10); END IF;
      RETURN CASE TG_OP WHEN 'DELETE' THEN OLD ELSE NEW END;
    END $$`);
  await q.db.query(
    `CREATE TRIGGER chaos_stall BEFORE UPDATE OR DELETE ON ${s}.jobs FOR EACH ROW EXECUTE FUNCTION ${s}.chaos_stall()`,
  );
}

/**
 * Terminates the worker backend that is sleeping inside the statement matching `like`; returns when
 * it did and the backend is gone. pg_terminate_backend only sends a signal: without the wait, the
 * next call could find the same dying backend still listed and "terminate" it a second time.
 */
async function terminateStalled(q: ChaosQueue, like: string): Promise<number> {
  const { pid, at } = await until(`a stalled statement like ${like}`, async () => {
    const { rows } = await q.db.query(
      `SELECT pid, pg_terminate_backend(pid) AS ok FROM pg_stat_activity
        WHERE application_name LIKE 'skipq-worker:%' AND state = 'active' AND wait_event = 'PgSleep' AND query LIKE $1
        LIMIT 1`,
      [like],
    );
    return rows.length > 0 ? { pid: rows[0].pid as number, at: Date.now() } : undefined;
  });
  await until(`backend ${pid} gone`, async () => {
    const { rows } = await q.db.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid]);
    return rows.length === 0;
  });
  return at;
}

function inProcessWorker(q: ChaosQueue, onJob: (job: Job) => void = () => undefined): Worker {
  const worker = q.skipq.worker({ ...CHAOS_WORKER, concurrency: 4 });
  // Returns nothing: a handler's return value is stored as its result (another completion statement).
  worker.register("chaos", async (_payload, ctx) => {
    onJob(ctx.job);
  });
  worker.on("warning", () => undefined);
  workers.push(worker);
  return worker;
}

describe("database faults", () => {
  it("D1: a claim whose connection is terminated mid-statement rolls back, leaves no row locked, and the worker reconnects", async () => {
    const q = await queue("d1");
    await enqueueChaos(q, 50, {});
    await stallUpdates(q, "OLD.status = 'pending' AND NEW.status = 'running'", 3);
    const runs: string[] = [];
    const worker = inProcessWorker(q, (job) => runs.push(job.id));
    const claims: number[] = [];
    worker.on("claimed", () => claims.push(Date.now()));
    await worker.start();
    const reconnectMs: number[] = [];
    for (let i = 0; i < 3; i++) {
      const killedAt = await terminateStalled(q, "%skipq_claim_next%");
      if (i < 2) continue; // the next claim stalls again; only the last is followed by a clean claim
      await until("a claim after the last termination", () => claims.some((t) => t > killedAt));
      reconnectMs.push((claims.find((t) => t > killedAt) ?? 0) - killedAt);
    }
    await until("every job completed", async () => (await statusCounts(q)).completed === 50);
    expect(runs.length).toBe(50);
    expect(new Set(runs).size).toBe(50);
    const { rows } = await q.db.query(`SELECT count(*)::int AS n FROM "${q.schema}".all_jobs WHERE attempts <> 1`);
    expect(rows[0].n).toBe(0);
    const reconnect = maxOf(reconnectMs) ?? 0;
    expect(reconnect).toBeLessThan(1000 + SLACK_MS);
    recordResult({
      row: "D1",
      title: "pg_terminate_backend on the claim statement, 3 times (a trigger holds it mid-UPDATE)",
      config: CHAOS_CONFIG,
      lost: 0,
      duplicates: runs.length - new Set(runs).size,
      recoveryMs: reconnect,
      other: "rows left running or locked after the rolled-back claims: 0; attempts of every job: 1",
    });
  });

  it("D3: an outcome write whose connection is terminated is retried on a new connection and the job does not run again", async () => {
    const q = await queue("d3");
    await enqueueChaos(q, 20, {});
    await stallUpdates(q, "TG_OP = 'DELETE'", 2);
    const runs: string[] = [];
    const worker = inProcessWorker(q, (job) => runs.push(job.id));
    let outcomeRetries = 0;
    worker.on("warning", (_e, context) => {
      if (context === "outcome") outcomeRetries++;
    });
    await worker.start();
    await terminateStalled(q, "%WITH done AS%");
    await terminateStalled(q, "%WITH done AS%");
    await until("every job completed", async () => (await statusCounts(q)).completed === 20);
    expect(runs.length).toBe(20);
    expect(outcomeRetries).toBeGreaterThanOrEqual(2);
    expect(worker.stats.completed).toBe(20);
    recordResult({
      row: "D3",
      title: "pg_terminate_backend on the outcome write (the completion moving rows to history), twice",
      config: CHAOS_CONFIG,
      lost: 0,
      duplicates: runs.length - 20,
      staleRejected: worker.stats.staleOutcomes,
      other: `outcome retries: ${outcomeRetries}; all 20 outcomes committed on a new connection`,
    });
  });

  it("D4: a killed LISTEN connection reconnects, and polling picks up jobs during the gap", async () => {
    const q = await queue("d4");
    const started: Array<{ id: string; at: number }> = [];
    const worker = inProcessWorker(q, (job) => started.push({ id: job.id, at: Date.now() }));
    const changes: Array<{ connected: boolean; at: number }> = [];
    worker.on("listener", (connected) => changes.push({ connected, at: Date.now() }));
    await worker.start();
    await until("listener connected", () => worker.listener?.connected);
    const reconnects: number[] = [];
    const pickups: number[] = [];
    for (let i = 0; i < 3; i++) {
      // Taken before the query: the listener may see the termination before the query returns.
      const killedAt = Date.now();
      const { rows } = await q.db.query(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'skipq:listener'",
      );
      expect(rows.length).toBe(1);
      await until("listener noticed", () => changes.some((c) => !c.connected && c.at >= killedAt));
      // A job enqueued while the listener is down: only polling can find it.
      const { id } = await q.skipq.enqueue("chaos", {});
      const enqueuedAt = Date.now();
      await until("listener reconnected", () => changes.some((c) => c.connected && c.at > killedAt));
      reconnects.push((changes.find((c) => c.connected && c.at > killedAt)?.at ?? 0) - killedAt);
      await until("gap job picked up", () => started.some((s) => s.id === id));
      pickups.push((started.find((s) => s.id === id)?.at ?? 0) - enqueuedAt);
    }
    expect(maxOf(reconnects)).toBeLessThan(500 + 1000 + SLACK_MS);
    expect(maxOf(pickups)).toBeLessThan(200 + 500 + SLACK_MS);
    await until("the three gap jobs completed", async () => (await statusCounts(q)).completed === 3);
    recordResult({
      row: "D4",
      title: "pg_terminate_backend on the LISTEN connection, 3 times",
      config: CHAOS_CONFIG,
      lost: 0,
      duplicates: 0,
      recoveryMs: maxOf(reconnects),
      other: `listener reconnect ${reconnects.join(" / ")} ms; pickup of a job enqueued during the gap ${pickups.join(" / ")} ms (poll 200 ms)`,
    });
  });

  it("D10: workers started while PostgreSQL is down wait for it, then claim, without exiting", async () => {
    const q = await queue("d10");
    await enqueueChaos(q, 20, {});
    await suite.server.halt();
    let readyAt = 0;
    try {
      const children = await Promise.all(
        [1, 2].map(() => spawnWorker(q, { worker: { ...CHAOS_WORKER, concurrency: 4 } }, { waitReady: false })),
      );
      await until("both workers started their processes", () =>
        children.every((c) => ledgerOf(q, c.pid).some((e) => e.e === "starting")),
      );
      await new Promise((r) => setTimeout(r, 3000)); // the outage itself
      await suite.server.resume();
      readyAt = Date.now();
      await until("every job completed", async () => (await terminalCount(q)) === 20, 30_000);
      for (const c of children) expect(c.proc.exitCode).toBe(null);
    } finally {
      await suite.server.resume();
    }
    const firstClaim = ledgerOf(q).find((e) => e.e === "claimed")?.t ?? 0;
    const firstClaimMs = firstClaim - readyAt;
    expect(firstClaimMs).toBeLessThan(10_000);
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    recordResult({
      row: "D10",
      title: "PostgreSQL down for 3 s when 2 worker processes start",
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      recoveryMs: firstClaimMs,
      other: "process exits: 0; start() retries with capped backoff (100 ms doubling, at most 5 s)",
    });
  });

  it("D6: PostgreSQL restarted three times during a drain loses no job; every duplicate is explained", async () => {
    const q = await queue("d6");
    const jobs = DRAIN_JOBS;
    await enqueueChaos(q, jobs, {});
    const children = await Promise.all(
      // prefetch 100: the three workers hold at most 360 jobs, so the 10 % left at the last restart
      // still need claims (with the default 1000 they could all sit in the buffers already).
      [1, 2, 3].map(() => spawnWorker(q, { worker: { ...CHAOS_WORKER, concurrency: 20, prefetch: 100 } })),
    );
    const startedAt = Date.now();
    const firstClaims: number[] = [];
    const inFlight: number[] = [];
    for (const fraction of [0.1, 0.5, 0.9]) {
      await until(`${fraction * 100} % drained`, async () => (await terminalCount(q)) >= jobs * fraction, 120_000, 50);
      const { rows } = await q.db.query(
        `SELECT count(*)::int AS n FROM "${q.schema}".all_jobs WHERE status = 'running'`,
      );
      inFlight.push(rows[0].n);
      await suite.server.restart();
      const readyAt = Date.now();
      await until(
        "a claim after the restart",
        () => ledgerOf(q).some((e) => e.e === "claimed" && e.t > readyAt),
        30_000,
        50,
      );
      firstClaims.push((ledgerOf(q).find((e) => e.e === "claimed" && e.t > readyAt)?.t ?? 0) - readyAt);
    }
    await until("every job terminal", async () => (await terminalCount(q)) === jobs, 120_000, 100);
    const drainMs = Date.now() - startedAt;
    for (const c of children) expect(c.proc.exitCode).toBe(null);
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.byStatus).toEqual({ completed: jobs });
    expect(r.duplicatesByReason.unexplained ?? 0).toBe(0);
    expect(maxOf(firstClaims)).toBeLessThan(10_000);
    // Claims between the count and the restart add at most one batch per worker (3 × 20).
    expect(r.duplicates).toBeLessThanOrEqual(inFlight.reduce((a, b) => a + b, 0) + 3 * 3 * 20);
    recordResult({
      row: "D6",
      title: `PostgreSQL restarted at 10 / 50 / 90 % of a ${jobs.toLocaleString("en")}-job drain (3 processes × concurrency 20)`,
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      duplicatesByReason: r.duplicatesByReason,
      staleRejected: r.staleOutcomesRejected,
      recoveryMs: maxOf(firstClaims),
      other: `running at the restarts: ${inFlight.join(" / ")}; first claim after PG ready: ${firstClaims.join(" / ")} ms; process restarts: 0; drain ${(drainMs / 1000).toFixed(1)} s`,
    });
  });
});
