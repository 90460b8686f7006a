/**
 * A worker process as you deploy it: it runs until its process manager sends SIGTERM (or you press
 * Ctrl-C), then stops claiming, lets running jobs finish and exits.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/worker.ts
 */
import { defineJob, Skipq } from "skipq";

const sendEmail = defineJob<{ to: string; subject: string }>("send-email", { maxAttempts: 5 });

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

const worker = skipq.worker({ concurrency: 10 }).register(sendEmail, async (payload, ctx) => {
  ctx.log.info({ to: payload.to }, "sending");
});
await worker.start();
// Stop claiming and let running jobs finish (a second signal stops them at once), then close skipq's
// pool: its idle connections would otherwise keep the process alive for another 10 s.
const shutdown = async () => {
  await worker.stop();
  await skipq.close();
};
process.on("SIGTERM", () => void shutdown());
process.on("SIGINT", () => void shutdown());
console.log("worker ready: send SIGTERM to stop it");
