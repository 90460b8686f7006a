/**
 * Claim latency per claim path (plain, priority aging, limited), on one table
 * of 50,000 finished and 20,000 pending jobs (100 tenant keys).
 * Run: DATABASE_URL=postgres://… node --import tsx bench/flow-claim.ts
 * It creates and drops its own schema; it changes nothing else.
 */
import pg from "pg";
import { Admin, Skipq, silentLogger } from "../src/index.js";
import { Claimer } from "../src/worker/claimer.js";

const url = process.env.DATABASE_URL;
const schema = `bench_flow_${process.pid}`;
const skipq = new Skipq({ connectionString: url, schema, logger: silentLogger });
const db = new pg.Pool({ connectionString: url, max: 2 });
const CLAIMS = Number(process.env.CLAIMS ?? 400);
const BATCH = 10;

async function reset(): Promise<void> {
  await db.query(`TRUNCATE "${schema}".jobs, "${schema}".rate_starts`);
  await db.query(`INSERT INTO "${schema}".jobs (kind, status, completed_at, concurrency_key)
                  SELECT 'done', 'completed', now(), 'c' || (i % 100) FROM generate_series(1, 50000) i`);
  await db.query(`INSERT INTO "${schema}".jobs (kind, priority, run_at, concurrency_key)
                  SELECT 'work', i % 5, now() - (i % 600) * interval '1 second', 'c' || (i % 100)
                    FROM generate_series(1, 20000) i`);
  await db.query(`VACUUM ANALYZE "${schema}".jobs`);
}

async function measure(label: string, agingMs: number | undefined): Promise<void> {
  await reset();
  const claimer = new Claimer({
    jobs: skipq.jobs,
    queues: ["default"],
    workerId: "bench",
    leaseMs: 30_000,
    agingMs,
    refreshMs: 60_000,
    sweepEveryMs: 10_000,
    logger: silentLogger,
  });
  await claimer.start();
  const times: number[] = [];
  let claimed = 0;
  for (let i = 0; i < CLAIMS; i++) {
    const t0 = performance.now();
    claimed += (await claimer.claim(BATCH)).length;
    times.push(performance.now() - t0);
  }
  await claimer.stop();
  times.sort((a, b) => a - b);
  const at = (q: number) => (times[Math.floor(q * (times.length - 1))] as number).toFixed(2);
  console.log(
    `${label.padEnd(44)} p50 ${at(0.5)} ms  p99 ${at(0.99)} ms  (${CLAIMS} claims of ${BATCH}, ${claimed} jobs)`,
  );
}

await skipq.migrate();
try {
  const admin = new Admin(skipq);
  // Baseline: a round trip that does nothing (on a loaded machine this dominates everything else).
  const rt: number[] = [];
  for (let i = 0; i < CLAIMS; i++) {
    const t0 = performance.now();
    await skipq.pool.query("SELECT 1");
    rt.push(performance.now() - t0);
  }
  rt.sort((a, b) => a - b);
  console.log(`${"round trip (SELECT 1)".padEnd(44)} p50 ${(rt[Math.floor(rt.length / 2)] as number).toFixed(2)} ms`);
  await measure("plain claim (no limits, no aging)", undefined);
  await measure("aging claim (priorityAging 5 min)", 300_000);
  await admin.setQueueLimits("default", { concurrency: 100_000, keyConcurrency: 1000 });
  await measure("limited claim (queue + per-key concurrency)", undefined);
  await admin.setQueueLimits("default", { rate: { limit: 1_000_000, window: "1s", perKey: true } });
  await measure("limited claim (per-key rate limit)", undefined);
} finally {
  await db.query(`DROP SCHEMA "${schema}" CASCADE`);
  await db.end();
  await skipq.close();
}
