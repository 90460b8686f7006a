/**
 * Completion inside the handler's transaction (docs/jobs.md): the handler
 * writes its business row and completes the job in one transaction with
 * ctx.completeTx, so the job is completed exactly when the row commits — and
 * a rolled-back transaction records nothing (the handler's own outcome then
 * applies: here, a retry).
 * Run: DATABASE_URL=postgres://… node --import tsx examples/complete-tx.ts
 */
import pg from "pg";
import { Admin, defineJob, Skipq } from "skipq";

const schema = process.env.SKIPQ_SCHEMA ?? "skipq";
const charge = defineJob<{ order: string; cents: number }>("charge-order");

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema });
await skipq.migrate();
const app = new pg.Pool({ connectionString: process.env.DATABASE_URL });
await app.query(`CREATE TABLE IF NOT EXISTS "${schema}".charges (job_id bigint PRIMARY KEY, cents int NOT NULL)`);

const worker = skipq.worker({ backoff: { baseMs: 50 } }).register(charge, async (payload, ctx) => {
  const client = await app.connect();
  try {
    await client.query("BEGIN");
    await client.query(`INSERT INTO "${schema}".charges (job_id, cents) VALUES ($1, $2)`, [ctx.id, payload.cents]);
    // Written in this transaction, fenced by the lease: LeaseLostError here means roll back.
    await ctx.completeTx(client, { receipt: `r-${payload.order}` });
    if (payload.cents < 0 && ctx.attempt === 1) throw new Error("refund needs approval"); // roll back, retry
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK");
    throw error; // the completion rolled back with it: the job is retried as usual
  } finally {
    client.release();
  }
});
await worker.start();

for (const [order, cents] of [
  ["A-1", 1200],
  ["A-2", -300],
] as const) {
  const { id } = await skipq.enqueue(charge, { order, cents });
  const outcome = await skipq.waitFor<{ receipt: string }>(id, { timeout: "30s" });
  const job = await new Admin(skipq).getJob(id);
  const { rows } = await app.query(`SELECT count(*)::int AS n FROM "${schema}".charges WHERE job_id = $1`, [id]);
  console.log(
    `${order}: ${outcome.status} after ${job?.attempts} attempt(s), result ${JSON.stringify(outcome.result)}, charge rows ${rows[0].n}`,
  );
}

await worker.stop();
await app.end();
await skipq.close();
