/**
 * Middleware and per-attempt logs (docs/jobs.md): an enqueue middleware puts
 * the current tenant in the job's headers, a worker middleware restores it
 * around the handler and audits each run; the handler's ctx.log lines are
 * kept per attempt and read back with the job.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/middleware-logs.ts
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { Admin, type AttemptLog, defineJob, Skipq } from "skipq";

const tenant = new AsyncLocalStorage<string>();
const sync = defineJob<{ account: number }>("sync-account");

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

// Around every enqueue (enqueue, enqueueTx, enqueueMany, enqueueManyTx): runs before validation.
skipq.useEnqueue((call, next) => {
  const current = tenant.getStore();
  if (current) call.options.headers = { ...call.options.headers, tenant: current };
  return next();
});

const audit: string[] = [];
const worker = skipq
  .worker({ backoff: { baseMs: 10, jitter: 0 } })
  // Around every handler, first added outermost: restore the tenant, then audit.
  .use((ctx, next) => tenant.run(ctx.job.headers.tenant ?? "none", next))
  .use(async (ctx, next) => {
    try {
      return await next();
    } finally {
      audit.push(`${tenant.getStore()} ran ${ctx.job.kind} attempt ${ctx.attempt}`);
    }
  })
  .register(sync, async (payload, ctx) => {
    ctx.log.info({ account: payload.account, tenant: tenant.getStore() }, "syncing");
    if (ctx.attempt === 1) {
      ctx.log.warn({ status: 503 }, "CRM unavailable");
      throw new Error("CRM answered 503");
    }
    ctx.log.info({ records: 42 }, "synced");
  });
await worker.start();

const { id } = await tenant.run("acme", () => skipq.enqueue(sync, { account: 7 }));
const outcome = await skipq.waitFor(id, { timeout: "30s" });
console.log(`outcome: ${outcome.status}`);
console.log(`audit: ${audit.join("; ")}`);

// Each attempt's lines, with its worker, times, outcome and error (also: `skipq job <id>`, the dashboard).
const job = await new Admin(skipq).getJob(id);
for (const log of (job?.attempt_logs ?? []) as AttemptLog[])
  console.log(`attempt ${log.attempt} ${log.outcome}: ${log.lines.map((l) => l.msg).join(", ")}`);

await worker.stop();
await skipq.close();
