/**
 * Cron: a tick is enqueued exactly once however many schedulers race for it,
 * missed ticks are backfilled up to the bound, time zones are honoured, and
 * invalid expressions are rejected before anything runs. Passes are driven
 * with an injected "now" (runOnce), so no test waits on wall-clock ticks
 * except the one that proves the real timer loop.
 */
import { expect, test } from "vitest";
import { Admin, Scheduler, SkipqError } from "../../src/index.js";
import { until, useTestQueue } from "../helpers.js";
import { startWorkerProcesses } from "../processes.js";

const t = useTestQueue("scheduler");

async function cronJobs(kind: string): Promise<Array<{ id: string; tick: string; key: string }>> {
  const { rows } = await t.db.query(
    `SELECT id, headers->>'skipq-cron' AS tick, idempotency_key AS key FROM "${t.schema}".all_jobs WHERE kind = $1 ORDER BY id`,
    [kind],
  );
  return rows;
}

test("each tick is enqueued exactly once with 5 scheduler processes racing", async () => {
  const base = Date.parse("2026-01-01T00:00:00Z");
  const nows = Array.from({ length: 31 }, (_, k) => new Date(base + k * 1000).toISOString());
  const procs = startWorkerProcesses(5, {
    SKIPQ_SCHEMA: t.schema,
    NO_WORKER: "1",
    CRON_JOBS: JSON.stringify([
      ["* * * * * *", "every-second", { backfill: 30 }],
      ["*/5 * * * * *", "every-five", { backfill: 30 }],
    ]),
    CRON_NOWS: nows.join(","),
  });
  await Promise.all(procs.map((p) => p.ready));
  for (const p of procs) p.send("cron");
  const done = (await Promise.all(
    procs.map((p) => p.waitFor((l) => (l as { done?: string }).done === "cron")),
  )) as Array<{ created: number }>;
  await Promise.all(procs.map((p) => p.stop()));
  expect(procs.flatMap((p) => p.lines.filter((l) => (l as { error?: string }).error))).toEqual([]);

  // Registered at the first "now"; every later second is one tick, once.
  const seconds = await cronJobs("every-second");
  expect(seconds.map((j) => j.tick)).toEqual(nows.slice(1).map((n) => `every-second@${n}`));
  // Each process reports the jobs it created: together, exactly one per tick.
  expect(done.reduce((sum, d) => sum + d.created, 0)).toBe(30 + 6);
  const fives = await cronJobs("every-five");
  expect(fives.map((j) => j.tick)).toEqual(
    nows
      .slice(1)
      .filter((_, k) => (k + 1) % 5 === 0)
      .map((n) => `every-five@${n}`),
  );
});

test("after downtime, the latest tick and at most `backfill` missed ones are enqueued, oldest first", async () => {
  const scheduler = new Scheduler(t.skipq).add("0 * * * *", "hourly", { report: true }, { backfill: 3 });
  await scheduler.runOnce({ now: new Date("2026-02-01T00:30:00Z") });
  const [result] = await scheduler.runOnce({ now: new Date("2026-02-01T10:05:00Z") });
  expect(result?.ticks.map((d) => d.toISOString())).toEqual([
    "2026-02-01T07:00:00.000Z",
    "2026-02-01T08:00:00.000Z",
    "2026-02-01T09:00:00.000Z",
    "2026-02-01T10:00:00.000Z",
  ]);
  expect((await cronJobs("hourly")).map((j) => j.key)).toEqual(
    result?.ticks.map((d) => `cron:hourly:${d.toISOString()}`),
  );
  // The same "now" again enqueues nothing.
  expect(await scheduler.runOnce({ now: new Date("2026-02-01T10:05:00Z") })).toEqual([]);
  // Operators see it (skipq cron list).
  const admin = new Admin(t.skipq);
  const listed = (await admin.cronSchedules()).find((s) => s.name === "hourly");
  expect(listed).toMatchObject({ expression: "0 * * * *", timezone: "UTC", kind: "hourly", queue: "default" });
  expect(listed?.lastTick.toISOString()).toBe("2026-02-01T10:00:00.000Z");
  expect(listed?.nextTick?.getUTCMinutes()).toBe(0);
  expect(await admin.removeCronSchedule("hourly")).toBe(true);
});

test("a schedule's expression is read in its time zone", async () => {
  const scheduler = new Scheduler(t.skipq).add("0 9 * * *", "morning", {}, { timezone: "America/New_York" });
  await scheduler.runOnce({ now: new Date("2026-01-15T12:00:00Z") });
  await scheduler.runOnce({ now: new Date("2026-01-15T14:00:30Z") }); // 09:00 EST = 14:00 UTC
  await scheduler.runOnce({ now: new Date("2026-07-15T13:00:30Z") }); // 09:00 EDT = 13:00 UTC
  expect((await cronJobs("morning")).map((j) => j.tick)).toEqual([
    "morning@2026-01-15T14:00:00.000Z",
    "morning@2026-07-15T13:00:00.000Z",
  ]);
});

test("invalid cron expressions, time zones and duplicate names are rejected by add()", () => {
  const scheduler = new Scheduler(t.skipq);
  const error = (fn: () => unknown) => {
    try {
      fn();
    } catch (e) {
      return e as SkipqError;
    }
    throw new Error("expected an error");
  };
  const bad = error(() => scheduler.add("61 * * * *", "x", {}));
  expect(bad).toBeInstanceOf(SkipqError);
  expect(bad.code).toBe("SKIPQ_INVALID_ARGUMENT");
  expect(bad.message).toMatch(/cron expression "61 \* \* \* \*" is invalid/);
  expect(error(() => scheduler.add("* * *", "x", {})).message).toMatch(/is invalid/);
  expect(error(() => scheduler.add("0 * * * *", "x", {}, { timezone: "Mars/Olympus" })).message).toMatch(
    /not a valid IANA time zone/,
  );
  scheduler.add("0 * * * *", "x", {});
  expect(error(() => scheduler.add("5 * * * *", "x", {})).message).toMatch(/already declared/);
  expect(error(() => scheduler.add("0 * * * *", "y", {}, { backfill: -1 })).code).toBe("SKIPQ_INVALID_ARGUMENT");
});

test("a started scheduler enqueues each second's tick on the database clock, once", async () => {
  const scheduler = new Scheduler(t.skipq).add("* * * * * *", "live", {});
  const twin = new Scheduler(t.skipq).add("* * * * * *", "live", {});
  await Promise.all([scheduler.start(), twin.start()]);
  await until("two ticks enqueued", async () => (await cronJobs("live")).length >= 2, 10_000);
  await Promise.all([scheduler.stop(), twin.stop()]);
  const ticks = (await cronJobs("live")).map((j) => Date.parse(j.tick.slice("live@".length)));
  expect(new Set(ticks).size).toBe(ticks.length);
  for (let i = 1; i < ticks.length; i++) expect((ticks[i] as number) - (ticks[i - 1] as number)).toBe(1000);
});

test("a cron pass's transaction may sit idle at most 5 s (less when the session says so): a scheduler cut off mid-pass frees its schedules' locks", async () => {
  const store = t.skipq.store;
  const client = await t.skipq.pool.connect();
  try {
    await client.query("BEGIN");
    await store.query(store.sql.cron.cronBound, [5000], client);
    expect((await client.query("SHOW idle_in_transaction_session_timeout")).rows[0]).toEqual({
      idle_in_transaction_session_timeout: "5s",
    });
    await client.query("COMMIT");
    // The bound is the transaction's own: the session keeps its setting (the client pool's 60 s).
    expect((await client.query("SHOW idle_in_transaction_session_timeout")).rows[0]).toEqual({
      idle_in_transaction_session_timeout: "1min",
    });
    await client.query("SET idle_in_transaction_session_timeout = '2s'");
    await client.query("BEGIN");
    await store.query(store.sql.cron.cronBound, [5000], client);
    expect((await client.query("SHOW idle_in_transaction_session_timeout")).rows[0]).toEqual({
      idle_in_transaction_session_timeout: "2s",
    });
    await client.query("ROLLBACK");
    // Acting: a transaction bounded at 300 ms and left idle is ended by the server.
    await client.query("BEGIN");
    await store.query(store.sql.cron.cronBound, [300], client);
    const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
    await until("the server ended the idle pass's session", async () => {
      const { rows } = await t.db.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid]);
      return rows.length === 0;
    });
  } finally {
    client.release(true);
  }
});
