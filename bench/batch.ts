/**
 * Batch handlers against single-job handlers (docs/jobs.md, "Batch handlers"):
 * the drain of the same no-op jobs by `register` (one handler call per job) and
 * by `registerBatch` with batches of 100, alternating in the same reps, each in
 * a fresh schema, so the ratio compares figures taken moments apart. Prints a
 * table: jobs/s of each, and the ratio per rep and at the median. Then the same
 * with handlers that wait `--call-ms` (default 5) per call, as a call to an
 * email or model API does: what batch handlers are for.
 *
 *   npm run bench -- --batch [jobs,reps,concurrency,size] [--call-ms 5]   # bench/run.ts hands over to this file
 *   node --import tsx bench/batch.ts [jobs,reps,concurrency,size] [--call-ms 5]
 *
 * PostgreSQL: DATABASE_URL (required). Every schema it creates is dropped.
 */
import pg from "pg";
import { Skipq, silentLogger } from "../src/index.js";

export async function runBatchBench(argv: string[]): Promise<void> {
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) {
    console.error("usage: DATABASE_URL=… node --import tsx bench/batch.ts [jobs,reps,concurrency,size]");
    process.exit(2);
  }
  const [jobs, reps, concurrency, size] = (
    argv.find((a, i) => /^\d/.test(a) && argv[i - 1] !== "--call-ms") ?? "20000,3,10,100"
  )
    .split(",")
    .map(Number) as [number, number, number, number];
  const admin = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  const callFlag = argv.indexOf("--call-ms");
  const callMs = callFlag >= 0 ? Number(argv[callFlag + 1]) : 5;

  /**
   * One drain of `jobs` no-op jobs, from worker start to the last outcome recorded: jobs per second, and this
   * process's CPU per job (µs) — the worker's own cost, apart from the database's.
   */
  async function drain(batch: boolean, perCallMs = 0): Promise<Drain> {
    const schema = `bench_batch_${Math.random().toString(36).slice(2, 8)}`;
    const skipq = new Skipq({ connectionString: databaseUrl, schema, logger: silentLogger });
    try {
      await skipq.migrate();
      for (let done = 0; done < jobs; done += 10_000) {
        const n = Math.min(10_000, jobs - done);
        await skipq.enqueueMany(
          Array.from({ length: n }, (_, i) => ({ job: "noop", payload: { i: done + i } })),
          { returning: false },
        );
      }
      await admin.query(`VACUUM ANALYZE "${schema}".jobs`);
      const worker = skipq.worker({ concurrency, pollInterval: 50, maintenance: false, presence: false });
      // perCallMs: each handler call waits that long (one API round trip), whatever number of jobs it holds.
      const call = perCallMs > 0 ? () => new Promise<void>((r) => setTimeout(r, perCallMs)) : () => undefined;
      if (batch) worker.registerBatch("noop", { size }, call);
      else worker.register("noop", call);
      const started = performance.now();
      const cpu = process.cpuUsage();
      await worker.start();
      while (worker.stats.completed < jobs) await new Promise((r) => setTimeout(r, 2));
      const seconds = (performance.now() - started) / 1000;
      const used = process.cpuUsage(cpu);
      await worker.stop();
      return { rate: jobs / seconds, cpuUs: (used.user + used.system) / jobs };
    } finally {
      await skipq.close();
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    }
  }

  interface Drain {
    rate: number;
    cpuUs: number;
  }
  async function compare(perCallMs: number): Promise<Array<{ single: Drain; batch: Drain }>> {
    const out: Array<{ single: Drain; batch: Drain }> = [];
    for (let rep = 0; rep < reps; rep++) {
      // Alternate which goes first, so neither always drains on a warmer cache.
      const first = rep % 2 === 0;
      const a = await drain(!first, perCallMs);
      const b = await drain(first, perCallMs);
      out.push(first ? { single: a, batch: b } : { single: b, batch: a });
    }
    return out;
  }
  const noop = await compare(0);
  const withCalls = callMs > 0 ? await compare(callMs) : [];
  await admin.end();
  const fmt = (n: number) => Math.round(n).toLocaleString("en-US");
  const median = (xs: number[]) => {
    const sorted = [...xs].sort((x, y) => x - y);
    return sorted[Math.floor(sorted.length / 2)] as number;
  };
  const table = (title: string, rows: Array<{ single: Drain; batch: Drain }>) => {
    console.log(`\n${title}\n`);
    console.log(
      "| rep | register (jobs/s) | registerBatch (jobs/s) | ratio | worker CPU/job, register (µs) | registerBatch (µs) | ratio |",
    );
    console.log("|---|---|---|---|---|---|---|");
    const line = (label: string, s: Drain, b: Drain) =>
      console.log(
        `| ${label} | ${fmt(s.rate)} | ${fmt(b.rate)} | ${(b.rate / s.rate).toFixed(2)}× | ${s.cpuUs.toFixed(1)} | ${b.cpuUs.toFixed(1)} | ${(s.cpuUs / b.cpuUs).toFixed(2)}× |`,
      );
    for (const [i, r] of rows.entries()) line(String(i + 1), r.single, r.batch);
    const med = (pick: (r: (typeof rows)[0]) => Drain, key: keyof Drain) => median(rows.map((r) => pick(r)[key]));
    line(
      "median",
      { rate: med((r) => r.single, "rate"), cpuUs: med((r) => r.single, "cpuUs") },
      { rate: med((r) => r.batch, "rate"), cpuUs: med((r) => r.batch, "cpuUs") },
    );
  };
  table(`no-op drain of ${fmt(jobs)} jobs, concurrency ${concurrency}, batches of ${size}`, noop);
  if (withCalls.length > 0)
    table(
      `the same, each handler call waiting ${callMs} ms (one API call for one job, or for a batch of ${size})`,
      withCalls,
    );
}

if (import.meta.url === `file://${process.argv[1]}`) await runBatchBench(process.argv.slice(2));
