/**
 * Quick start: define a typed job, enqueue it (alone and inside your own
 * transaction), run a worker, stop it gracefully.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/quickstart.ts
 */
import pg from "pg";
import { defineJob, Skipq } from "skipq";

const sendEmail = defineJob<{ to: string; subject: string }>("send-email", { maxAttempts: 5 });

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

// 1. Enqueue on its own.
await skipq.enqueue(sendEmail, { to: "ada@example.com", subject: "Welcome" });

// 2. Enqueue in the same transaction as your business write: both commit, or neither.
const db = new pg.Pool({ connectionString: process.env.DATABASE_URL });
const client = await db.connect();
try {
  await client.query("BEGIN");
  // … INSERT INTO orders … (your own write)
  await skipq.enqueueTx(
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

// 3. Work: handlers get the typed payload and a context with an AbortSignal.
let sent = 0;
const worker = skipq.worker({ concurrency: 10 }).register(sendEmail, async (payload, ctx) => {
  ctx.log.info({ to: payload.to }, "sending");
  sent++;
  if (sent === 2) void worker.stop(); // a real worker stops on SIGTERM: process.on("SIGTERM", () => worker.stop())
});
await worker.start();
await new Promise<void>((resolve) => worker.once("stopped", () => resolve()));
await skipq.close();
console.log(`sent ${sent} emails`);
