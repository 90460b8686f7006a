/**
 * The claim beside scheduled jobs: one claim of 10 (the worker's statement,
 * prepared, rolled back) from a queue of N jobs, most of them due tomorrow.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/scheduled.ts [N=1000000]
 *
 * Prints the median and p95 of 40 claims per case. Drops its schema.
 */
import pg from "pg";
import { Skipq } from "../src/index.js";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("set DATABASE_URL (a PostgreSQL this script may create a schema in)");
const n = Number(process.argv[2] ?? 1_000_000);
const schema = "bench_scheduled";
const cases: Record<string, string> = {
  "nothing due (all tomorrow, one priority)": `SELECT 'q', 'k', '{}'::jsonb, 0, now() + interval '1 day' FROM generate_series(1, ${n})`,
  "1,000 due at priority 0 under scheduled ones at priority 5": `SELECT 'q', 'k', '{}'::jsonb,
      CASE WHEN g <= 1000 THEN 0 ELSE 5 END,
      CASE WHEN g <= 1000 THEN now() - interval '1 s' ELSE now() + interval '1 day' END FROM generate_series(1, ${n}) g`,
  "all due, one priority (a plain backlog)": `SELECT 'q', 'k', '{}'::jsonb, 0, now() - interval '1 s' FROM generate_series(1, ${n})`,
};

const skipq = new Skipq({ connectionString: url, schema });
await skipq.migrate();
const text = skipq.store.sql.jobs.jobClaimBatch.text;
try {
  for (const [name, select] of Object.entries(cases)) {
    await skipq.pool.query(`TRUNCATE ${schema}.jobs CASCADE`);
    await skipq.pool.query(`INSERT INTO ${schema}.jobs (queue, kind, payload, priority, run_at) ${select}`);
    await skipq.pool.query(`VACUUM ANALYZE ${schema}.jobs`);
    // A fresh connection per case: a prepared statement's cached plan is not carried from one table to the next.
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    const times: number[] = [];
    for (let i = 0; i < 40; i++) {
      await client.query("BEGIN");
      const started = performance.now();
      await client.query({ name: "claim", text, values: [["q"], 10, "bench", 30_000] });
      times.push(performance.now() - started);
      await client.query("ROLLBACK");
    }
    await client.end();
    times.sort((a, b) => a - b);
    console.log(
      `${name.padEnd(60)} p50 ${(times[20] as number).toFixed(2)} ms  p95 ${(times[37] as number).toFixed(2)} ms`,
    );
  }
} finally {
  await skipq.pool.query(`DROP SCHEMA ${schema} CASCADE`);
  await skipq.close();
}
