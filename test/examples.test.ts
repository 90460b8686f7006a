/** Every example under examples/ runs against the real database and does what its docs say. */
import { afterAll, expect, test } from "vitest";
import { dropExampleSchemas, runExample } from "./helpers.js";

afterAll(dropExampleSchemas);

test("examples/quickstart.ts enqueues two jobs and its worker sends both", async () => {
  expect(await runExample("examples/quickstart.ts")).toContain("sent 2 emails");
});

test("examples/idempotent-effects.ts runs a job twice and its keyed side effect happens once", async () => {
  expect(await runExample("examples/idempotent-effects.ts")).toContain(
    "ran twice, charged 1 time(s), effects applied 1",
  );
});
