/**
 * Flow control: per-customer concurrency and rate limits enforced across all
 * workers, pausing a customer on a provider's Retry-After, priority aging,
 * and the dead-letter tools.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/flow-control.ts
 */
import { Admin, defineJob, FailPermanently, RetryIn, Skipq } from "skipq";

const sync = defineJob<{ page: number }>("crm-sync", { queue: "crm" });
const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
const admin = new Admin(skipq);

// Limits live in the database: every worker of the "crm" queue obeys them.
// At most 2 syncs per customer at once, and at most 50 starts per second per customer.
await admin.setQueueLimits("crm", { keyConcurrency: 2, rate: { limit: 50, window: "1s", perKey: true } });

const running = new Map<string, number>();
let mostAtOnce = 0;
let throttled = false;
const worker = skipq
  .worker({ queues: ["crm"], concurrency: 10, pollInterval: 100, priorityAging: "1m" })
  .register(sync, async (payload, ctx) => {
    const customer = ctx.job.concurrencyKey ?? "none";
    if (payload.page === 13) throw new FailPermanently("page 13 does not exist");
    if (customer === "globex" && !throttled) {
      // The provider answered 429 with Retry-After: 1. No worker starts a globex job for a second.
      throttled = true;
      await ctx.pauseKey("1s");
      throw new RetryIn(1000);
    }
    running.set(customer, (running.get(customer) ?? 0) + 1);
    mostAtOnce = Math.max(mostAtOnce, running.get(customer) ?? 0);
    await new Promise((resolve) => setTimeout(resolve, 20));
    running.set(customer, (running.get(customer) ?? 1) - 1);
  });
await worker.start();

const customers = ["acme", "globex", "initech"];
await skipq.enqueueMany(
  Array.from({ length: 30 }, (_, page) => ({
    job: sync,
    payload: { page },
    concurrencyKey: customers[page % 3] as string,
  })),
);
for (;;) {
  const [crm] = (await admin.stats()).filter((s) => s.queue === "crm");
  if (crm && crm.pending + crm.running === 0) break;
  await new Promise((resolve) => setTimeout(resolve, 100));
}
console.log(`limits: at most ${mostAtOnce} syncs per customer at once`);

// Dead letters, grouped by error fingerprint; retry a whole group once the cause is fixed.
const [group] = await admin.deadByFingerprint({ queue: "crm" });
console.log(`dead: ${group?.count} job(s) failed with "${group?.example_error?.split("\n")[0]}"`);
if (group?.fingerprint) await admin.retryDeadByFingerprint(group.fingerprint, "crm");

await worker.stop();
await skipq.close();
