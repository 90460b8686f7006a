/**
 * Fair claims (docs/flow-control.md, "Fairness"): 10 keys, one holding
 * 1,000,000 jobs and nine holding 1,000 each (arriving 1 s after the drain
 * began, behind the big key's backlog), drained by 10 processes, with the
 * queue's concurrency limited to 80 of the 100 slots — once with
 * `fairness: {}` and once without (the same limits), then claim latency with
 * 10,000 active keys. One command, one table, the ratios:
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/fair.ts [--quick]
 *
 * --quick (CI): 20,000 + 9 × 200 jobs, 4 processes, 1,000 keys; --big N,
 * --small N, --procs N, --keys N override the sizes; --latency-only. Shares are
 * each key's claims while every key was backlogged over its weight's share;
 * "first start" is a small key's first claim after its enqueue committed;
 * "most running" is the most jobs running at one instant (claim to outcome,
 * from job_history). Drops its schemas.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { Admin, Skipq, silentLogger } from "skipq";
import { percentile } from "./lib.js";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("set DATABASE_URL (a PostgreSQL this script may create a schema in)");
const self = fileURLToPath(import.meta.url);
const quick = process.argv.includes("--quick");
function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}
const BIG = option("big", quick ? 20_000 : 1_000_000);
const SMALL_KEYS = 9;
const SMALL = option("small", quick ? 200 : 1_000);
const PROCS = option("procs", quick ? 4 : 10);
const SLOTS = 10;
const LIMIT = Math.round(PROCS * SLOTS * 0.8);
const ACTIVE_KEYS = option("keys", quick ? 1_000 : 10_000);
/** --latency-only: just the claim latency at ACTIVE_KEYS keys. */
const LATENCY_ONLY = process.argv.includes("--latency-only");

if (process.argv[2] === "--child") {
  // A worker process on the bench's schema: starts on "go", stops on "stop".
  const skipq = new Skipq({ connectionString: url, schema: process.argv[3], logger: silentLogger, poolSize: 4 });
  const worker = skipq.worker({ queues: ["fair"], concurrency: SLOTS, pollInterval: 50 });
  worker.register("noop", () => undefined);
  process.on("message", async (message) => {
    if (message === "go") await worker.start();
    if (message === "stop") {
      await worker.stop();
      await skipq.close();
      process.send?.("stopped", undefined, {}, () => process.exit(0));
    }
  });
  process.send?.("ready");
} else {
  await main();
}

interface Drain {
  rate: number;
  /** Each key's share of the claims while all were backlogged, over its expected share. */
  shareRatios: number[];
  firstStartMs: number[];
  mostRunning: number;
  /** The most running rows one snapshot saw, sampled every few ms on a connection of its own. */
  mostRunningSampled: number;
}

async function drain(fair: boolean): Promise<Drain> {
  const schema = `bench_fair_${fair ? "on" : "off"}_${process.pid}`;
  const skipq = new Skipq({ connectionString: url, schema, logger: silentLogger });
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const children: ChildProcess[] = [];
  try {
    await skipq.migrate();
    await new Admin(skipq).setQueueLimits("fair", { concurrency: LIMIT, ...(fair ? { fairness: {} } : {}) });
    await db.query(
      `INSERT INTO "${schema}".jobs (kind, queue, concurrency_key)
                    SELECT 'noop', 'fair', 'big' FROM generate_series(1, $1)`,
      [BIG],
    );
    await db.query(`VACUUM ANALYZE "${schema}".jobs`);
    for (let i = 0; i < PROCS; i++) {
      const c = fork(self, ["--child", schema], { execArgv: ["--import", "tsx"] });
      await new Promise((resolve) => c.once("message", resolve));
      children.push(c);
    }
    for (const c of children) c.send("go");
    await new Promise((resolve) => setTimeout(resolve, 1000));
    await db.query(
      `INSERT INTO "${schema}".jobs (kind, queue, concurrency_key)
       SELECT 'noop', 'fair', 'small-' || k FROM generate_series(1, $1) k, generate_series(1, $2)`,
      [SMALL_KEYS, SMALL],
    );
    // Just after the insert committed: claims could see the small keys from (at most a round trip before) here.
    const { rows: committed } = await db.query("SELECT clock_timestamp() AS at");
    const arrivedAt = committed[0].at as Date;
    const total = BIG + SMALL_KEYS * SMALL;
    let sampling = true;
    let mostRunningSampled = 0;
    const sampler = (async () => {
      while (sampling) {
        const { rows } = await db.query(
          `SELECT count(*)::int AS n FROM "${schema}".jobs WHERE queue = 'fair' AND status = 'running'`,
        );
        mostRunningSampled = Math.max(mostRunningSampled, rows[0].n);
        await new Promise((resolve) => setTimeout(resolve, 5));
      }
    })();
    for (;;) {
      const { rows } = await db.query(`SELECT count(*)::int AS n FROM "${schema}".jobs`);
      if (rows[0].n === 0) break;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
    sampling = false;
    await sampler;
    const span = await db.query(
      `SELECT EXTRACT(EPOCH FROM max(finished_at) - min(locked_at)) AS s FROM "${schema}".job_history`,
    );
    // While every key was backlogged: from the small keys' arrival to the first small key's last claim.
    const shares = await db.query(
      `WITH until AS (SELECT min(last) AS t FROM (SELECT max(locked_at) AS last FROM "${schema}".job_history
                                                  WHERE concurrency_key <> 'big' GROUP BY concurrency_key) x)
       SELECT concurrency_key AS key, count(*)::int AS n FROM "${schema}".job_history
        WHERE locked_at >= $1 AND locked_at < (SELECT t FROM until) GROUP BY 1`,
      [arrivedAt],
    );
    const inWindow = shares.rows.reduce((a, r) => a + r.n, 0);
    const first = await db.query(
      `SELECT EXTRACT(EPOCH FROM min(locked_at) - $1::timestamptz) * 1000 AS ms FROM "${schema}".job_history
        WHERE concurrency_key <> 'big' GROUP BY concurrency_key`,
      [arrivedAt],
    );
    const running = await db.query(
      `SELECT max(n)::int AS n FROM (
         SELECT sum(d) OVER (ORDER BY at, d) AS n FROM (
           SELECT locked_at AS at, 1 AS d FROM "${schema}".job_history
           UNION ALL SELECT finished_at, -1 FROM "${schema}".job_history) e) x`,
    );
    return {
      rate: total / Number(span.rows[0].s),
      shareRatios: shares.rows.map((r) => r.n / inWindow / (1 / (SMALL_KEYS + 1))),
      firstStartMs: first.rows.map((r) => Number(r.ms)),
      mostRunning: running.rows[0].n,
      mostRunningSampled,
    };
  } finally {
    await Promise.all(
      children.map(
        (c) =>
          new Promise((resolve) => {
            c.once("message", resolve);
            c.send("stop");
          }),
      ),
    );
    await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await db.end();
    await skipq.close();
  }
}

/** Claim latency (batch `batch`) with ACTIVE_KEYS keys of 5 jobs each, one claimer; claimed jobs are removed. */
async function latency(fair: boolean, batch: number): Promise<{ p50: number; p95: number }> {
  const schema = `bench_fair_lat_${process.pid}`;
  const skipq = new Skipq({ connectionString: url, schema, logger: silentLogger });
  const db = new pg.Pool({ connectionString: url, max: 2 });
  try {
    await skipq.migrate();
    await new Admin(skipq).setQueueLimits("fair", fair ? { fairness: {} } : { concurrency: 1_000_000 });
    await db.query(
      `INSERT INTO "${schema}".jobs (kind, queue, concurrency_key)
                    SELECT 'noop', 'fair', 'k' || k FROM generate_series(1, $1) k, generate_series(1, 5)`,
      [ACTIVE_KEYS],
    );
    await db.query(`VACUUM ANALYZE "${schema}".jobs`);
    const claims = fair
      ? (n: number) =>
          skipq.jobs.claimFair({ queues: ["fair"], limit: n, workerId: "b", leaseMs: 30_000, sweep: false })
      : (n: number) =>
          skipq.jobs.claimLimited({
            freeQueues: [],
            limitedQueues: ["fair"],
            limit: n,
            workerId: "b",
            leaseMs: 30_000,
            agingMs: null,
            lookahead: Math.max(100, n * 10),
          });
    const times: number[] = [];
    // Two rounds over the keys at batch 10 (each key keeps jobs throughout), at least 300 claims.
    const count = Math.max(300, Math.round((2 * ACTIVE_KEYS) / batch));
    for (let i = 0; i < Math.min(count, 2000); i++) {
      const t0 = performance.now();
      const rows = await claims(batch);
      times.push(performance.now() - t0);
      await db.query(`DELETE FROM "${schema}".jobs WHERE id = ANY ($1::bigint[])`, [rows.map((r) => r.id)]);
    }
    times.splice(0, 20); // warm-up: plans cached
    return { p50: percentile(times, 50), p95: percentile(times, 95) };
  } finally {
    await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await db.end();
    await skipq.close();
  }
}

async function main(): Promise<void> {
  console.log(
    `fair claims: 1 key × ${BIG.toLocaleString("en-US")} + ${SMALL_KEYS} × ${SMALL.toLocaleString("en-US")} jobs, ${PROCS} processes × ${SLOTS}, concurrency ${LIMIT}`,
  );
  const none: Drain = { rate: Number.NaN, shareRatios: [], firstStartMs: [], mostRunning: 0, mostRunningSampled: 0 };
  const on = LATENCY_ONLY ? none : await drain(true);
  const off = LATENCY_ONLY ? none : await drain(false);
  const lat = {
    fair1: await latency(true, 1),
    fair10: await latency(true, 10),
    unfair10: await latency(false, 10),
  };
  const range = (xs: number[], digits: number) =>
    xs.length === 0 ? "-" : `${Math.min(...xs).toFixed(digits)}–${Math.max(...xs).toFixed(digits)}`;
  console.log("\n| measure | fairness | without fairness (same limits) | target |");
  console.log("| --- | --- | --- | --- |");
  console.log(
    `| share while backlogged / weight's share (10 keys) | ${range(on.shareRatios, 3)} | ${range(off.shareRatios, 3)} | 0.95–1.05 |`,
  );
  console.log(
    `| small keys' first start after enqueue, ms | ${range(on.firstStartMs, 0)} | ${range(off.firstStartMs, 0)} | ≤ 100 |`,
  );
  console.log(`| most running at once (limit ${LIMIT}) | ${on.mostRunning} | ${off.mostRunning} | ≤ ${LIMIT} |`);
  console.log(
    `| most running rows one snapshot saw (sampled) | ${on.mostRunningSampled} | ${off.mostRunningSampled} | ≤ ${LIMIT} |`,
  );
  console.log(
    `| drain, jobs/s | ${Math.round(on.rate).toLocaleString("en-US")} | ${Math.round(off.rate).toLocaleString("en-US")} | ratio ${(on.rate / off.rate).toFixed(2)} ≥ 0.90 |`,
  );
  console.log(
    `| claim p50 / p95 ms, ${ACTIVE_KEYS.toLocaleString("en-US")} active keys, batch 10 | ${lat.fair10.p50.toFixed(2)} / ${lat.fair10.p95.toFixed(2)} | ${lat.unfair10.p50.toFixed(2)} / ${lat.unfair10.p95.toFixed(2)} | p95 ≤ 2 |`,
  );
  console.log(
    `| claim p50 / p95 ms, ${ACTIVE_KEYS.toLocaleString("en-US")} active keys, batch 1 | ${lat.fair1.p50.toFixed(2)} / ${lat.fair1.p95.toFixed(2)} | | p95 ≤ 2 |`,
  );
}
