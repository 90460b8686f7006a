/** Every example under examples/ runs against the real database and does what its docs say. */
import { afterAll, expect, test } from "vitest";
import { dropExampleSchemas, runExample } from "../helpers.js";

afterAll(dropExampleSchemas);

test("examples/quickstart.ts enqueues two jobs and its worker sends both", async () => {
  expect(await runExample("examples/quickstart.ts")).toContain("sent 2 emails");
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

test("examples/workflows.ts runs a diamond, a fan-out with its fan-in, and a batch with callbacks", async () => {
  const out = await runExample("examples/workflows.ts");
  expect(out).toContain("publish: parents resize and thumbnail, widths 800, 120");
  expect(out).toContain("merge: 5 pages merged");
  expect(out).toContain("report: batch finished, 1 charge(s) failed");
  expect(out).not.toContain("thank-you: sent");
  expect(out).toMatch(/batch \d+: \{"completed":2,"dead":1\}, finished: true/);
});
