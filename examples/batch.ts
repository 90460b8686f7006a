/**
 * Batch handlers (docs/jobs.md, "Batch handlers"): a worker hands up to 5
 * queued "send-sms" jobs at a time to one handler call, which sends them with
 * one provider request; per-item outcomes fail the one bad number alone
 * (permanently) and store each sent message's id as its job's result.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/batch.ts
 */
import { Admin, defineJob, FailPermanently, Skipq } from "skipq";

const sms = defineJob<{ to: string; text: string }, { messageId: string }>("send-sms");

const schema = process.env.SKIPQ_SCHEMA ?? "skipq";
const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema });
await skipq.migrate();

/** A provider's bulk endpoint: one request for many messages, one status per message, in order. */
async function sendBulk(messages: Array<{ to: string; text: string }>) {
  return messages.map((m) => (m.to.startsWith("+") ? { ok: true, id: `msg-${m.to.slice(1)}` } : { ok: false, id: "" }));
}

const calls: number[] = [];
const worker = skipq.worker({ pollInterval: 50 }).registerBatch(sms, { size: 5, waitMs: 100 }, async (jobs) => {
  calls.push(jobs.length);
  const statuses = await sendBulk(jobs.map((job) => job.payload));
  // One entry per job, in order: its result, or an Error that fails that job alone.
  return statuses.map((status, i) =>
    status.ok ? { messageId: status.id } : new FailPermanently(`bad number ${jobs[i]?.payload.to}`),
  );
});

const numbers = ["+3312345", "+3312346", "nope", "+3312347", "+3312348", "+3312349", "+3312350"];
const enqueued = await skipq.enqueueMany(numbers.map((to) => ({ job: sms, payload: { to, text: "hello" } })));
const ids = enqueued.map((j) => j.id);
await worker.start();
const outcomes = await Promise.all(ids.map((id) => skipq.waitFor(id, { timeout: "30s" }).catch(() => undefined)));
await worker.stop();
const admin = new Admin(skipq);
const statuses = await Promise.all(ids.map(async (id) => (await admin.getJob(id))?.status));
console.log(`${ids.length} jobs in ${calls.length} handler calls (at most 5 each)`);
console.log(
  `completed ${statuses.filter((s) => s === "completed").length}, dead ${statuses.filter((s) => s === "dead").length}`,
);
console.log(`first result ${JSON.stringify(outcomes[0]?.result)}`);
await skipq.close();
