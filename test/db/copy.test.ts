/**
 * enqueueMany's fast path, { returning: false }: one COPY, all or nothing,
 * every field stored as the regular path stores it (payload bytes that COPY
 * must escape included), delays on the database clock, and no idempotency keys.
 */
import { expect, test } from "vitest";
import { PayloadNotJsonError, ValidationError } from "../../src/index.js";
import { clearJobs, useTestQueue } from "../helpers.js";

const t = useTestQueue("copy");

test("returning: false stores every field as enqueueMany does, escapes included, and returns the count", async () => {
  await clearJobs(t.db, t.schema);
  const tricky = {
    text: "tab\there\nnew line \\ backslash \r carriage",
    unicode: "naïve – ☃ 𝄞",
    nested: { a: [1, null] },
  };
  const runAt = new Date(Date.now() + 3_600_000);
  const result = await t.skipq.enqueueMany(
    [
      {
        job: "copy",
        payload: tricky,
        queue: "q1",
        priority: 7,
        maxAttempts: 3,
        headers: { trace: "a\tb" },
        concurrencyKey: "tenant\\1",
      },
      { job: "copy", payload: { n: 2 }, delay: "1h" },
      { job: "copy", payload: { n: 3 }, runAt },
    ],
    { returning: false },
  );
  expect(result).toEqual({ count: 3 });
  const { rows } = await t.db.query(
    `SELECT queue, kind, payload, priority, max_attempts, headers, concurrency_key, status,
            round(EXTRACT(EPOCH FROM run_at - now())) AS run_in_s, run_at
       FROM "${t.schema}".jobs ORDER BY id`,
  );
  expect(rows[0]).toMatchObject({
    queue: "q1",
    kind: "copy",
    payload: tricky,
    priority: 7,
    max_attempts: 3,
    headers: { trace: "a\tb" },
    concurrency_key: "tenant\\1",
    status: "pending",
  });
  expect(Number(rows[1].run_in_s)).toBeGreaterThanOrEqual(3595);
  expect(Number(rows[1].run_in_s)).toBeLessThanOrEqual(3600);
  expect((rows[2].run_at as Date).getTime()).toBe(runAt.getTime());
});

test("returning: false copies 20,000 jobs in one transaction, and a worker runs them", async () => {
  await clearJobs(t.db, t.schema);
  const { count } = await t.skipq.enqueueMany(
    Array.from({ length: 20_000 }, (_, i) => ({ job: "bulk", payload: { i } })),
    { returning: false },
  );
  expect(count).toBe(20_000);
  let ran = 0;
  const w = t.skipq.worker({ maintenance: false, listen: false }).register("bulk", () => void ran++);
  while ((await w.runOnce()) > 0);
  expect(ran).toBe(20_000);
  await w.stop();
});

test("returning: false refuses idempotency keys and writes nothing", async () => {
  await clearJobs(t.db, t.schema);
  await expect(
    t.skipq.enqueueMany(
      [
        { job: "k", payload: {} },
        { job: "k", payload: {}, idempotencyKey: "a" },
      ],
      { returning: false },
    ),
  ).rejects.toBeInstanceOf(ValidationError);
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs`);
  expect(rows[0].n).toBe(0);
});

test("returning: false with a bad item deep in the call (found while the copy streams) writes nothing, and the pool stays usable", async () => {
  await clearJobs(t.db, t.schema);
  const items: Array<{ job: string; payload: unknown }> = Array.from({ length: 30_000 }, (_, i) => ({
    job: "bulk",
    payload: { i },
  }));
  items[25_000] = { job: "bulk", payload: { bad: Number.NaN } };
  await expect(t.skipq.enqueueMany(items, { returning: false })).rejects.toBeInstanceOf(PayloadNotJsonError);
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs`);
  expect(rows[0].n).toBe(0);
  // Every pool connection still works: the aborted COPY left none mid-protocol.
  const again = await t.skipq.enqueueMany(items.slice(0, 100), { returning: false });
  expect(again).toEqual({ count: 100 });
  await expect(Promise.all(Array.from({ length: 10 }, () => t.skipq.enqueue("bulk", {})))).resolves.toHaveLength(10);
});
