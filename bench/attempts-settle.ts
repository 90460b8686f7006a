/**
 * The settle statement alone, before and after it records attempts: batches of
 * `batch` claimed jobs failed (retry) by another build's jobSettleMany (e.g.
 * the one before attempts were recorded) and by this build's with an entry
 * per job (as the worker writes it: ~300 bytes, error included), alternating,
 * in one schema, each a prepared statement as the worker's are. Prints the
 * statement's median and p90 round trip per batch.
 *
 *   node --import tsx bench/attempts-settle.ts /tmp/skipq-base/dist/src/index.js [batch,reps]
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
    "usage: DATABASE_URL=… node --import tsx bench/attempts-settle.ts <other build's index.js> [batch,reps]",
  );
  process.exit(2);
}
const other = (await import(otherPath)) as Lib;
const [batch, reps] = (sizeArg ?? "100,200").split(",").map(Number) as [number, number];
const schema = `bench_settle_${Math.random().toString(36).slice(2, 8)}`;
const skipq = new current.Skipq({ connectionString: databaseUrl, schema, logger: current.silentLogger });
const old = new other.Skipq({ connectionString: databaseUrl, schema, logger: other.silentLogger });
const db = new pg.Client({ connectionString: databaseUrl });
await db.connect();
const error = `Error: upstream answered 503\n    at handler (file:///app/tasks.js:12:11)\n    at run (file:///app/node_modules/skipq/dist/src/worker/executor.js:99:17)`;
try {
  await skipq.migrate();
  const settleNew = skipq.store.sql.jobs.jobSettleMany.text;
  const settleOld = old.store.sql.jobs.jobSettleMany.text;
  const times: Record<"old" | "new", number[]> = { old: [], new: [] };
  for (let rep = 0; rep < reps; rep++) {
    for (const which of rep % 2 === 0 ? (["old", "new"] as const) : (["new", "old"] as const)) {
      await skipq.enqueueMany(
        Array.from({ length: batch }, (_, i) => ({ job: "noop", payload: { i }, queue: which })),
        { returning: false },
      );
      const { rows } = await db.query(skipq.store.sql.jobs.jobClaimBatch.text, [[which], batch, "w", 60_000]);
      const ids = rows.map((r) => r.id);
      const leases = rows.map((r) => r.lease);
      if (ids.length !== batch) throw new Error(`claimed ${ids.length} of ${batch} jobs`);
      const values: unknown[] = [
        ids,
        leases,
        ids.map(() => "retry"),
        ids.map(() => error),
        ids.map(() => 0),
        ids.map(() => "fp"),
      ];
      if (which === "new")
        values.push(
          ids.map((_, i) =>
            JSON.stringify({
              attempt: 1,
              worker: "vm:1234:abcdef",
              startedAt: new Date().toISOString(),
              endedAt: new Date().toISOString(),
              outcome: "failed",
              error,
              lines: [],
              dropped: 0,
              i,
            }),
          ),
        );
      const started = performance.now();
      // Named (prepared) as the worker's statements are: planned once, not per batch.
      const settled = await db.query({
        name: `settle_${which}`,
        text: which === "new" ? settleNew : settleOld,
        values,
      });
      times[which].push(performance.now() - started);
      if (settled.rowCount !== batch) throw new Error(`settled ${settled.rowCount} of ${batch} jobs`);
      await db.query(`DELETE FROM "${schema}".jobs`);
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)] as number;
  const p90 = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length * 0.9)] as number;
  console.log(`jobSettleMany, ${batch} retries per batch, ${reps} batches each (round trip, ms)`);
  console.log("| statement | median | p90 |");
  console.log("| --- | --- | --- |");
  for (const k of ["old", "new"] as const)
    console.log(
      `| ${k === "old" ? "other build (no entry)" : "this build (an entry per job)"} | ${median(times[k]).toFixed(2)} | ${p90(times[k]).toFixed(2)} |`,
    );
} finally {
  await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await db.end();
  await skipq.close();
  await old.close();
}
process.exit(0);
