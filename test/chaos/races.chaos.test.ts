/**
 * Concurrency and races (matrix 7.4), driven through the real SQL statements
 * and real connections: 100 claimers on 10 jobs, a large drain with failures,
 * reaper against completion, two reapers, 20 concurrent migrators, idempotency
 * key contention, transactional enqueue visibility, cancel while running.
 *
 * Invariant for every test: a job is held by at most one lease at a time, and
 * a terminal job never moves (except by an operator's retry).
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { Store } from "../../src/db/store.js";
import { Admin, latestVersion, Skipq, silentLogger } from "../../src/index.js";
import { LeaderLease } from "../../src/maintenance/leader.js";
import { Reaper } from "../../src/maintenance/reaper.js";
import {
  CHAOS_WORKER,
  enqueueChaos,
  recordResult,
  spawnWorker,
  statusCounts,
  terminalCount,
  until,
} from "./harness.js";
import { reconcile } from "./ledger.js";
import { CHAOS_CONFIG, chaosSuite } from "./suite.js";

const suite = chaosSuite();
const queue = (label: string) => suite.queue(label);
const { workers } = suite;

async function clients(n: number): Promise<pg.Client[]> {
  return Promise.all(
    Array.from({ length: n }, async () => {
      const c = new pg.Client({ connectionString: suite.server.url });
      c.on("error", () => undefined);
      await c.connect();
      return c;
    }),
  );
}

describe("races", () => {
  it("C1: 100 connections racing to claim 10 jobs claim each exactly once, never more rows than LIMIT, with no errors", async () => {
    const q = await queue("c1");
    await enqueueChaos(q, 10, {});
    const conns = await clients(100);
    const claimed: string[] = [];
    let maxRows = 0;
    let errors = 0;
    let claims = 0;
    try {
      await Promise.all(
        conns.map(async (c, i) => {
          for (let round = 0; round < 20; round++) {
            try {
              const { rows } = await c.query(q.skipq.store.sql.jobs.jobClaimBatch.text, [
                ["default"],
                2,
                `racer-${i}`,
                30_000,
              ]);
              claims++;
              maxRows = Math.max(maxRows, rows.length);
              for (const row of rows) claimed.push(row.id);
            } catch {
              errors++;
            }
          }
        }),
      );
    } finally {
      await Promise.all(conns.map((c) => c.end()));
    }
    expect(errors).toBe(0);
    expect(maxRows).toBeLessThanOrEqual(2);
    expect(claimed.length).toBe(10);
    expect(new Set(claimed).size).toBe(10);
    recordResult({
      row: "C1",
      title: "100 connections × 20 claims (LIMIT 2) racing on 10 jobs",
      config: "direct jobClaimBatch",
      lost: 0,
      duplicates: claimed.length - new Set(claimed).size,
      other: `claims run: ${claims}; most rows in one claim: ${maxRows} (LIMIT 2); errors/deadlocks: ${errors}`,
    });
  });

  it("C2: a drain by 3 processes with 5 % random failures and maxAttempts 3 ends with every job terminal and no attempt over the max", async () => {
    const q = await queue("c2");
    const jobs = 3000;
    await enqueueChaos(q, jobs, { failP: 0.05 }, 3);
    const worker = { ...CHAOS_WORKER, concurrency: 20, backoff: { baseMs: 20, maxMs: 50 } };
    await Promise.all([1, 2, 3].map(() => spawnWorker(q, { worker })));
    await until("every job terminal", async () => (await terminalCount(q)) === jobs, 120_000, 100);
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.attemptsOverMax).toBe(0);
    expect(r.duplicates).toBe(0);
    expect(r.executions).toBe(r.distinctJobs + r.policyRetries);
    const { rows } = await q.db.query(`SELECT sum(attempts)::int AS attempts FROM "${q.schema}".all_jobs`);
    expect(rows[0].attempts).toBe(r.executions);
    recordResult({
      row: "C2",
      title: "3 processes × concurrency 20 drain 3,000 jobs, 5 % random failures, maxAttempts 3",
      config: `${CHAOS_CONFIG}, backoff 20-50 ms`,
      lost: r.lost,
      duplicates: r.duplicates,
      other: `executions ${r.executions} = jobs ${r.distinctJobs} + retries ${r.policyRetries}; dead ${r.byStatus.dead ?? 0}; attempts > max: ${r.attemptsOverMax}`,
    });
  });

  it("C3: a reaper racing a completion never reverts a completed job", async () => {
    const q = await queue("c3");
    const s = q.skipq.schemaSql;
    const maintenance = q.skipq.store.sql.maintenance;
    const [reaper, worker] = await clients(2);
    if (!reaper || !worker) throw new Error("no connections");
    let reverted = 0;
    let staleCompletions = 0;
    try {
      for (const reaperFirst of [false, true]) {
        await q.db.query(`DELETE FROM ${s}.jobs; DELETE FROM ${s}.job_history`);
        await enqueueChaos(q, 1, {});
        const { rows } = await q.db.query(q.skipq.store.sql.jobs.jobClaimBatch.text, [["default"], 1, "w", 30_000]);
        const job = rows[0];
        // The lease ran out just now: both the reaper and the late completion are legitimate contenders.
        await q.db.query(`UPDATE ${s}.jobs SET lease_expires_at = now() - interval '1 ms' WHERE id = $1`, [job.id]);
        await reaper.query("BEGIN");
        let completion: Promise<pg.QueryResult>;
        if (reaperFirst) {
          // The reaper locks the row first; the completion waits on it, then finds the lease gone.
          await reaper.query(maintenance.jobReapExpired.text, [1000]);
          completion = worker.query(q.skipq.store.sql.jobs.jobCompleteMany.text, [[job.id], [job.lease]]);
          await until("the completion waits on the reaper's row lock", async () => {
            const { rows: waiting } = await q.db.query(
              "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%WITH done AS%'",
            );
            return waiting.length > 0;
          });
          await reaper.query("COMMIT");
          staleCompletions += (await completion).rowCount === 0 ? 1 : 0;
        } else {
          completion = worker.query(q.skipq.store.sql.jobs.jobCompleteMany.text, [[job.id], [job.lease]]);
          expect((await completion).rowCount).toBe(1);
          await reaper.query(maintenance.jobReapExpired.text, [1000]);
          await reaper.query("COMMIT");
          const { rows: after } = await q.db.query(`SELECT status FROM ${s}.all_jobs WHERE id = $1`, [job.id]);
          if (after[0].status !== "completed") reverted++;
        }
      }
    } finally {
      await reaper.end();
      await worker.end();
    }
    expect(reverted).toBe(0);
    expect(staleCompletions).toBe(1);
    recordResult({
      row: "C3",
      title: "Reaper and completion race on an expired lease, both orders (row locks held across the race)",
      config: "direct jobReapExpired / jobCompleteMany",
      lost: 0,
      duplicates: 0,
      staleRejected: staleCompletions,
      other: `reverted terminal jobs: ${reverted}; the late completion after a reap is rejected (0 rows)`,
    });
  });

  it("C4: two reapers at once reclaim each expired job exactly once, without deadlock", async () => {
    const q = await queue("c4");
    const s = `"${q.schema}"`;
    await enqueueChaos(q, 500, {});
    await q.db.query(q.skipq.store.sql.jobs.jobClaimBatch.text, [["default"], 500, "dead-worker", 30_000]);
    await q.db.query(`UPDATE ${s}.jobs SET lease_expires_at = now() - interval '1 second'`);
    const pools = [1, 2, 3].map(() => new pg.Pool({ connectionString: suite.server.url, max: 2 }));
    // Three maintainers elect a leader through the lease; only the leader's reaper reaps.
    const stores = pools.map((pool) => new Store(q.schema, pool));
    const leases = stores.map(
      (store, i) => new LeaderLease({ store, holder: `maintainer-${i}`, leaseMs: 30_000, logger: silentLogger }),
    );
    const reapers = stores.map(
      (store, i) =>
        new Reaper({
          store,
          intervalMs: 1000,
          logger: silentLogger,
          isLeader: () => (leases[i] as LeaderLease).isLeader,
        }),
    );
    const maintenance = q.skipq.store.sql.maintenance;
    let deadlocks = 0;
    const ids: string[] = [];
    try {
      const elected = await Promise.all(leases.map((l) => l.tryAcquire()));
      expect(elected.filter(Boolean)).toHaveLength(1);
      const results = await Promise.all(reapers.map((r) => r.runOnce()));
      expect(results.filter((r) => r.leader)).toHaveLength(1);
      for (const r of results) ids.push(...r.reaped.map((x) => x.id));
      // Split leadership: the statement itself run in parallel without the lock (SKIP LOCKED + recheck).
      await q.db.query(q.skipq.store.sql.jobs.jobClaimBatch.text, [["default"], 500, "dead-worker", 30_000]);
      await q.db.query(`UPDATE ${s}.jobs SET lease_expires_at = now() - interval '1 second'`);
      const raw = await Promise.all(
        pools.map((pool) =>
          pool.query(maintenance.jobReapExpired.text, [100]).catch((e: { code?: string }) => {
            if (e.code === "40P01") deadlocks++;
            throw e;
          }),
        ),
      );
      const second: string[] = [];
      for (;;) {
        const more = await Promise.all(pools.map((pool) => pool.query(maintenance.jobReapExpired.text, [100])));
        for (const m of more) second.push(...m.rows.map((x) => x.id));
        if (more.every((m) => m.rows.length === 0)) break;
      }
      for (const r of raw) second.push(...r.rows.map((x) => x.id));
      expect(second.length).toBe(500);
      expect(new Set(second).size).toBe(500);
    } finally {
      await Promise.all(leases.map((l) => l.stop()));
      await Promise.all(pools.map((p) => p.end()));
    }
    expect(ids.length).toBe(500);
    expect(new Set(ids).size).toBe(500);
    expect(deadlocks).toBe(0);
    recordResult({
      row: "C4",
      title: "3 reapers at once on 500 expired leases: behind the leader lease, and with split leadership",
      config: "Reaper.runOnce ×3; jobReapExpired ×3 in parallel",
      lost: 0,
      duplicates: 0,
      other: `double reclaims: 0; deadlocks: ${deadlocks}`,
    });
  });

  it("C5: 20 concurrent migrators apply each version exactly once, and re-migrating under a live worker does not deadlock", async () => {
    const schema = `c5_${process.pid}`;
    const migrators = Array.from(
      { length: 20 },
      () => new Skipq({ connectionString: suite.server.url, schema, logger: silentLogger, poolSize: 2 }),
    );
    const started = Date.now();
    let failures = 0;
    try {
      const results = await Promise.all(
        migrators.map((m) =>
          m.migrate().catch(() => {
            failures++;
            return undefined;
          }),
        ),
      );
      const wallMs = Date.now() - started;
      expect(failures).toBe(0);
      const appliedBy = results.map((r) => r?.applied.length ?? 0);
      expect(appliedBy.reduce((a, b) => a + b, 0)).toBe(
        (await migrators[0]?.pool.query(`SELECT count(*)::int AS n FROM "${schema}".migrations`))?.rows[0].n,
      );
      const first = migrators[0];
      if (!first) throw new Error("no migrator");
      const live = first.worker({ ...CHAOS_WORKER, concurrency: 2 });
      live.register("chaos", async () => undefined);
      workers.push(live);
      await live.start();
      await first.enqueue("chaos", {});
      const again = await Promise.all(migrators.slice(1, 6).map((m) => m.migrate()));
      expect(again.every((r) => r.applied.length === 0 && r.to === latestVersion())).toBe(true);
      await until("the live worker still runs jobs", async () => {
        const { rows } = await first.pool.query(`SELECT status FROM "${schema}".all_jobs`);
        return rows[0]?.status === "completed";
      });
      recordResult({
        row: "C5",
        title: "20 processes' clients migrate an empty schema at once; then 5 re-migrate under a live worker",
        config: "advisory-lock-serialised migrations",
        lost: 0,
        duplicates: 0,
        other: `failures: ${failures}; deadlocks: 0; each version applied once; wall time ${wallMs} ms`,
      });
    } finally {
      await Promise.all(workers.splice(0).map((w) => w.stop()));
      await Promise.all(migrators.map((m) => m.close()));
    }
  });

  it("C6: 50 concurrent transactions enqueueing one idempotency key, half rolled back, leave exactly one job", async () => {
    const q = await queue("c6");
    const conns = await clients(50);
    const results: Array<{ id: string; created: boolean; committed: boolean }> = [];
    try {
      await Promise.all(
        conns.map(async (c, i) => {
          await c.query("BEGIN");
          const r = await q.skipq.enqueueTx(c, "chaos", { i }, { idempotencyKey: "order-42" });
          const commit = i % 2 === 0;
          await c.query(commit ? "COMMIT" : "ROLLBACK");
          results.push({ ...r, committed: commit });
        }),
      );
    } finally {
      await Promise.all(conns.map((c) => c.end()));
    }
    const { rows } = await q.db.query(`SELECT id FROM "${q.schema}".all_jobs`);
    expect(rows.length).toBe(1);
    const committedIds = new Set(results.filter((r) => r.committed).map((r) => r.id));
    expect([...committedIds]).toEqual([rows[0].id]);
    // Collision with a running job: the existing job is returned and nothing new is queued (documented).
    await q.db.query(q.skipq.store.sql.jobs.jobClaimBatch.text, [["default"], 1, "w", 30_000]);
    const again = await q.skipq.enqueue("chaos", {}, { idempotencyKey: "order-42" });
    expect(again).toEqual({ id: rows[0].id, created: false });
    recordResult({
      row: "C6",
      title: "50 concurrent transactions enqueue the same key; 25 roll back; then a repeat while the job runs",
      config: "enqueueTx with idempotencyKey",
      lost: 0,
      duplicates: 0,
      other:
        "jobs per key: 1; a repeat while the job is running returns it (created: false): 1 dropped enqueue, by design",
    });
  });

  it("C7: a job enqueued in an open transaction is invisible until commit, does not block claims, and vanishes on rollback", async () => {
    const q = await queue("c7");
    const worker = q.skipq.worker({ ...CHAOS_WORKER, concurrency: 1, listen: false, maintenance: false });
    const ran: string[] = [];
    worker.register("chaos", async (_p, ctx) => {
      ran.push(ctx.job.id);
    });
    const [tx] = await clients(1);
    if (!tx) throw new Error("no connection");
    const claimMs: number[] = [];
    try {
      for (const outcome of ["ROLLBACK", "COMMIT"]) {
        await tx.query("BEGIN");
        const hidden = await q.skipq.enqueueTx(tx, "chaos", { hidden: true });
        const visible = await q.skipq.enqueue("chaos", { hidden: false });
        const t0 = performance.now();
        expect(await worker.runOnce()).toBe(1);
        claimMs.push(performance.now() - t0);
        expect(ran.at(-1)).toBe(visible.id);
        expect(await worker.runOnce()).toBe(0);
        await tx.query(outcome);
        const claimedAfter = await worker.runOnce();
        expect(claimedAfter).toBe(outcome === "COMMIT" ? 1 : 0);
        if (outcome === "COMMIT") expect(ran.at(-1)).toBe(hidden.id);
      }
    } finally {
      await tx.end();
      await worker.stop();
    }
    expect(await statusCounts(q)).toEqual({ completed: 3 });
    recordResult({
      row: "C7",
      title: "Enqueue in an open transaction, then rollback / commit, while a worker claims",
      config: "runOnce",
      lost: 0,
      duplicates: 0,
      other: `premature executions: 0; claim + run of another job while the enqueue transaction was open: ${Math.max(...claimMs).toFixed(0)} ms`,
    });
  });

  it("C8: a job cancelled while running aborts its handler's signal, ends cancelled, and is not retried", async () => {
    const q = await queue("c8");
    const worker = q.skipq.worker({ ...CHAOS_WORKER, concurrency: 1 });
    workers.push(worker);
    let runs = 0;
    let abortReason: unknown;
    worker.register("chaos", async (_p, ctx) => {
      runs++;
      await new Promise<void>((resolve) =>
        ctx.signal.addEventListener("abort", () => {
          abortReason = ctx.signal.reason;
          resolve();
        }),
      );
      throw ctx.signal.reason;
    });
    const ends: string[] = [];
    worker.on("jobEnd", (_j, outcome) => ends.push(outcome));
    const { id } = await q.skipq.enqueue("chaos", {});
    await worker.start();
    await until("the handler runs", () => runs === 1);
    const cancelledAt = Date.now();
    await new Admin(q.skipq).cancelJob(id);
    await until("the handler's signal aborted", () => abortReason !== undefined);
    const abortMs = Date.now() - cancelledAt;
    await until("the worker recorded the end", () => ends.length === 1);
    // Whichever notices first, the cancel message or a heartbeat finding the lease gone, the job's history says cancelled.
    expect(ends).toEqual(["cancelled"]);
    expect((abortReason as { code?: string }).code).toBe("SKIPQ_CANCEL");
    const job = await new Admin(q.skipq).getJob(id);
    expect(job?.status).toBe("cancelled");
    expect(runs).toBe(1);
    recordResult({
      row: "C8",
      title: "Operator cancels a running job",
      config: CHAOS_CONFIG,
      lost: 0,
      duplicates: runs - 1,
      other: `state: cancelled; signal aborted ${abortMs} ms after the cancel (next heartbeat, every 500 ms); runs: ${runs}`,
    });
  });
});
