/**
 * Pools, scale and time (matrix 7.3 and 7.5): handlers holding every pool
 * client they can get (R1), a claim against a million-row history (R5, at
 * reduced size), and a worker whose clock is five minutes fast (T1).
 *
 * Invariants: bookkeeping connections are reserved, so leases never lapse
 * while handlers hog the pool; the claim stays on the partial index however
 * large the history; every time comparison happens in the database.
 */
import pg from "pg";
import { describe, expect, it } from "vitest";
import { PoolTooSmallError } from "../../src/index.js";
import { nestedPlans } from "../plans.js";
import {
  CHAOS_WORKER,
  type ChaosQueue,
  enqueueChaos,
  ledgerOf,
  recordResult,
  SLACK_MS,
  spawnWorker,
  statusCounts,
  terminalCount,
  until,
} from "./harness.js";
import { reconcile } from "./ledger.js";
import { CHAOS_CONFIG, chaosSuite } from "./suite.js";

const HISTORY_ROWS = Number(process.env.CHAOS_HISTORY_ROWS ?? 1_000_000);
const suite = chaosSuite();
const queue = (label: string) => suite.queue(label);
const { workers } = suite;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

describe("pools, scale and time", () => {
  it("R1: handlers holding every pool client they can get never starve heartbeats or outcomes", async () => {
    const q = await queue("r1");
    const concurrency = 6;
    const tooSmall = new pg.Pool({ connectionString: suite.server.url, max: concurrency });
    expect(() => q.skipq.worker({ ...CHAOS_WORKER, concurrency, pool: tooSmall })).toThrow(PoolTooSmallError);
    await tooSmall.end();
    const shared = new pg.Pool({ connectionString: suite.server.url, max: 4 + concurrency });
    shared.on("error", () => undefined);
    const worker = q.skipq.worker({ ...CHAOS_WORKER, concurrency, pool: shared });
    workers.push(worker);
    const runs: string[] = [];
    const handlerEnds = new Map<string, number>();
    worker.register("chaos", async (_p, ctx) => {
      runs.push(ctx.job.id);
      // Hold a client from the worker's own pool for longer than the lease (2 s).
      const client = await shared.connect();
      try {
        await client.query("SELECT pg_sleep(2.5)");
      } finally {
        client.release();
        handlerEnds.set(ctx.job.id, Date.now());
      }
    });
    let reaped = 0;
    worker.on("reaped", (jobs) => {
      reaped += jobs.length;
    });
    const completedAt = new Map<string, number>();
    await enqueueChaos(q, 12, {});
    await worker.start();
    await until(
      "every job completed",
      async () => {
        const { rows } = await q.db.query(`SELECT id::text FROM "${q.schema}".all_jobs WHERE status = 'completed'`);
        for (const r of rows) if (!completedAt.has(r.id)) completedAt.set(r.id, Date.now());
        return rows.length === 12;
      },
      60_000,
      20,
    );
    await worker.stop();
    await shared.end();
    const delays = [...completedAt].map(([id, at]) => at - (handlerEnds.get(id) ?? at));
    expect(worker.stats.leasesLost).toBe(0);
    expect(reaped).toBe(0);
    expect(runs.length).toBe(12);
    expect(Math.max(...delays)).toBeLessThan(1000 + SLACK_MS);
    recordResult({
      row: "R1",
      title:
        "6 handlers each hold a client of the worker's pool (max 10 = 4 reserved + 6) for 2.5 s, longer than the lease",
      config: CHAOS_CONFIG,
      lost: 0,
      duplicates: runs.length - 12,
      other: `heartbeat misses (leases lost): 0; reaped: 0; outcome recorded ≤ ${Math.max(...delays)} ms after the handler ended (polled every 20 ms); a pool of exactly concurrency is refused with PoolTooSmallError`,
    });
  });

  it("R5: with a million-row history the claim stays on the partial index and within 2× of an empty table", async () => {
    const empty = await queue("r5-empty");
    const big = await queue("r5-big");
    const s = `"${big.schema}"`;
    const t0 = Date.now();
    await big.db.query(
      `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at,
                                    created_at, finished_at)
       SELECT i, 'default', 'chaos', '{}', 'completed', 0, 1, 10, now() - interval '1 day', now() - interval '1 day', now()
         FROM generate_series(1, $1) AS i`,
      [HISTORY_ROWS],
    );
    // Future jobs: pending, but not claimable yet.
    await big.db.query(
      `INSERT INTO ${s}.jobs (kind, run_at) SELECT 'chaos', now() + interval '1 day' FROM generate_series(1, $1)`,
      [HISTORY_ROWS / 10],
    );
    await big.db.query(`VACUUM ANALYZE ${s}.jobs`);
    await big.db.query(`ANALYZE ${s}.job_history`);
    const buildMs = Date.now() - t0;
    // The claim is a function: the plans of the statements it runs (auto_explain), not the call's.
    const explainer = await big.db.connect();
    const nodes = await nestedPlans(explainer, big.skipq.store.sql.jobs.jobClaimBatch.text, [
      ["default"],
      10,
      "w",
      30_000,
    ])
      .then((plans) => plans.flatMap((p) => p.nodes))
      .finally(() => explainer.release());
    expect(nodes.some((n) => n["Index Name"] === "jobs_pending_claim")).toBe(true);
    expect(nodes.some((n) => n["Node Type"] === "Seq Scan" && n["Relation Name"] === "jobs")).toBe(false);
    const measure = async (q: ChaosQueue): Promise<number[]> => {
      await enqueueChaos(q, 300, {});
      const times: number[] = [];
      for (let i = 0; i < 300; i++) {
        const started = performance.now();
        const { rows } = await q.db.query(q.skipq.store.sql.jobs.jobClaimBatch.text, [["default"], 1, "w", 30_000]);
        times.push(performance.now() - started);
        await q.db.query(q.skipq.store.sql.jobs.jobCompleteMany.text, [[rows[0].id], [rows[0].lease]]);
      }
      return times.slice(20); // warm-up
    };
    const base = await measure(empty);
    const loaded = await measure(big);
    const p50 = [percentile(base, 50), percentile(loaded, 50)];
    const p99 = [percentile(base, 99), percentile(loaded, 99)];
    expect(p50[1] ?? 0).toBeLessThan(Math.max(2 * (p50[0] ?? 0), 2));
    // Measured, not asserted (a known gap, reported): runnable jobs in a queue no worker reads (or a
    // paused queue) sit in the same index ahead of this queue's, and every claim steps over them.
    await big.db.query(
      `INSERT INTO ${s}.jobs (queue, kind, run_at) SELECT 'nobody-reads', 'chaos', now() - interval '1 hour' FROM generate_series(1, $1)`,
      [HISTORY_ROWS / 10],
    );
    await big.db.query(`ANALYZE ${s}.jobs`);
    const otherQueue = await measure(big);
    recordResult({
      row: "R5",
      title: `${(HISTORY_ROWS / 1e6).toFixed(1)} M completed rows + ${(HISTORY_ROWS / 1e7).toFixed(1)} M future rows (reduced from 10 M + 1 M); then ${(HISTORY_ROWS / 1e7).toFixed(1)} M runnable rows in a queue nobody reads`,
      config: "jobClaimBatch LIMIT 1, 280 claims after warm-up",
      lost: 0,
      duplicates: 0,
      other: `plan: Index Scan on jobs_pending_claim; claim p50 ${p50[0]?.toFixed(2)} → ${p50[1]?.toFixed(2)} ms, p99 ${p99[0]?.toFixed(2)} → ${p99[1]?.toFixed(2)} ms (empty → loaded); KNOWN GAP: with the other queue's runnable backlog p50 ${percentile(otherQueue, 50).toFixed(2)} ms, p99 ${percentile(otherQueue, 99).toFixed(2)} ms (jobs_pending_claim does not lead with queue); history built in ${(buildMs / 1000).toFixed(1)} s`,
    });
  });

  it("T1: a worker whose clock is 5 minutes fast neither runs scheduled jobs early nor reclaims live leases", async () => {
    const q = await queue("t1");
    // A job held by an honest worker for 4 s (its lease is 2 s, renewed every 0.5 s).
    await enqueueChaos(q, 1, { ms: 4000 });
    const honest = await spawnWorker(q, { worker: { ...CHAOS_WORKER, concurrency: 1 } });
    await until("the long job runs", () => ledgerOf(q, honest.pid).some((e) => e.e === "start"));
    const skewMs = 5 * 60_000;
    const skewed = await spawnWorker(q, { worker: { ...CHAOS_WORKER, concurrency: 4 }, skewMs });
    const ready = ledgerOf(q, skewed.pid).find((e) => e.e === "ready");
    expect((ready?.clock ?? 0) - (ready?.t ?? 0)).toBeGreaterThanOrEqual(skewMs - 1000);
    // Scheduled 3 s ahead by the database clock: the skewed worker thinks that time passed 5 minutes ago.
    await q.db.query(
      `INSERT INTO "${q.schema}".jobs (kind, payload, run_at) SELECT 'chaos', '{}', now() + interval '3 seconds' FROM generate_series(1, 5)`,
    );
    await until("every job completed", async () => (await terminalCount(q)) === 6, 30_000);
    const { rows } = await q.db.query(
      `SELECT id::text, (extract(epoch FROM run_at) * 1000)::float8 AS run_at_ms FROM "${q.schema}".all_jobs WHERE id > 1`,
    );
    const starts = ledgerOf(q).filter((e) => e.e === "start");
    const earliness = rows.map((r) => (starts.find((e) => e.id === r.id)?.t ?? 0) - r.run_at_ms);
    const worst = Math.min(...earliness);
    expect(worst).toBeGreaterThanOrEqual(-200);
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.duplicates).toBe(0);
    expect(r.executions).toBe(6);
    expect(await statusCounts(q)).toEqual({ completed: 6 });
    recordResult({
      row: "T1",
      title:
        "One worker's clock +5 min (injected Date): 5 jobs scheduled 3 s ahead; another worker's 4 s job under lease",
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      other: `earliest start − run_at (DB time): ${worst.toFixed(0)} ms (bar ≥ −poll 200 ms); premature reclaims: 0`,
    });
  });
});
