import { expect, test } from "vitest";
import { defineJob } from "../src/index.js";
import { statusCounts, testQueue, until } from "./helpers.js";

test("a job enqueued is run once and completed", async () => {
  const t = await testQueue("smoke");
  const hello = defineJob<{ name: string }>("hello");
  const seen: string[] = [];
  const worker = t.skipq.worker({ concurrency: 5 }).register(hello, async (payload) => {
    seen.push(payload.name);
  });
  await worker.start();
  const { id, created } = await t.skipq.enqueue(hello, { name: "ada" });
  expect(created).toBe(true);
  await until("completed", async () => (await statusCounts(t)).completed === 1);
  expect(seen).toEqual(["ada"]);
  expect(id).toMatch(/^\d+$/);
  await worker.stop();
  await t.cleanup();
});
