/**
 * Uniqueness windows (docs/jobs.md): at most one job per key and period; a
 * second enqueue returns the existing id with created: false; the key defaults
 * to a hash of kind, queue and payload; `states` chooses whether a finished
 * holder still counts; concurrent enqueuers of one key create exactly one job.
 */
import { expect, test } from "vitest";
import { defaultUniqueKey } from "../../src/enqueue/prepare.js";
import { Admin, Pruner, Scheduler, Skipq, silentLogger } from "../../src/index.js";
import { DATABASE_URL, finishJobs, useTestQueue } from "../helpers.js";

const t = useTestQueue("unique");

/** Ends the window of `key` in `queue` now (as if its period had passed). */
async function expire(queue: string, key: string): Promise<void> {
  await t.db.query(
    `UPDATE "${t.schema}".job_unique SET expires_at = now() - interval '1 second' WHERE queue = $1 AND key = $2`,
    [queue, key],
  );
}

test("a second enqueue within the period returns the existing job with created: false", async () => {
  const first = await t.skipq.enqueue("report", { day: 1 }, { queue: "u1", unique: { key: "report-1", period: "1h" } });
  const second = await t.skipq.enqueue(
    "report",
    { day: 2 },
    { queue: "u1", unique: { key: "report-1", period: "1h" } },
  );
  expect(first.created).toBe(true);
  expect(second).toEqual({ id: first.id, created: false });
  const { rows } = await t.db.query(`SELECT payload FROM "${t.schema}".jobs WHERE queue = 'u1'`);
  expect(rows).toEqual([{ payload: { day: 1 } }]);
  // The window is per queue.
  expect(
    (await t.skipq.enqueue("report", {}, { queue: "u1b", unique: { key: "report-1", period: "1h" } })).created,
  ).toBe(true);
});

test("after the period a new job takes the key", async () => {
  const first = await t.skipq.enqueue("sync", {}, { queue: "u2", unique: { key: "k", period: "1h" } });
  await expire("u2", "k");
  const second = await t.skipq.enqueue("sync", {}, { queue: "u2", unique: { key: "k", period: "1h" } });
  expect(second.created).toBe(true);
  expect(second.id).not.toBe(first.id);
  const { rows } = await t.db.query(`SELECT job_id FROM "${t.schema}".job_unique WHERE queue = 'u2' AND key = 'k'`);
  expect(rows[0].job_id).toBe(second.id);
});

test("the default key is a stable hash of kind, queue and payload (object key order does not matter)", async () => {
  const a = await t.skipq.enqueue("digest", { user: 7, lang: "en" }, { queue: "u3", unique: { period: "1h" } });
  const b = await t.skipq.enqueue("digest", { lang: "en", user: 7 }, { queue: "u3", unique: { period: "1h" } });
  const c = await t.skipq.enqueue("digest", { user: 8, lang: "en" }, { queue: "u3", unique: { period: "1h" } });
  const d = await t.skipq.enqueue("digest2", { user: 7, lang: "en" }, { queue: "u3", unique: { period: "1h" } });
  expect(b).toEqual({ id: a.id, created: false });
  expect(c.created).toBe(true);
  expect(d.created).toBe(true);
  expect(defaultUniqueKey("digest", "u3", { user: 7, lang: "en" })).toBe(
    defaultUniqueKey("digest", "u3", { lang: "en", user: 7 }),
  );
  const { rows } = await t.db.query(`SELECT key FROM "${t.schema}".job_unique WHERE job_id = $1`, [a.id]);
  expect(rows[0].key).toBe(defaultUniqueKey("digest", "u3", { user: 7, lang: "en" }));
});

test('states "all" (default) counts a finished holder for the whole period; "live" only while it is pending or running', async () => {
  const first = await t.skipq.enqueue("export", {}, { queue: "u4", unique: { key: "e", period: "1h" } });
  await finishJobs(t.db, t.schema, [first.id], "completed");
  const all = await t.skipq.enqueue("export", {}, { queue: "u4", unique: { key: "e", period: "1h" } });
  expect(all).toEqual({ id: first.id, created: false });
  const live = await t.skipq.enqueue("export", {}, { queue: "u4", unique: { key: "e", period: "1h", states: "live" } });
  expect(live.created).toBe(true);
  // The new holder is live: a "live" enqueue now finds it.
  const again = await t.skipq.enqueue(
    "export",
    {},
    { queue: "u4", unique: { key: "e", period: "1h", states: "live" } },
  );
  expect(again).toEqual({ id: live.id, created: false });
  // A cancelled holder has finished too.
  await new Admin(t.skipq).cancelJob(live.id);
  expect(
    (await t.skipq.enqueue("export", {}, { queue: "u4", unique: { key: "e", period: "1h", states: "live" } })).created,
  ).toBe(true);
});

test("concurrent enqueuers of one key, on separate connections, create exactly one job", async () => {
  const clients = Array.from(
    { length: 8 },
    () => new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger: silentLogger, poolSize: 4 }),
  );
  try {
    for (let round = 0; round < 5; round++) {
      const key = `race-${round}`;
      const results = await Promise.all(
        clients.flatMap((c) =>
          Array.from({ length: 4 }, (_, i) => c.enqueue("race", { i }, { queue: "u5", unique: { key, period: "1h" } })),
        ),
      );
      const created = results.filter((r) => r.created);
      expect(created).toHaveLength(1);
      for (const r of results) expect(r.id).toBe(created[0]?.id);
    }
    const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".jobs WHERE queue = 'u5'`);
    expect(rows[0].n).toBe(5);
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
});

test("inside a transaction: the window is taken with the job, and released if it rolls back", async () => {
  const client = await t.db.connect();
  try {
    await client.query("BEGIN");
    const inTx = await t.skipq.enqueueTx(client, "tx", {}, { queue: "u6", unique: { key: "t", period: "1h" } });
    expect(inTx.created).toBe(true);
    await client.query("ROLLBACK");
  } finally {
    client.release();
  }
  const after = await t.skipq.enqueue("tx", {}, { queue: "u6", unique: { key: "t", period: "1h" } });
  expect(after.created).toBe(true);
});

test("unique is validated before any SQL, and is distinct from idempotencyKey (not both)", async () => {
  const bad = [
    { unique: { period: "soon" } },
    { unique: { period: 0 } },
    { unique: { key: "", period: "1h" } },
    { unique: { key: "k", period: "1h", states: "finished" } },
    { unique: { key: "k", period: "1h" }, idempotencyKey: "k" },
    { unique: { key: "k", period: "1h" }, debounce: { delay: "1s" } },
  ];
  for (const options of bad)
    await expect(t.skipq.enqueue("x", {}, { queue: "u7", ...(options as object) })).rejects.toMatchObject({
      code: "SKIPQ_INVALID_ARGUMENT",
    });
  await expect(
    t.skipq.enqueueMany([{ job: "x", payload: {}, queue: "u7", unique: { period: "1h" } }]),
  ).rejects.toMatchObject({ code: "SKIPQ_INVALID_ARGUMENT" });
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".jobs WHERE queue = 'u7'`);
  expect(rows[0].n).toBe(0);
});

test("retention deletes windows that ended, and keeps open ones", async () => {
  await t.skipq.enqueue("r", {}, { queue: "u8", unique: { key: "old", period: "1h" } });
  await t.skipq.enqueue("r", {}, { queue: "u8", unique: { key: "open", period: "1h" } });
  await expire("u8", "old");
  await new Pruner(t.skipq).runOnce();
  const { rows } = await t.db.query(`SELECT key FROM "${t.schema}".job_unique WHERE queue = 'u8' ORDER BY key`);
  expect(rows).toEqual([{ key: "open" }]);
});

test("cron schedules refuse unique and debounce (each tick is enqueued once already)", () => {
  const scheduler = new Scheduler(t.skipq);
  expect(() => scheduler.add("* * * * *", "tick", {}, { unique: { period: "1h" } } as never)).toThrow(
    /no unique or debounce/,
  );
  expect(() => scheduler.add("* * * * *", "tock", {}, { debounce: { delay: "1s" } } as never)).toThrow(
    /no unique or debounce/,
  );
});
