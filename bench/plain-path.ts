/**
 * Before/after for jobs that use none of docs/jobs.md's features: the drain of
 * no-op jobs (bulk-enqueued, handlers returning nothing) by another build of
 * skipq (e.g. main's, built elsewhere) and by this one, alternating in the
 * same reps, each in a fresh schema, so the two rates compare figures taken
 * moments apart. Also this build's drain of jobs whose handlers return a small
 * result, to show what a result costs.
 *
 *   node --import tsx bench/plain-path.ts /tmp/skipq-main/dist/src/index.js [jobs,reps,concurrency]
 *
 * PostgreSQL: DATABASE_URL (required).
 */
import pg from "pg";
import * as current from "skipq";

type Lib = typeof current;

const [otherPath, sizeArg] = process.argv.slice(2);
const databaseUrl = process.env.DATABASE_URL;
if (!otherPath || !databaseUrl) {
  console.error(
    "usage: DATABASE_URL=… node --import tsx bench/plain-path.ts <other build's dist/src/index.js> [jobs,reps,concurrency]",
  );
  process.exit(2);
}
const other = (await import(otherPath)) as Lib;
const [jobs, reps, concurrency] = (sizeArg ?? "50000,5,10").split(",").map(Number) as [number, number, number];

interface Variant {
  label: string;
  lib: Lib;
  result: boolean;
}
const variants: Variant[] = [
  { label: `other build (${otherPath}), plain jobs`, lib: other, result: false },
  { label: "this build, plain jobs", lib: current, result: false },
  { label: "this build, handlers return { ok: true, n }", lib: current, result: true },
];

const admin = new pg.Pool({ connectionString: databaseUrl, max: 2 });

/**
 * Jobs per second of one drain of `jobs` no-op jobs, from worker start to the last outcome recorded, and of
 * their bulk enqueue (10,000 a call) before it.
 */
async function drain(v: Variant): Promise<{ drain: number; enqueue: number }> {
  const schema = `bench_plain_${Math.random().toString(36).slice(2, 8)}`;
  const skipq = new v.lib.Skipq({ connectionString: databaseUrl, schema, logger: v.lib.silentLogger });
  try {
    await skipq.migrate();
    const enqueueStarted = performance.now();
    for (let done = 0; done < jobs; done += 10_000) {
      const n = Math.min(10_000, jobs - done);
      await skipq.enqueueMany(
        Array.from({ length: n }, (_, i) => ({ job: "noop", payload: { i: done + i } })),
        { returning: false },
      );
    }
    const enqueue = jobs / ((performance.now() - enqueueStarted) / 1000);
    await admin.query(`VACUUM ANALYZE "${schema}".jobs`);
    const worker = skipq.worker({ concurrency, pollInterval: 50, maintenance: false, presence: false });
    worker.register("noop", v.result ? (payload) => ({ ok: true, n: (payload as { i: number }).i }) : () => undefined);
    const started = performance.now();
    await worker.start();
    while (worker.stats.completed < jobs) await new Promise((r) => setTimeout(r, 2));
    const seconds = (performance.now() - started) / 1000;
    await worker.stop();
    return { drain: jobs / seconds, enqueue };
  } finally {
    await skipq.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

const rates = new Map<string, number[]>(variants.map((v) => [v.label, []]));
const enqueues = new Map<string, number[]>(variants.map((v) => [v.label, []]));
for (let rep = 0; rep < reps; rep++) {
  // Alternate the order, so neither build always runs on a warmer cache.
  const order = rep % 2 === 0 ? variants : [...variants].reverse();
  for (const v of order) {
    const { drain: rate, enqueue } = await drain(v);
    rates.get(v.label)?.push(rate);
    enqueues.get(v.label)?.push(enqueue);
    console.log(`rep ${rep + 1}: ${v.label}: ${Math.round(rate)} jobs/s (enqueue ${Math.round(enqueue)} jobs/s)`);
  }
}
await admin.end();

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};
const base = median(rates.get(variants[0]?.label as string) ?? []);
const enqueueBase = median(enqueues.get(variants[0]?.label as string) ?? []);
console.log(`\n${jobs} no-op jobs, concurrency ${concurrency}, ${reps} reps (median; min–max)\n`);
console.log("| variant | drain jobs/s | vs other build | bulk enqueue jobs/s | vs other build |");
console.log("| --- | --- | --- | --- | --- |");
for (const v of variants) {
  const xs = rates.get(v.label) ?? [];
  const m = median(xs);
  const es = enqueues.get(v.label) ?? [];
  const e = median(es);
  console.log(
    `| ${v.label} | ${Math.round(m)} (${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}) | ${Math.round((100 * m) / base)}% | ${Math.round(e)} (${Math.round(Math.min(...es))}–${Math.round(Math.max(...es))}) | ${Math.round((100 * e) / enqueueBase)}% |`,
  );
}
process.exit(0);
