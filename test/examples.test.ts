/** Every example under examples/ runs against the real database and does what its docs say. */
import { afterAll, expect, test } from "vitest";
import { dropExampleSchemas, runExample } from "./helpers.js";

afterAll(dropExampleSchemas);

test("examples/quickstart.ts enqueues two jobs and its worker sends both", async () => {
  expect(await runExample("examples/quickstart.ts")).toContain("sent 2 emails");
});
