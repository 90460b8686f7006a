/**
 * Scheduling: a cron job enqueued once per tick however many schedulers run,
 * cancelling a running job from anywhere, and retention.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/scheduling.ts
 */
import { once } from "node:events";
import { Admin, defineJob, Pruner, Scheduler, Skipq } from "skipq";

const report = defineJob<{ scope: string }>("usage-report");
const bigExport = defineJob<{ rows: number }>("big-export");

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

let exportStarted!: () => void;
const started = new Promise<void>((resolve) => {
  exportStarted = resolve;
});
const ticks: string[] = [];
const worker = skipq
  .worker({ concurrency: 4 })
  .register(report, async (_payload, ctx) => {
    ticks.push(ctx.job.headers["skipq-cron"] ?? "?"); // "usage-report@2026-…T…Z": which tick this is
  })
  .register(bigExport, async (_payload, ctx) => {
    exportStarted();
    // A real export checks ctx.signal between chunks; here we just wait for it.
    await new Promise((resolve) => ctx.signal.addEventListener("abort", resolve, { once: true }));
  });
await worker.start();

// 1. Cron. Six fields = seconds first; five = minute first ("0 * * * *" is hourly).
//    Run a Scheduler in as many processes as you like: each tick is enqueued once.
//    An invalid expression or time zone throws here, before anything runs.
const schedulers = [new Scheduler(skipq), new Scheduler(skipq)].map((s) =>
  s.add("* * * * * *", report, { scope: "all" }, { timezone: "Europe/Paris", backfill: 5 }),
);
await Promise.all(schedulers.map((s) => s.start()));
while (ticks.length < 2) await once(worker, "jobEnd");
await Promise.all(schedulers.map((s) => s.stop()));
console.log(`cron: ${ticks.length} ticks, ${new Set(ticks).size} distinct`);

// 2. Cancel a running job from any process: its worker is notified and the handler's signal aborts at once.
const admin = new Admin(skipq);
const { id } = await skipq.enqueue(bigExport, { rows: 1_000_000 });
const ended = new Promise<string>((resolve) =>
  worker.on("jobEnd", (job, outcome) => {
    if (job.id === id) resolve(outcome);
  }),
);
await started;
await admin.cancelJob(id);
console.log(`cancel: job ${(await admin.getJob(id))?.status}, handler outcome ${await ended}`);

// 3. Retention: every worker's maintainer applies it when it is the leader (options under
// `maintenance.retention`); here one pass by hand. Finished jobs live in history partitions that are
// dropped whole once past their age; keys stay taken for keyRetention after their job finished.
const pruner = new Pruner(skipq, { completedAfter: "7d", deadAfter: "30d", keyRetention: "2d" });
const pruned = await pruner.runOnce();
console.log(`retention: ${pruned.partitionsDropped.length} partitions dropped, ${pruned.keys} keys released`);

await worker.stop();
await skipq.close();
