/**
 * Before/after for recording every attempt (docs/jobs.md, "Attempts"): drains
 * of no-op jobs by another build of skipq (e.g. the one before attempts were
 * recorded, built elsewhere) and by this one, alternating in the same reps,
 * each in a fresh schema. Two workloads: plain successes (the hot path: claim
 * and completion, which this change leaves alone) and jobs whose first
 * attempt throws (retried at once: backoff 0), whose failed attempt this
 * build records in the settle statement it writes anyway.
 *
 *   node --import tsx bench/attempts.ts /tmp/skipq-base/dist/src/index.js [jobs,reps,concurrency]
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
    "usage: DATABASE_URL=… node --import tsx bench/attempts.ts <other build's dist/src/index.js> [jobs,reps,concurrency]",
  );
  process.exit(2);
}
const other = (await import(otherPath)) as Lib;
const [jobs, reps, concurrency] = (sizeArg ?? "20000,5,10").split(",").map(Number) as [number, number, number];

interface Variant {
  label: string;
  lib: Lib;
  failFirst: boolean;
}
const variants: Variant[] = [
  { label: "other build, plain successes", lib: other, failFirst: false },
  { label: "this build, plain successes", lib: current, failFirst: false },
  { label: "other build, first attempt fails", lib: other, failFirst: true },
  { label: "this build, first attempt fails", lib: current, failFirst: true },
];

const admin = new pg.Pool({ connectionString: databaseUrl, max: 2 });

/** Jobs per second of one drain of `jobs` jobs, from worker start to the last completion recorded. */
async function drain(v: Variant): Promise<number> {
  const schema = `bench_attempts_${Math.random().toString(36).slice(2, 8)}`;
  const skipq = new v.lib.Skipq({ connectionString: databaseUrl, schema, logger: v.lib.silentLogger });
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
    const worker = skipq.worker({
      concurrency,
      pollInterval: 50,
      maintenance: false,
      presence: false,
      backoff: { baseMs: 0, maxMs: 0, jitter: 0 },
    });
    worker.register("noop", (_payload, ctx) => {
      if (v.failFirst && ctx.attempt === 1) throw new Error("first attempt fails");
    });
    const started = performance.now();
    await worker.start();
    while (worker.stats.completed < jobs) await new Promise((r) => setTimeout(r, 2));
    const seconds = (performance.now() - started) / 1000;
    await worker.stop();
    return jobs / seconds;
  } finally {
    await skipq.close();
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
}

const rates = new Map<string, number[]>(variants.map((v) => [v.label, []]));
for (let rep = 0; rep < reps; rep++) {
  // Alternate the order, so neither build always runs on a warmer cache.
  const order = rep % 2 === 0 ? variants : [...variants].reverse();
  for (const v of order) {
    const rate = await drain(v);
    rates.get(v.label)?.push(rate);
    console.log(`rep ${rep + 1}: ${v.label}: ${Math.round(rate)} jobs/s`);
  }
}
await admin.end();

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] as number;
};
console.log(`\n${jobs} jobs, concurrency ${concurrency}, ${reps} reps (median; min–max)\n`);
console.log("| variant | jobs/s | vs other build, same workload |");
console.log("| --- | --- | --- |");
for (const [i, v] of variants.entries()) {
  const xs = rates.get(v.label) ?? [];
  const m = median(xs);
  const base = median(rates.get(variants[i - (i % 2)]?.label as string) ?? []);
  console.log(
    `| ${v.label} | ${Math.round(m)} (${Math.round(Math.min(...xs))}–${Math.round(Math.max(...xs))}) | ${Math.round((100 * m) / base)}% |`,
  );
}
process.exit(0);
