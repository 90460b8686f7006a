/**
 * Clock faults (matrix 7.5) with Debian's libfaketime, preloaded into the
 * processes themselves (not an injected Date): a worker whose wall clock is
 * 5 minutes slow (T2), a maintenance leader 5 minutes fast (T3), retry times
 * written by skewed workers (T5), and the database server's own clock stepped
 * forward 10 minutes while it runs (T4: a FAKETIME_TIMESTAMP_FILE the test
 * rewrites). T4 runs last: the server's clock stays 10 minutes ahead.
 *
 * Invariants: every time comparison and every stored time uses the
 * database's now(); a worker's clock changes nothing; a database clock step
 * expires leases early, and the duplicates that follow are bounded by the
 * jobs in flight and named.
 */
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { Scheduler } from "../../src/index.js";
import {
  CHAOS_WORKER,
  enqueueChaos,
  ledgerOf,
  recordResult,
  SLACK_MS,
  spawnWorker,
  terminalCount,
  until,
} from "./harness.js";
import { reconcile } from "./ledger.js";
import { CHAOS_CONFIG, chaosSuite } from "./suite.js";

/** Debian's libfaketime (`apt-get install -y faketime libfaketime`; .ci/run installs it). */
const LIBFAKETIME = ["/usr/lib", "/usr/lib64"]
  .flatMap((root) =>
    existsSync(root)
      ? [
          path.join(root, "faketime/libfaketime.so.1"),
          ...readdirSync(root)
            .filter((d) => d.endsWith("-linux-gnu"))
            .map((d) => path.join(root, d, "faketime/libfaketime.so.1")),
        ]
      : [],
  )
  .find((p) => existsSync(p));

function requireFaketime(): string {
  if (!LIBFAKETIME)
    throw new Error("libfaketime is not installed: apt-get install -y faketime libfaketime (.ci/run does)");
  return LIBFAKETIME;
}

/** Environment that makes a process's wall clock `offset` off ("+5m", "-5m"); monotonic time stays real. */
function faketime(offset: string): Record<string, string> {
  return { LD_PRELOAD: requireFaketime(), FAKETIME: offset, FAKETIME_DONT_FAKE_MONOTONIC: "1" };
}

// The server's clock offset lives in a file the test rewrites; libfaketime re-reads it every second.
const clockDir = mkdtempSync(path.join(os.tmpdir(), "skipq-faketime-"));
chmodSync(clockDir, 0o755); // the server runs as the postgres user
const clockFile = path.join(clockDir, "offset");
writeFileSync(clockFile, "+0\n", { mode: 0o644 });
const suite = chaosSuite({
  env: LIBFAKETIME
    ? {
        LD_PRELOAD: LIBFAKETIME,
        FAKETIME_TIMESTAMP_FILE: clockFile,
        FAKETIME_CACHE_DURATION: "1",
        FAKETIME_DONT_FAKE_MONOTONIC: "1",
      }
    : {},
});
const queue = (label: string) => suite.queue(label);
afterAll(() => rmSync(clockDir, { recursive: true, force: true }));

const MINUTES_5 = 5 * 60_000;

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? 0;
}

describe("time", () => {
  it("T2: a worker whose clock is 5 minutes slow runs scheduled jobs on time and never extends a lease past one lease", async () => {
    const q = await queue("t2");
    const w = await spawnWorker(
      q,
      { worker: { ...CHAOS_WORKER, concurrency: 4 }, fakeClockOffsetMs: -MINUTES_5 },
      { env: faketime("-5m") },
    );
    // The process's own clock really is 5 minutes slow (its ledger times are corrected back).
    const ready = ledgerOf(q, w.pid).find((e) => e.e === "ready");
    expect(Math.abs((ready?.clock ?? 0) - (ready?.t ?? 0) + MINUTES_5)).toBeLessThan(1000);
    expect(Math.abs((ready?.t ?? 0) - Date.now())).toBeLessThan(30_000);
    // Ten jobs due 0.3 to 3 s from now on the database clock, and one of 3 s to watch its lease.
    await q.db.query(
      `INSERT INTO "${q.schema}".jobs (kind, payload, run_at)
       SELECT 'chaos', '{}', now() + g * interval '300 milliseconds' FROM generate_series(1, 10) AS g`,
    );
    await enqueueChaos(q, 1, { ms: 3000 });
    let longestLeaseMs = 0;
    await until(
      "every job completed",
      async () => {
        // clock_timestamp(), not now(): a heartbeat committing between this statement's start and its snapshot
        // has a now() later than this one's, and read against it its lease looked 0.035 ms longer than 2 s.
        const { rows } = await q.db.query(
          `SELECT (SELECT max(extract(epoch FROM lease_expires_at - clock_timestamp()) * 1000) FROM "${q.schema}".jobs WHERE status = 'running')::float8 AS lease,
                  (SELECT count(*)::int FROM "${q.schema}".all_jobs WHERE status = 'completed') AS done`,
        );
        longestLeaseMs = Math.max(longestLeaseMs, rows[0].lease ?? 0);
        return rows[0].done === 11;
      },
      30_000,
      50,
    );
    const { rows } = await q.db.query(
      `SELECT id::text, (extract(epoch FROM run_at) * 1000)::float8 AS run_at_ms FROM "${q.schema}".all_jobs WHERE id <= 10`,
    );
    const starts = ledgerOf(q, w.pid).filter((e) => e.e === "start");
    const lateness = rows.map((r) => (starts.find((e) => e.id === r.id)?.t ?? Number.POSITIVE_INFINITY) - r.run_at_ms);
    const p99 = percentile(lateness, 99);
    // Poll 200 ms plus a claim round trip; the slack covers a loaded machine (5 minutes late would not pass).
    expect(p99).toBeLessThan(200 + 300 + SLACK_MS);
    expect(Math.min(...lateness)).toBeGreaterThanOrEqual(-50);
    expect(longestLeaseMs).toBeLessThanOrEqual(2000);
    expect(longestLeaseMs).toBeGreaterThan(1000);
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.duplicates).toBe(0);
    recordResult({
      row: "T2",
      title: "One worker's clock −5 min (libfaketime, LD_PRELOAD): 10 jobs due 0.3-3 s ahead (DB time), one job of 3 s",
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      other: `start − run_at (DB time): p99 ${p99.toFixed(0)} ms, min ${Math.min(...lateness).toFixed(0)} ms (bar: poll 200 ms + claim latency); longest lease seen ahead of DB now(): ${longestLeaseMs.toFixed(0)} ms (lease 2,000 ms: never over-extended)`,
    });
  });

  it("T3: a maintenance leader whose clock is 5 minutes fast reaps expired leases only", async () => {
    const q = await queue("t3");
    await enqueueChaos(q, 1, { ms: 4000 });
    // The honest worker runs no maintenance, so the skewed process is the leader and the only reaper.
    const honest = await spawnWorker(q, { worker: { ...CHAOS_WORKER, concurrency: 2, maintenance: false } });
    await until("the long job runs", () => ledgerOf(q, honest.pid).some((e) => e.e === "start"));
    const reaper = await spawnWorker(
      q,
      { worker: { ...CHAOS_WORKER, queues: ["t3-nothing"], concurrency: 1 }, fakeClockOffsetMs: MINUTES_5 },
      { env: faketime("+5m") },
    );
    const ready = ledgerOf(q, reaper.pid).find((e) => e.e === "ready");
    expect(Math.abs((ready?.clock ?? 0) - (ready?.t ?? 0) - MINUTES_5)).toBeLessThan(1000);
    // A positive control: a lease that expired a second ago on the database clock, held by no one.
    const { rows: ghost } = await q.db.query(
      `INSERT INTO "${q.schema}".jobs (kind, payload, status, attempts, lease, lease_expires_at, locked_at, locked_by)
       VALUES ('chaos', '{}', 'running', 1, 1, now() - interval '1 second', now() - interval '3 seconds', 'ghost')
       RETURNING id::text`,
    );
    const ghostId = ghost[0].id as string;
    await until("the skewed leader reaped the expired lease", () =>
      ledgerOf(q, reaper.pid).some((e) => e.e === "reaped" && e.ids?.includes(ghostId)),
    );
    await until("both jobs completed", async () => (await terminalCount(q)) === 2, 30_000);
    const reaped = ledgerOf(q, reaper.pid)
      .filter((e) => e.e === "reaped")
      .flatMap((e) => e.ids ?? []);
    expect(reaped).toEqual([ghostId]);
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.duplicates).toBe(0);
    expect(r.executions).toBe(2);
    recordResult({
      row: "T3",
      title:
        "The maintenance leader's clock +5 min (libfaketime); another worker's 4 s job under a 2 s lease; one lease that really expired",
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      other: "premature reclaims: 0 (the live 4 s job ran once); the expired lease was reaped (positive control): 1",
    });
  });

  it("T5: a retry's run_at is the database's now() plus the backoff, whatever the failing worker's clock", async () => {
    const q = await queue("t5");
    // Four jobs for each worker (a queue each), so both clocks are measured.
    await q.db.query(
      `INSERT INTO "${q.schema}".jobs (kind, queue, payload, max_attempts)
       SELECT 'chaos', q, '{"throws":"error"}', 2 FROM unnest(ARRAY['fast', 'slow']) AS q, generate_series(1, 4)`,
    );
    const worker = { ...CHAOS_WORKER, concurrency: 4, backoff: { baseMs: 3000, maxMs: 3000, jitter: 0 } };
    const children = await Promise.all(
      [
        ["fast", "+5m", MINUTES_5],
        ["slow", "-5m", -MINUTES_5],
      ].map(([queue, offset, ms]) =>
        spawnWorker(
          q,
          { worker: { ...worker, queues: [queue as string] }, fakeClockOffsetMs: ms as number },
          { env: faketime(offset as string) },
        ),
      ),
    );
    const { rows } = await until("every job failed once", async () => {
      const result = await q.db.query(
        `SELECT id::text, (extract(epoch FROM run_at) * 1000)::float8 AS run_at,
                (extract(epoch FROM run_at - updated_at) * 1000)::float8 AS delay
           FROM "${q.schema}".jobs WHERE status = 'pending' AND attempts = 1 AND last_error IS NOT NULL`,
      );
      return result.rows.length === 8 ? result : undefined;
    });
    for (const c of children) c.proc.kill("SIGKILL");
    const ends = ledgerOf(q).filter((e) => e.e === "end");
    const errors = rows.map((r) => r.run_at - ((ends.find((e) => e.id === r.id)?.t ?? 0) + 3000));
    const byWorker = children.map((c) => ends.filter((e) => e.pid === c.pid).length);
    expect(byWorker.every((n) => n > 0)).toBe(true);
    // Stored with the failure's own now(): exactly the backoff.
    for (const r of rows) expect(Math.abs(r.delay - 3000)).toBeLessThan(1);
    const worst = Math.max(...errors.map(Math.abs));
    expect(worst).toBeLessThan(1000);
    recordResult({
      row: "T5",
      title: "8 jobs fail on two workers whose clocks are +5 min and −5 min (libfaketime); backoff 3 s, no jitter",
      config: CHAOS_CONFIG,
      lost: 0,
      duplicates: 0,
      other: `run_at − (real failure time + backoff): worst ${worst.toFixed(0)} ms (bar 1 s; a worker clock would be off by 300,000 ms); run_at − updated_at = 3,000 ms exactly; failures per worker: ${byWorker.join(" / ")}`,
    });
  });

  it("T4: the database clock stepping 10 minutes forward expires leases early (duplicates bounded by the jobs in flight) and cron enqueues one tick, not a burst", async () => {
    requireFaketime();
    const q = await queue("t4");
    const jobs = 60;
    await enqueueChaos(q, jobs, { ms: 1000 });
    const scheduler = new Scheduler(q.skipq, { maxInterval: "1s" });
    scheduler.add("* * * * * *", "tick", {}, { queue: "cron", name: "every-second" });
    await scheduler.start();
    const worker = { ...CHAOS_WORKER, concurrency: 5 };
    const children = await Promise.all([1, 2].map(() => spawnWorker(q, { worker })));
    let inFlight = 0;
    try {
      await until("a third drained", async () => (await terminalCount(q)) >= jobs / 3, 60_000, 50);
      await until("a few cron ticks", async () => {
        const { rows } = await q.db.query(`SELECT count(*)::int AS n FROM "${q.schema}".all_jobs WHERE queue = 'cron'`);
        return rows[0].n >= 3;
      });
      const { rows: before } = await q.db.query(
        `SELECT now() AS now, (SELECT count(*)::int FROM "${q.schema}".jobs WHERE status = 'running' AND queue = 'default') AS running`,
      );
      inFlight = before[0].running as number;
      writeFileSync(clockFile, "+600\n");
      await until("the database clock stepped", async () => {
        const { rows } = await q.db.query("SELECT now() - $1::timestamptz > interval '9 minutes' AS stepped", [
          before[0].now,
        ]);
        return rows[0].stepped === true;
      });
      await until("every job terminal", async () => (await terminalCount(q)) === jobs, 60_000, 100);
      // Let the scheduler run a few passes on the new clock.
      await until("cron ticks after the step", async () => {
        const { rows } = await q.db.query(
          `SELECT count(*)::int AS n FROM "${q.schema}".all_jobs WHERE queue = 'cron' AND created_at > $1::timestamptz + interval '9 minutes'`,
          [before[0].now],
        );
        return rows[0].n >= 3;
      });
    } finally {
      await scheduler.stop();
    }
    for (const c of children) expect(c.proc.exitCode).toBe(null);
    const { rows: ticks } = await q.db.query(
      `SELECT headers->>'skipq-cron' AS tick, count(*)::int AS n FROM "${q.schema}".all_jobs WHERE queue = 'cron' GROUP BY 1 ORDER BY 1`,
    );
    const perSlot = Math.max(...ticks.map((t) => t.n));
    const times = ticks.map((t) => Date.parse((t.tick as string).split("@")[1] ?? ""));
    const gaps = times.slice(1).map((t, i) => t - (times[i] as number));
    const skipped = Math.max(...gaps);
    // One tick enqueued across the step: no tick between the last before it and the first after it.
    const burst = gaps.filter((g) => g === 1000).length;
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.byStatus).toEqual({ completed: jobs });
    expect(r.duplicatesByReason.unexplained ?? 0).toBe(0);
    // Early expiry re-runs the jobs in flight at the step, plus at most one claim batch per worker under way.
    expect(r.duplicates).toBeLessThanOrEqual(inFlight + 2 * 10);
    expect(perSlot).toBe(1);
    expect(skipped).toBeGreaterThan(9 * 60_000);
    recordResult({
      row: "T4",
      title: `The database server's clock steps 10 min forward (libfaketime in the postgres processes) during a drain of ${jobs} jobs of 1 s by 2 workers, with a per-second cron`,
      config: `${CHAOS_CONFIG}; cron backfill 0`,
      lost: r.lost,
      duplicates: r.duplicates,
      duplicatesByReason: r.duplicatesByReason,
      staleRejected: r.staleOutcomesRejected,
      other: `running at the step: ${inFlight}; cron jobs per tick: ${perSlot}; ticks skipped by the step: ${Math.round(skipped / 1000) - 1} (one enqueued for it, no burst); consecutive-second ticks: ${burst}`,
    });
  });
});
