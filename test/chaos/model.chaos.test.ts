/**
 * Model-based test of the job state machine (matrix 7.8): random sequences of
 * enqueue, claim, heartbeat, complete, fail, reap, cancel, crash, advance the
 * DB clock (by back-dating run_at / lease_expires_at) and operator retry, run
 * against the real SQL statements, checked after every step against a
 * reference model.
 *
 * Invariants: at most one live lease per job, and only the current lease is
 * ever accepted (every other outcome write is counted stale); a terminal job
 * never moves except by an operator's retry; attempts ≤ max_attempts; a
 * running row always has a lease and no other row does.
 */
import fc from "fast-check";
import type pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EmbeddedPostgres } from "../../src/embedded/embeddedPostgres.js";
import { type ChaosQueue, chaosQueue, recordResult, startServer } from "./harness.js";

type Status = "pending" | "running" | "completed" | "dead" | "cancelled";
interface ModelJob {
  id: string;
  status: Status;
  attempts: number;
  maxAttempts: number;
  lease: string | null;
  /** run_at <= now() (pending jobs only matter). */
  runnable: boolean;
  /** lease_expires_at < now() (running jobs only matter). */
  expired: boolean;
}
interface Model {
  jobs: ModelJob[];
  /** Leases workers believe they hold, per job: the current one and stale ones from earlier claims. */
  held: Map<string, string[]>;
  stale: number;
  accepted: number;
}
interface Real {
  db: pg.Pool;
  staleSeen: number;
}

let server: EmbeddedPostgres;
let q: ChaosQueue;
let sql: ReturnType<typeof statements>;
const totals = { runs: 0, steps: 0, stale: 0, accepted: 0 };

function statements(c: ChaosQueue) {
  const s = `"${c.schema}"`;
  const { jobs, maintenance, admin } = c.skipq.store.sql;
  return { jobs, maintenance, admin, s };
}

beforeAll(async () => {
  server = await startServer();
  q = await chaosQueue(server.url, "model");
  sql = statements(q);
});
afterAll(async () => {
  await q?.cleanup();
  await server?.stop();
});

function pick(m: Model, k: number): ModelJob | undefined {
  return m.jobs.length === 0 ? undefined : m.jobs[k % m.jobs.length];
}
function leaseFor(m: Model, job: ModelJob, k: number): string | undefined {
  const held = m.held.get(job.id) ?? [];
  return held.length === 0 ? undefined : held[k % held.length];
}

/** Compares every row with the model and checks the invariants. */
async function check(m: Model, r: Real): Promise<void> {
  const { rows } = await r.db.query(
    `SELECT id::text, status, attempts, max_attempts, lease::text FROM ${sql.s}.all_jobs ORDER BY id`,
  );
  expect(rows.length).toBe(m.jobs.length);
  for (const row of rows) {
    const job = m.jobs.find((j) => j.id === row.id);
    expect(row.status, `job ${row.id}`).toBe(job?.status);
    expect(row.attempts, `job ${row.id} attempts`).toBe(job?.attempts);
    expect(row.attempts).toBeLessThanOrEqual(row.max_attempts);
    expect(row.lease, `job ${row.id} lease`).toBe(job?.lease);
    expect(row.lease !== null).toBe(row.status === "running");
  }
  expect(r.staleSeen).toBe(m.stale);
}

class Enqueue implements fc.AsyncCommand<Model, Real> {
  constructor(readonly maxAttempts: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const { rows } = await r.db.query(sql.jobs.jobInsert.text, [
      "default",
      "chaos",
      "{}",
      0,
      this.maxAttempts,
      null,
      0,
      null,
      null, // headers
      null, // concurrency key
      q.skipq.channel,
    ]);
    m.jobs.push({
      id: rows[0].id,
      status: "pending",
      attempts: 0,
      maxAttempts: this.maxAttempts,
      lease: null,
      runnable: true,
      expired: false,
    });
    await check(m, r);
  }
  toString = () => `enqueue(max ${this.maxAttempts})`;
}

class Claim implements fc.AsyncCommand<Model, Real> {
  constructor(readonly limit: number) {}
  check = () => true;
  async run(m: Model, r: Real) {
    const { rows } = await r.db.query(sql.jobs.jobClaimBatch.text, [["default"], this.limit, "model", 30_000]);
    const runnable = m.jobs.filter((j) => j.status === "pending" && j.runnable);
    expect(rows.length).toBe(Math.min(this.limit, runnable.length));
    for (const row of rows) {
      const job = runnable.find((j) => j.id === row.id);
      expect(job, `claimed job ${row.id} was runnable`).toBeDefined();
      if (!job) continue;
      job.status = "running";
      job.attempts++;
      job.lease = row.lease;
      job.expired = false;
      m.held.set(job.id, [...(m.held.get(job.id) ?? []), row.lease]);
    }
    await check(m, r);
  }
  toString = () => `claim(${this.limit})`;
}

/** Outcome writes (complete, fail, heartbeat) presented with a lease a worker holds, current or stale. */
class Outcome implements fc.AsyncCommand<Model, Real> {
  constructor(
    readonly kind: "complete" | "fail" | "heartbeat",
    readonly k: number,
    readonly l: number,
  ) {}
  check = (m: Model) => {
    const job = pick(m, this.k);
    return job !== undefined && leaseFor(m, job, this.l) !== undefined;
  };
  async run(m: Model, r: Real) {
    const job = pick(m, this.k) as ModelJob;
    const lease = leaseFor(m, job, this.l) as string;
    const current = job.status === "running" && job.lease === lease;
    let accepted: boolean;
    if (this.kind === "complete") {
      accepted = (await r.db.query(sql.jobs.jobCompleteMany.text, [[job.id], [lease]])).rowCount === 1;
    } else if (this.kind === "fail") {
      // A retry an hour out: not runnable until the clock is advanced.
      accepted =
        (
          await r.db.query(sql.jobs.jobSettleMany.text, [
            [job.id],
            [lease],
            ["retry"],
            ["boom"],
            [3_600_000],
            [null],
            [null],
          ])
        ).rowCount === 1;
    } else {
      accepted = (await r.db.query(sql.jobs.jobHeartbeatMany.text, [[job.id], [lease], 30_000])).rowCount === 1;
    }
    expect(accepted, `${this.kind} with ${current ? "the current" : "a stale"} lease`).toBe(current);
    if (!accepted) {
      m.stale++;
      r.staleSeen++;
    } else {
      m.accepted++;
      if (this.kind === "complete") {
        job.status = "completed";
        job.lease = null;
      } else if (this.kind === "fail") {
        job.status = job.attempts >= job.maxAttempts ? "dead" : "pending";
        job.lease = null;
        job.runnable = false;
      } else job.expired = false;
    }
    await check(m, r);
  }
  toString = () => `${this.kind}(job#${this.k}, lease#${this.l})`;
}

class Reap implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    const { rows } = await r.db.query(sql.maintenance.jobReapExpired.text, [1000]);
    const expired = m.jobs.filter((j) => j.status === "running" && j.expired);
    expect(rows.map((x) => x.id).sort()).toEqual(expired.map((j) => j.id).sort());
    for (const job of expired) {
      job.status = job.attempts >= job.maxAttempts ? "dead" : "pending";
      job.lease = null;
      job.runnable = true; // keeps its run_at, which was already due
    }
    await check(m, r);
  }
  toString = () => "reap";
}

class Cancel implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  check = (m: Model) => pick(m, this.k) !== undefined;
  async run(m: Model, r: Real) {
    const job = pick(m, this.k) as ModelJob;
    const { rowCount } = await r.db.query(sql.admin.jobCancel.text, [job.id, q.skipq.channel]);
    const cancellable = job.status === "pending" || job.status === "running";
    expect(rowCount).toBe(cancellable ? 1 : 0);
    if (cancellable) {
      job.status = "cancelled";
      job.lease = null;
    }
    await check(m, r);
  }
  toString = () => `cancel(job#${this.k})`;
}

class Retry implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  check = (m: Model) => pick(m, this.k) !== undefined;
  async run(m: Model, r: Real) {
    const job = pick(m, this.k) as ModelJob;
    const { rowCount } = await r.db.query(sql.admin.jobRetry.text, [job.id]);
    const retryable = job.status === "dead" || job.status === "cancelled";
    expect(rowCount).toBe(retryable ? 1 : 0);
    if (retryable) {
      job.status = "pending";
      job.attempts = 0;
      job.runnable = true;
    }
    await check(m, r);
  }
  toString = () => `operator retry(job#${this.k})`;
}

/** A worker process dies: it forgets every lease it held (the rows keep them until reaped). */
class Crash implements fc.AsyncCommand<Model, Real> {
  check = () => true;
  async run(m: Model, r: Real) {
    m.held.clear();
    await check(m, r);
  }
  toString = () => "crash";
}

/** Time passes for one job: its run_at and lease expiry move two hours into the past. */
class AdvanceClock implements fc.AsyncCommand<Model, Real> {
  constructor(readonly k: number) {}
  check = (m: Model) => pick(m, this.k) !== undefined;
  async run(m: Model, r: Real) {
    const job = pick(m, this.k) as ModelJob;
    await r.db.query(
      `UPDATE ${sql.s}.jobs SET run_at = run_at - interval '2 hours',
              lease_expires_at = lease_expires_at - interval '2 hours' WHERE id = $1`,
      [job.id],
    );
    job.runnable = true;
    if (job.status === "running") job.expired = true;
    await check(m, r);
  }
  toString = () => `advance clock(job#${this.k})`;
}

describe("state machine model", () => {
  it("random command sequences on the real SQL keep one live lease per job, fence stale writes, and never move terminal jobs", async () => {
    const k = fc.nat(50);
    const commands = [
      fc.integer({ min: 1, max: 3 }).map((n) => new Enqueue(n)),
      fc.integer({ min: 1, max: 3 }).map((n) => new Claim(n)),
      fc
        .tuple(fc.constantFrom("complete", "fail", "heartbeat" as const), k, k)
        .map(([kind, a, b]) => new Outcome(kind, a, b)),
      fc.constant(new Reap()),
      k.map((n) => new Cancel(n)),
      k.map((n) => new Retry(n)),
      fc.constant(new Crash()),
      k.map((n) => new AdvanceClock(n)),
    ];
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: 50, size: "max" }), async (cmds) => {
        await q.db.query(`TRUNCATE ${sql.s}.jobs, ${sql.s}.job_history, ${sql.s}.job_keys RESTART IDENTITY`);
        const model: Model = { jobs: [], held: new Map(), stale: 0, accepted: 0 };
        const real: Real = { db: q.db, staleSeen: 0 };
        await fc.asyncModelRun(() => ({ model, real }), cmds);
        totals.runs++;
        totals.steps += [...cmds].length;
        totals.stale += model.stale;
        totals.accepted += model.accepted;
      }),
      { numRuns: 100 },
    );
    expect(totals.stale).toBeGreaterThan(0);
    recordResult({
      row: "M1",
      title:
        "Model-based test: enqueue / claim / heartbeat / complete / fail / reap / cancel / crash / advance clock / operator retry",
      config: `fast-check commands, ${totals.runs} sequences of up to 50 steps`,
      lost: 0,
      duplicates: 0,
      staleRejected: totals.stale,
      other: `commands generated: ${totals.steps}; outcome writes accepted with the current lease: ${totals.accepted}; stale writes rejected: ${totals.stale}; accepted stale writes: 0`,
    });
  });
});
