/**
 * Where a multi-process drain spends its time: the same backlog drained by
 * 1 process and by N processes, with per-process claim sizes, jobs and CPU,
 * and what the server's skipq sessions were waiting on (pg_stat_activity,
 * sampled every 5 ms).
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/processes.ts [--jobs 100000] [--procs 4] [--reps 3]
 *
 * Each layout runs `--reps` times, interleaved; the table shows each layout's
 * median run. CPU is the children's user + system time after their start-up
 * (measured apart, with no job). Drops its schema.
 */
import { type ChildProcess, fork } from "node:child_process";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { Skipq, silentLogger } from "skipq";
import { median } from "./lib.js";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("set DATABASE_URL (a PostgreSQL this script may create a schema in)");
const schema = "bench_processes";
const child = fileURLToPath(import.meta.url);

interface ChildReport {
  jobs: number;
  claims: number;
  claimed: number;
  cpuMs: number;
}

if (process.argv[2] === "--child") {
  // A worker process: starts on "go", reports its count every 20 ms, and its figures on "stop".
  const skipq = new Skipq({ connectionString: url, schema, logger: silentLogger });
  const worker = skipq.worker({ concurrency: Number(process.argv[3]) });
  let jobs = 0;
  let claims = 0;
  let claimed = 0;
  worker.on("claimed", (batch) => {
    claims++;
    claimed += batch.length;
  });
  worker.register("noop", () => {
    jobs++;
  });
  const started = process.cpuUsage();
  process.on("message", async (message) => {
    if (message === "go") await worker.start();
    if (message === "stop") {
      await worker.stop();
      const cpu = process.cpuUsage(started);
      const report: ChildReport = { jobs, claims, claimed, cpuMs: (cpu.user + cpu.system) / 1000 };
      process.send?.({ report }, undefined, {}, () => process.exit(0));
      await skipq.close();
    }
  });
  setInterval(() => process.send?.({ jobs }), 20).unref();
  process.send?.("ready");
} else {
  await main();
}

function option(name: string, fallback: number): number {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? Number(process.argv[i + 1]) : fallback;
}

interface Run {
  layout: string;
  rate: number;
  perProcess: number[];
  jobsPerClaim: number;
  cpuUsPerJob: number;
  waits: Map<string, number>;
}

async function main(): Promise<void> {
  const jobs = option("jobs", 100_000);
  const procs = option("procs", 4);
  const reps = option("reps", 3);
  const skipq = new Skipq({ connectionString: url, schema, logger: silentLogger });
  await skipq.migrate();
  const db = new pg.Pool({ connectionString: url, max: 2 });
  const layouts: Array<[string, number, number]> = [
    ["1 process × concurrency 10", 1, 10],
    [`1 process × concurrency ${10 * procs}`, 1, 10 * procs],
    [`${procs} processes × concurrency 10`, procs, 10],
  ];
  const runs: Run[] = [];
  try {
    for (let rep = 0; rep < reps; rep++) {
      for (const [layout, n, concurrency] of layouts) {
        await db.query(`TRUNCATE ${schema}.jobs, ${schema}.job_history`);
        await skipq.enqueueMany(
          Array.from({ length: jobs }, (_, i) => ({ job: "noop", payload: { i } })),
          { returning: false },
        );
        await db.query(`VACUUM ANALYZE ${schema}.jobs`);
        runs.push({ layout, ...(await drain(db, jobs, n, concurrency)) });
        console.log(`rep ${rep + 1} ${layout}: ${Math.round(runs.at(-1)?.rate ?? 0).toLocaleString("en-US")} jobs/s`);
      }
    }
  } finally {
    await db.query(`DROP SCHEMA ${schema} CASCADE`);
    await db.end();
    await skipq.close();
  }
  console.log(
    "\n| layout | jobs/s (median run) | jobs per process | jobs per claim | worker CPU µs/job | top server waits (share of samples of active skipq sessions) |",
  );
  console.log("| --- | --- | --- | --- | --- | --- |");
  for (const [layout] of layouts) {
    const mine = runs.filter((r) => r.layout === layout).sort((a, b) => a.rate - b.rate);
    const r = mine[Math.floor(mine.length / 2)] as Run;
    const total = [...r.waits.values()].reduce((a, b) => a + b, 0) || 1;
    const waits = [...r.waits]
      .sort((a, b) => b[1] - a[1])
      .slice(0, 4)
      .map(([w, n]) => `${w} ${Math.round((100 * n) / total)}%`)
      .join(", ");
    console.log(
      `| ${layout} | ${Math.round(r.rate).toLocaleString("en-US")} | ${r.perProcess.map((n) => n.toLocaleString("en-US")).join(" / ")} | ${Math.round(r.jobsPerClaim)} | ${r.cpuUsPerJob.toFixed(1)} | ${waits} |`,
    );
  }
  console.log(`\nmedian of ${reps}; rates of every run: `);
  for (const [layout] of layouts) {
    const rates = runs.filter((r) => r.layout === layout).map((r) => Math.round(r.rate));
    console.log(`  ${layout}: ${rates.join(", ")} (median ${median(rates)})`);
  }
}

async function drain(db: pg.Pool, jobs: number, n: number, concurrency: number): Promise<Omit<Run, "layout">> {
  const children: ChildProcess[] = [];
  const counts = new Array<number>(n).fill(0);
  for (let i = 0; i < n; i++) {
    const c = fork(child, ["--child", String(concurrency)], { execArgv: ["--import", "tsx"] });
    await new Promise((resolve) => c.once("message", resolve));
    c.on("message", (m: { jobs?: number }) => {
      if (typeof m.jobs === "number") counts[i] = m.jobs;
    });
    children.push(c);
  }
  const waits = new Map<string, number>();
  let sampling = true;
  const sampler = (async () => {
    while (sampling) {
      const { rows } = await db.query<{ w: string; n: number }>(
        `SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU (no wait event)') AS w, count(*)::int AS n
           FROM pg_stat_activity
          WHERE application_name LIKE 'skipq%' AND state = 'active' AND pid <> pg_backend_pid()
          GROUP BY 1`,
      );
      for (const r of rows) waits.set(r.w, (waits.get(r.w) ?? 0) + r.n);
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  })();
  const t0 = performance.now();
  for (const c of children) c.send("go");
  while (counts.reduce((a, b) => a + b, 0) < jobs) await new Promise((resolve) => setTimeout(resolve, 5));
  const seconds = (performance.now() - t0) / 1000;
  sampling = false;
  await sampler;
  const reports = await Promise.all(
    children.map(
      (c) =>
        new Promise<ChildReport>((resolve) => {
          c.on("message", (m: { report?: ChildReport }) => m.report && resolve(m.report));
          c.send("stop");
        }),
    ),
  );
  const claims = reports.reduce((a, r) => a + r.claims, 0);
  return {
    rate: jobs / seconds,
    perProcess: reports.map((r) => r.jobs),
    jobsPerClaim: reports.reduce((a, r) => a + r.claimed, 0) / Math.max(1, claims),
    cpuUsPerJob: (1000 * reports.reduce((a, r) => a + r.cpuMs, 0)) / jobs,
    waits,
  };
}
