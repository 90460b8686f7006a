/**
 * At-least-once, made safe: a job can run twice (its worker was killed after
 * the side effect but before the outcome committed). Key the side effect by
 * the job id, and record the claim's fencing token (`ctx.job.lease`) with it,
 * so a re-run finds the work done.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/idempotent-effects.ts
 */
import pg from "pg";
import { defineJob, Skipq } from "skipq";

const charge = defineJob<{ order: string; cents: number }>("charge-card");
const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
const db = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await db.query(
  `CREATE TABLE IF NOT EXISTS ${skipq.schemaSql}.charges (job_id bigint PRIMARY KEY, lease bigint NOT NULL, cents int NOT NULL)`,
);

let effects = 0;
const worker = skipq.worker({ concurrency: 4, listen: false }).register(charge, async (payload, ctx) => {
  // ON CONFLICT DO NOTHING: the second run of the same job charges nothing.
  const { rowCount } = await db.query(
    `INSERT INTO ${skipq.schemaSql}.charges (job_id, lease, cents) VALUES ($1, $2, $3) ON CONFLICT (job_id) DO NOTHING`,
    [ctx.id, ctx.job.lease, payload.cents],
  );
  effects += rowCount ?? 0;
});

const { id } = await skipq.enqueue(charge, { order: "42", cents: 1999 });
await worker.runOnce();
// Simulate the crash the chaos suite causes for real (P2): the outcome never committed, so the job runs again.
await db.query(`UPDATE ${skipq.schemaSql}.jobs SET status = 'pending', attempts = 0 WHERE id = $1`, [id]);
await worker.runOnce();
await worker.stop();

const { rows } = await db.query(`SELECT count(*)::int AS n FROM ${skipq.schemaSql}.charges`);
await db.end();
await skipq.close();
console.log(`ran twice, charged ${rows[0].n} time(s), effects applied ${effects}`);
