/**
 * Workflows at scale: a fan-out of N children (all waiting on one root) and a
 * fan-in (waiting on all N), drained by one in-process worker, beside the same
 * N jobs enqueued plain. Prints how long each took, and the claim's cost
 * sampled while it ran: a claim of 10 from the workflow's queue (the worker's
 * statement, EXPLAIN ANALYZE BUFFERS, rolled back) — index pages read and its
 * time — with the waiting and pending counts at that moment.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test node --import tsx bench/workflow.ts [N=10000] [concurrency=50]
 *
 * Drops its schema.
 */
import pg from "pg";
import { Skipq, silentLogger } from "../src/index.js";

const url = process.env.DATABASE_URL;
if (!url) throw new Error("set DATABASE_URL (a PostgreSQL this script may create a schema in)");
const n = Number(process.argv[2] ?? 10_000);
const concurrency = Number(process.argv[3] ?? 50);
const schema = "bench_workflow";
const skipq = new Skipq({ connectionString: url, schema, logger: silentLogger });
const db = new pg.Pool({ connectionString: url, max: 4 });
await db.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
await skipq.migrate();
// A backlog in a queue nobody claims from, so the planner has real statistics (as in production).
await db.query(`INSERT INTO ${schema}.jobs (queue, kind) SELECT 'bulk', 'x' FROM generate_series(1, 20000)`);
await db.query(`ANALYZE ${schema}.jobs`);

interface Sample {
  phase: string;
  waiting: number;
  pending: number;
  pages: number;
  ms: number;
}
const samples: Sample[] = [];

/** One claim of 10 from `queue`, explained and rolled back: index pages of jobs_pending_claim and time. */
async function sample(queue: string, phase: string): Promise<void> {
  const client = await db.connect();
  try {
    const { rows: counts } = await client.query(
      `SELECT count(*) FILTER (WHERE status = 'waiting')::int AS waiting, count(*) FILTER (WHERE status = 'pending')::int AS pending
         FROM ${schema}.jobs WHERE queue = $1`,
      [queue],
    );
    await client.query("BEGIN");
    const { rows } = await client.query(
      `EXPLAIN (FORMAT JSON, ANALYZE, BUFFERS) ${skipq.store.sql.jobs.jobClaimBatch.text}`,
      [[queue], 10, "bench-probe", 30000],
    );
    await client.query("ROLLBACK");
    type Node = { "Index Name"?: string; "Shared Hit Blocks"?: number; "Shared Read Blocks"?: number; Plans?: Node[] };
    const all = (p: Node): Node[] => [p, ...(p.Plans ?? []).flatMap(all)];
    const top = rows[0]["QUERY PLAN"][0];
    const pages = all(top.Plan)
      .filter((p) => p["Index Name"] === "jobs_pending_claim")
      .reduce((s, p) => s + (p["Shared Hit Blocks"] ?? 0) + (p["Shared Read Blocks"] ?? 0), 0);
    samples.push({ phase, waiting: counts[0].waiting, pending: counts[0].pending, pages, ms: top["Execution Time"] });
  } finally {
    client.release();
  }
}

/** Drains `queue` with one worker until `done()`; samples the claim every 200 ms meanwhile. */
async function drain(queue: string, done: () => boolean, phase: string): Promise<number> {
  const worker = skipq
    .worker({ queues: [queue], concurrency, pollInterval: 100, maintenance: false, presence: false })
    .register("job", (payload) => (payload as { n?: number }).n ?? null)
    .register("fanin", (_, ctx) => Object.keys(ctx.parents).length);
  let finished = 0;
  worker.on("jobEnd", () => {
    finished++;
  });
  const started = performance.now();
  await worker.start();
  let next = 0;
  while (!done()) {
    if (finished >= next) {
      await sample(queue, `${phase}, ${Math.round((100 * finished) / n)} % done`);
      next += n / 5;
    }
    await new Promise((r) => setTimeout(r, 20));
  }
  const ms = performance.now() - started;
  await worker.stop();
  return ms;
}

try {
  // 1. Plain: N independent jobs.
  await sample("plain", "plain: before");
  let t0 = performance.now();
  await skipq.enqueueMany(Array.from({ length: n }, (_, i) => ({ job: "job", payload: { n: i }, queue: "plain" })));
  const plainEnqueueMs = performance.now() - t0;
  let plainDone = 0;
  const countPlain = async () => {
    const { rows } = await db.query(`SELECT count(*)::int AS n FROM ${schema}.job_history WHERE queue = 'plain'`);
    plainDone = rows[0].n;
  };
  const poll = setInterval(() => void countPlain(), 100);
  const plainMs = await drain("plain", () => plainDone >= n, "plain");
  clearInterval(poll);

  // 2. Workflow: root → N children → fan-in, in one call.
  await sample("flow", "workflow: before");
  t0 = performance.now();
  const results = await skipq.enqueueMany([
    { job: "job", payload: {}, queue: "flow" },
    ...Array.from({ length: n }, (_, i) => ({
      job: "job",
      payload: { n: i },
      queue: "flow",
      dependsOn: [{ item: 0 }],
    })),
    { job: "fanin", payload: {}, queue: "flow", dependsOn: Array.from({ length: n }, (_, i) => ({ item: i + 1 })) },
  ]);
  const flowEnqueueMs = performance.now() - t0;
  await db.query(`ANALYZE ${schema}.jobs`);
  await sample("flow", `workflow: ${n.toLocaleString("en")} waiting, root pending`);
  const fanin = results.at(-1)?.id;
  let faninDone = false;
  const checkFanin = async () => {
    const { rows } = await db.query(`SELECT 1 FROM ${schema}.job_history WHERE id = $1`, [fanin]);
    faninDone = rows.length > 0;
  };
  const poll2 = setInterval(() => void checkFanin(), 100);
  const flowMs = await drain("flow", () => faninDone, "workflow");
  clearInterval(poll2);
  await sample("flow", "workflow: after");

  const rate = (ms: number) => `${Math.round((n / ms) * 1000).toLocaleString("en")}/s`;
  console.log(`\n${n.toLocaleString("en")} jobs, one worker of concurrency ${concurrency}\n`);
  console.log("| run | enqueue | drain (to the last job) | jobs/s |");
  console.log("|---|---:|---:|---:|");
  console.log(`| ${n} plain jobs | ${plainEnqueueMs.toFixed(0)} ms | ${plainMs.toFixed(0)} ms | ${rate(plainMs)} |`);
  console.log(
    `| root → ${n} children → fan-in | ${flowEnqueueMs.toFixed(0)} ms | ${flowMs.toFixed(0)} ms | ${rate(flowMs)} |`,
  );
  console.log("\nA claim of 10 (jobs_pending_claim pages read, execution time) while each ran:\n");
  console.log("| moment | waiting | pending | index pages | claim ms |");
  console.log("|---|---:|---:|---:|---:|");
  for (const s of samples)
    console.log(`| ${s.phase} | ${s.waiting} | ${s.pending} | ${s.pages} | ${s.ms.toFixed(2)} |`);
} finally {
  await db.query(`DROP SCHEMA ${schema} CASCADE`);
  await db.end();
  await skipq.close();
}
