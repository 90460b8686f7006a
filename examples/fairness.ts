/**
 * Fair claims: one tenant's flood does not starve the others. The "reports"
 * queue claims round robin across concurrency keys, "acme" weighted twice;
 * the first 40 jobs started are counted per tenant.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/fairness.ts
 */
import { Admin, defineJob, Skipq } from "skipq";

const report = defineJob<{ n: number }>("report", { queue: "reports" });
const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
const admin = new Admin(skipq);

// Round robin across tenants; acme gets 2 claims per round, every other tenant 1.
// Stacks with the other limits: here at most 4 reports running at once.
await admin.setQueueLimits("reports", { concurrency: 4, fairness: { weights: { acme: 2 } } });

// A flood from "bigco" first, then a few jobs from two other tenants.
await skipq.enqueueMany(
  Array.from({ length: 500 }, (_, n) => ({ job: report, payload: { n }, concurrencyKey: "bigco" })),
);
for (const tenant of ["acme", "initech"])
  await skipq.enqueueMany(
    Array.from({ length: 20 }, (_, n) => ({ job: report, payload: { n }, concurrencyKey: tenant })),
  );

const started: string[] = [];
const worker = skipq.worker({ queues: ["reports"], concurrency: 4 }).register(report, async (_payload, ctx) => {
  started.push(ctx.job.concurrencyKey ?? "none");
});
await worker.start();
while (started.length < 40) await new Promise((resolve) => setTimeout(resolve, 20));
await worker.stop();

const first = started.slice(0, 40);
const count = (tenant: string) => first.filter((t) => t === tenant).length;
// Per round: acme 2, bigco 1, initech 1 — so about 20 / 10 / 10 of the first 40.
console.log(`first 40 starts: acme ${count("acme")}, bigco ${count("bigco")}, initech ${count("initech")}`);
console.log(`limits: ${JSON.stringify((await admin.getQueueLimits("reports"))[0]?.fairness)}`);
await skipq.close();
