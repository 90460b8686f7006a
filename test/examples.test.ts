/** Every example under examples/ runs against the real database and does what its docs say. */
import { afterAll, expect, test } from "vitest";
import { dropExampleSchemas, runExample } from "./helpers.js";

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
