/**
 * Results, waiting and progress (docs/jobs.md): a handler returns its result
 * and reports progress; the caller waits for the job with enqueueAndWait, or
 * for a job enqueued earlier with waitFor, and reads it back with Admin.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/job-results.ts
 */
import { Admin, defineJob, Skipq, WaitTimeoutError } from "skipq";

const resize = defineJob<{ url: string; sizes: number[] }>("resize-image");

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

const worker = skipq.worker({ progressInterval: "200ms" }).register(resize, async (payload, ctx) => {
  const thumbnails: string[] = [];
  for (const [i, size] of payload.sizes.entries()) {
    thumbnails.push(`${payload.url}@${size}.webp`);
    await ctx.progress({ done: i + 1, total: payload.sizes.length }); // coalesced: call it as often as you like
  }
  return { thumbnails }; // stored as the job's result (plain JSON, at most maxResultBytes)
});
worker.on("progress", (job, value) => {
  if ((value as { done: number }).done === 1) console.log(`job ${job.id} started reporting progress`);
});
await worker.start();

// 1. Enqueue and wait for the outcome: { status, result, error }.
const outcome = await skipq.enqueueAndWait(resize, { url: "cat.png", sizes: [64, 256] }, { timeout: "30s" });
console.log(`enqueueAndWait: ${outcome.status}, ${JSON.stringify(outcome.result)}`);

// 2. Wait for a job by id, e.g. in another request or process; a job that already finished resolves at once.
const { id } = await skipq.enqueue(resize, { url: "dog.png", sizes: [32] });
const later = await skipq.waitFor<{ thumbnails: string[] }>(id, { timeout: "30s" });
console.log(`waitFor: ${later.status}, ${later.result?.thumbnails.join(", ")}`);
const again = await skipq.waitFor(id, { timeout: "1s" });
console.log(`waitFor a finished job: ${again.status}`);

// 3. A job nobody runs: the wait times out with a typed error (the job itself is untouched).
const { id: orphan } = await skipq.enqueue("nobody-handles-this", {}, { queue: "elsewhere" });
try {
  await skipq.waitFor(orphan, { timeout: "300ms" });
} catch (error) {
  if (error instanceof WaitTimeoutError) console.log(`timed out: ${error.code}, job still ${error.lastStatus}`);
}

// 4. Result and last progress are stored with the job (also: `skipq job <id>`, the dashboard's job page).
const job = await new Admin(skipq).getJob(id);
console.log(`getJob: result ${JSON.stringify(job?.result)}, progress ${JSON.stringify(job?.progress)}`);

await worker.stop();
await skipq.close();
