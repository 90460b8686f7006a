/** Every example under examples/ runs against the real database and does what its docs say. */
import { spawn } from "node:child_process";
import pg from "pg";
import { afterAll, expect, test } from "vitest";
import { DATABASE_URL, dropExampleSchemas, runExample, schemaName } from "../helpers.js";
import { until } from "../until.js";

afterAll(dropExampleSchemas);

test("examples/quickstart.ts enqueues two jobs and its worker sends both", async () => {
  expect(await runExample("examples/quickstart.ts")).toContain("sent 2 emails");
});

test("examples/quickstart.ts run again on the same schema ends, sending only the email whose idempotency key is new", async () => {
  const env = { SKIPQ_SCHEMA: schemaName("quickstart_again") };
  expect(await runExample("examples/quickstart.ts", env)).toContain("sent 2 emails");
  expect(await runExample("examples/quickstart.ts", env)).toMatch(/^sent 1 email$/m);
});

test("examples/worker.ts (the README's worker) exits 0 within 5 s of SIGTERM", async () => {
  const schema = schemaName("worker_sigterm");
  const child = spawn(process.execPath, ["--import", "tsx", "examples/worker.ts"], {
    env: { ...process.env, SKIPQ_SCHEMA: schema },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
  try {
    let out = "";
    child.stdout.on("data", (chunk) => {
      out += chunk;
    });
    await until("the worker to say it is ready", () => out.includes("worker ready"), 30_000);
    child.kill("SIGTERM");
    const late = new Promise((resolve) => setTimeout(() => resolve("still running 5 s after SIGTERM"), 5_000).unref());
    expect(await Promise.race([exited, late])).toBe(0);
  } finally {
    child.kill("SIGKILL");
    await exited;
    const db = new pg.Client({ connectionString: DATABASE_URL });
    await db.connect();
    await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await db.end();
  }
});

test("examples/dashboard.ts mounts the dashboard: 401 without the token, the queue listed with it", async () => {
  const out = await runExample("examples/dashboard.ts", {
    EXAMPLE_EXIT: "1",
    PORT: "0",
    SKIPQ_DASHBOARD_TOKEN: "example-token-0123456789",
  });
  expect(out).toContain("without credentials: 401; with the token: 200");
  expect(out).toContain("the default queue is listed");
});

test("examples/fleet.ts runs a worker whose own connections carry the partition bounds", async () => {
  const out = await runExample("examples/fleet.ts");
  expect(out).toContain(
    "worker session: idle_in_transaction_session_timeout=30000 statement_timeout=30000 tcp_user_timeout=5000",
  );
  expect(out).toContain("ran 3 jobs");
});

test("examples/dashboard-live.ts sees a count change live, a viewer refused an action, and the explorer's payload filter", async () => {
  const out = await runExample("examples/dashboard-live.ts");
  expect(out).toContain("live: billing shows 1 pending");
  expect(out).toContain("viewer pausing a queue: 403");
  expect(out).toContain("jobs with customer.id 42: 1");
});

test("examples/metrics.ts serves skipq_* metrics counting its three completed jobs", async () => {
  expect(await runExample("examples/metrics.ts")).toMatch(
    /skipq_jobs_completed_total\{queue="default",kind="resize-image"\} 3/,
  );
});

test("examples/tracing.ts shows the execution span linked to the enqueue span", async () => {
  const out = await runExample("examples/tracing.ts");
  expect(out).toContain("handler sees traceparent set");
  expect(out).toContain("skipq.enqueue, skipq.claim, skipq.execute");
  expect(out).toContain("execution links to the enqueue span: true");
});
test("examples/idempotent-effects.ts runs a job twice and its keyed side effect happens once", async () => {
  expect(await runExample("examples/idempotent-effects.ts")).toContain(
    "ran twice, charged 1 time(s), effects applied 1",
  );
});

test("examples/scheduling.ts enqueues each cron tick once, cancels a running job, and prunes", async () => {
  const out = await runExample("examples/scheduling.ts");
  expect(out).toMatch(/cron: (\d+) ticks, \1 distinct/);
  expect(out).toContain("cancel: job cancelled, handler outcome cancelled");
  expect(out).toContain("retention: 0 partitions dropped, 0 keys released");
});

test("examples/flow-control.ts keeps each customer within its limit and groups dead letters", async () => {
  const out = await runExample("examples/flow-control.ts");
  expect(out).toMatch(/limits: at most [12] syncs per customer at once/);
  expect(out).toContain('dead: 1 job(s) failed with "FailPermanently: page 13 does not exist"');
});

test("examples/batch.ts sends 7 queued messages in 2 batch calls, the bad number dead alone, each result stored", async () => {
  const out = await runExample("examples/batch.ts");
  expect(out).toContain("7 jobs in 2 handler calls (at most 5 each)");
  expect(out).toContain("completed 6, dead 1");
  expect(out).toContain('first result {"messageId":"msg-3312345"}');
});

test("examples/complete-tx.ts completes each job with its business row: a committed charge at once, a rolled-back one on its retry", async () => {
  const out = await runExample("examples/complete-tx.ts");
  expect(out).toContain('A-1: completed after 1 attempt(s), result {"receipt":"r-A-1"}, charge rows 1');
  expect(out).toContain('A-2: completed after 2 attempt(s), result {"receipt":"r-A-2"}, charge rows 1');
});

test("examples/fairness.ts shares the first starts by weight, whatever the flood", async () => {
  const out = await runExample("examples/fairness.ts");
  const m = /first 40 starts: acme (\d+), bigco (\d+), initech (\d+)/.exec(out);
  expect(m, out).not.toBeNull();
  const [acme, bigco, initech] = (m as RegExpExecArray).slice(1).map(Number) as [number, number, number];
  // Round robin, weight 2 for acme: 20 / 10 / 10 of 40, give or take the round a batch ended in.
  expect(acme).toBeGreaterThanOrEqual(18);
  expect(bigco).toBeLessThanOrEqual(12);
  expect(initech).toBeGreaterThanOrEqual(8);
  expect(out).toContain('limits: {"weights":{"acme":2}}');
});

test("examples/job-results.ts stores results and progress, waits for jobs and times out with a typed error", async () => {
  const out = await runExample("examples/job-results.ts");
  expect(out).toContain('enqueueAndWait: completed, {"thumbnails":["cat.png@64.webp","cat.png@256.webp"]}');
  expect(out).toContain("waitFor: completed, dog.png@32.webp");
  expect(out).toContain("waitFor a finished job: completed");
  expect(out).toContain("timed out: SKIPQ_WAIT_TIMEOUT, job still pending");
  expect(out).toContain('getJob: result {"thumbnails":["dog.png@32.webp"]}, progress {"done":1,"total":1}');
});

test("examples/unique-debounce.ts keeps one job per unique key and runs a debounced burst once with the last payload", async () => {
  const out = await runExample("examples/unique-debounce.ts");
  expect(out).toContain("unique: same job true (created false); other customer created true");
  expect(out).toContain("debounce: ran 1 time(s), with edits 6");
});

test("examples/middleware-logs.ts carries a tenant from enqueue to handler and keeps each attempt's log lines", async () => {
  const out = await runExample("examples/middleware-logs.ts");
  expect(out).toContain("outcome: completed");
  expect(out).toContain("audit: acme ran sync-account attempt 1; acme ran sync-account attempt 2");
  expect(out).toContain("attempt 1 failed: syncing, CRM unavailable");
  expect(out).toContain("attempt 2 completed: syncing, synced");
});

test("examples/workflows.ts runs a diamond, a fan-out with its fan-in, and a batch with callbacks", async () => {
  const out = await runExample("examples/workflows.ts");
  expect(out).toContain("publish: parents resize and thumbnail, widths 800, 120");
  expect(out).toContain("merge: 5 pages merged");
  expect(out).toContain("report: batch finished, 1 charge(s) failed");
  expect(out).not.toContain("thank-you: sent");
  expect(out).toMatch(/batch \d+: \{"completed":2,"dead":1\}, finished: true/);
});

test("examples/high-availability.ts reaches the primary through a host list and reads where a standby would be", async () => {
  const out = await runExample("examples/high-availability.ts");
  expect(out).toContain("ran 1 job on the primary");
  expect(out).toMatch(/reads from .+ \(a primary: no standby answered\)/);
});
