/**
 * Quick start: define a typed job, enqueue it (alone and inside your own
 * transaction), run a worker, stop it gracefully.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/quickstart.ts
 */
import pg from "pg";
import { defineJob, type EnqueueResult, Skipq } from "skipq";

const sendEmail = defineJob<{ to: string; subject: string }>("send-email", { maxAttempts: 5 });

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

// 1. Enqueue on its own.
const welcome = await skipq.enqueue(sendEmail, { to: "ada@example.com", subject: "Welcome" });

// 2. Enqueue in the same transaction as your business write: both commit, or neither.
const db = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const client = await db.connect();
let order: EnqueueResult;
try {
  await client.query("BEGIN");
  // … INSERT INTO orders … (your own write)
  order = await skipq.enqueueTx(
    client,
    sendEmail,
    { to: "bob@example.com", subject: "Order 42" },
    { idempotencyKey: "order-42" },
  );
  await client.query("COMMIT");
} finally {
  client.release();
  await db.end();
}
// Run this file again and order-42's key keeps a second email out: `created` is false and `id` is the
// job enqueued the first time.
if (!order.created) console.log(`order-42 was enqueued before (job ${order.id}): not sent twice`);

// 3. Work: handlers get the typed payload and a context with an AbortSignal.
let sent = 0;
const worker = skipq.worker({ concurrency: 10 }).register(sendEmail, async (payload, ctx) => {
  ctx.log.info({ to: payload.to }, "sending");
  sent++;
});
await worker.start();
// A real worker runs until SIGTERM (examples/worker.ts); this one stops once both jobs are finished
// (waitFor resolves at once for a job that finished on an earlier run).
await Promise.all([welcome.id, order.id].map((id) => skipq.waitFor(id)));
await worker.stop();
await skipq.close();
console.log(`sent ${sent} email${sent === 1 ? "" : "s"}`);
