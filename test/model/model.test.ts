/**
 * A model-based test across features (fast-check commands against a model,
 * on one schema). Commands enqueue in every variant (plain, idempotency key,
 * unique, debounce, dependsOn under each failure policy, batches, priority,
 * delay, concurrency keys), run a worker whose handlers end in every way
 * (success with and without a result, throw, retry later, fail permanently,
 * cancel), let a worker die holding jobs, hand jobs back at shutdown, act as
 * an operator (cancel, bulk cancel/retry/delete, retry dead, pause and resume
 * a queue or a key) and run maintenance (reaper, pruner with completed history
 * on and off, history aged into old partitions that retention drops).
 *
 * After every command, against the database:
 * - no job is lost, and every job is in exactly one place (live or history)
 *   with the status the model predicts;
 * - no job is `waiting` whose parents have all resolved for its policy;
 * - one job's failure never costs another job's outcome (every outcome of a
 *   worker's batch is recorded as the model predicts);
 * - a worker's claim takes jobs in claim order and only claimable ones;
 * - `waitFor` settles at once for finished jobs and rejects for unknown ids.
 *
 * CI runs fixed seeds (SKIPQ_MODEL_RUNS, default 40); `npm run test:model --
 * --runs N [--seed S]` runs longer. A failure prints the seed, the path and the
 * shrunk command list; SKIPQ_MODEL_SEED and SKIPQ_MODEL_PATH replay it.
 */
import fc from "fast-check";
import { expect, test } from "vitest";
import {
  Admin,
  CancelJob,
  FailPermanently,
  Pruner,
  RetryIn,
  type Skipq,
  type SkipqError,
  type Worker,
} from "../../src/index.js";
import { type TestQueue, until, useTestQueue } from "../helpers.js";

const RUNS = Number(process.env.SKIPQ_MODEL_RUNS ?? 40);
const SEED = Number(process.env.SKIPQ_MODEL_SEED ?? 20261201);
const MAX_COMMANDS = Number(process.env.SKIPQ_MODEL_COMMANDS ?? 60);

// ── The model ────────────────────────────────────────────────────────────────

type Status = "waiting" | "pending" | "running" | "completed" | "dead" | "cancelled";
type Policy = "cancel" | "run" | "wait";
const FINISHED: readonly Status[] = ["completed", "dead", "cancelled"];
const QUEUES = ["a", "b"] as const; // served by the model's worker
const IDLE = "idle"; // nobody works it: jobs wait there for ghosts and operators
const ALL_QUEUES = [...QUEUES, IDLE];
const CKEYS = ["t1", "t2", null] as const;

interface MJob {
  id: string;
  queue: string;
  status: Status;
  attempts: number;
  maxAttempts: number;
  priority: number;
  due: boolean;
  ckey: string | null;
  idemKey: string | null;
  debounceKey: string | null;
  parents: string[];
  policy: Policy | null;
  /** Parent ids whose edge counted (they completed, or finished under "run"). */
  counted: Set<string>;
  /** Held by a ghost worker (claimed, never finished). */
  ghost: boolean;
  /** Completed while completed history was off: no row anywhere. */
  historyless: boolean;
  /** Deleted by an operator or by retention. */
  gone: boolean;
  /** Has left the live table at least once (finished or deleted). */
  leftLive: boolean;
}

class Model {
  jobs = new Map<string, MJob>();
  historyOn = true;
  pausedQueues = new Set<string>();
  pausedKeys = new Set<string>(); // `${queue}|${key}`
  /** Unique windows: `${queue}|${key}` → the job holding it. */
  unique = new Map<string, string>();
  /** Idempotency keys: `${queue}|${key}` → the job holding it. */
  keys = new Map<string, string>();

  known(): MJob[] {
    return [...this.jobs.values()];
  }

  present(): MJob[] {
    return this.known().filter((j) => !j.gone && !j.historyless);
  }

  /**
   * The job `id` finished with `status`: its dependents resolve by their policies (cascading cancels). A
   * `deleted` live job counts as cancelled, and its dependents under "wait" are cancelled too: nothing can
   * retry a deleted job (docs/workflows.md).
   */
  finish(id: string, status: "completed" | "dead" | "cancelled", deleted = false): void {
    const job = this.jobs.get(id) as MJob;
    job.status = status;
    job.ghost = false;
    job.debounceKey = null;
    job.leftLive = true;
    if (status === "completed" && !this.historyOn) job.historyless = true;
    for (const child of this.known()) {
      if (!child.parents.includes(id) || child.status !== "waiting" || child.counted.has(id)) continue;
      if (status === "completed" || child.policy === "run") child.counted.add(id);
      else if (child.policy === "cancel" || deleted) {
        this.finish(child.id, "cancelled");
        continue;
      }
      this.release(child);
    }
  }

  /** A waiting job whose every edge counted becomes pending. */
  release(child: MJob): void {
    if (child.status === "waiting" && child.parents.every((p) => child.counted.has(p))) child.status = "pending";
  }

  claimable(j: MJob): boolean {
    return (
      j.status === "pending" &&
      j.due &&
      !this.pausedQueues.has(j.queue) &&
      !(j.ckey !== null && this.pausedKeys.has(`${j.queue}|${j.ckey}`))
    );
  }
}

// ── The real system ──────────────────────────────────────────────────────────

interface Real {
  t: TestQueue;
  skipq: Skipq;
  admin: Admin;
  s: string;
  /** What each job's handler does in the next worker pass. */
  plan: Map<string, Outcome>;
}

type Outcome = "ok" | "result" | "throw" | "snooze" | "dead" | "cancel";
const OUTCOMES: readonly Outcome[] = ["ok", "result", "throw", "snooze", "dead", "cancel"];

async function dbJobs(r: Real): Promise<Map<string, { status: Status; attempts: number; place: string }[]>> {
  const { rows } = await r.t.db.query(
    `SELECT id::text, status, attempts, 'live' AS place FROM ${r.s}.jobs
     UNION ALL SELECT id::text, status, attempts, 'history' FROM ${r.s}.job_history`,
  );
  const out = new Map<string, { status: Status; attempts: number; place: string }[]>();
  for (const row of rows) {
    const list = out.get(row.id) ?? [];
    list.push({ status: row.status, attempts: row.attempts, place: row.place });
    out.set(row.id, list);
  }
  return out;
}

/** The invariants, after every command. */
async function checkInvariants(m: Model, r: Real): Promise<void> {
  const found = await dbJobs(r);
  for (const job of m.known()) {
    const rows = found.get(job.id) ?? [];
    found.delete(job.id);
    if (job.gone || job.historyless) {
      expect(rows, `job ${job.id} (${job.gone ? "deleted" : "completed without history"}) left no row`).toEqual([]);
      continue;
    }
    // No job lost, none in two places.
    expect(rows.length, `job ${job.id} (model: ${job.status}) is in exactly one place`).toBe(1);
    const row = rows[0] as { status: Status; attempts: number; place: string };
    expect(row.status, `job ${job.id}: status`).toBe(job.status);
    expect(
      row.place,
      `job ${job.id}: ${job.status} lives in ${FINISHED.includes(job.status) ? "history" : "jobs"}`,
    ).toBe(FINISHED.includes(job.status) ? "history" : "live");
    if (!FINISHED.includes(job.status)) expect(row.attempts, `job ${job.id}: attempts`).toBe(job.attempts);
  }
  expect([...found.keys()], "the database holds only jobs the model knows").toEqual([]);

  // No waiting job whose parents have all resolved for its policy.
  const { rows: stuck } = await r.t.db.query(
    `SELECT j.id::text FROM ${r.s}.jobs j
      WHERE j.status = 'waiting'
        AND NOT EXISTS (SELECT 1 FROM ${r.s}.job_dependencies d
                         WHERE d.child_id = j.id
                           AND NOT (COALESCE((SELECT h.status FROM ${r.s}.job_history h WHERE h.id = d.parent_id LIMIT 1), '')
                                    = 'completed'
                                    OR (d.on_failure = 'run' AND EXISTS (SELECT 1 FROM ${r.s}.job_history h WHERE h.id = d.parent_id))
                                    OR d.counted))
        AND EXISTS (SELECT 1 FROM ${r.s}.job_dependencies d WHERE d.child_id = j.id)`,
  );
  expect(
    stuck.map((x) => x.id),
    "no job waits on parents that all resolved",
  ).toEqual([]);

  // waitFor settles at once for finished jobs (a sample) and rejects for an id that never existed.
  const finished = m.present().filter((j) => FINISHED.includes(j.status));
  for (const job of finished.slice(-3)) {
    const got = await r.skipq.waitFor(job.id, { timeout: "5s" });
    expect(got.status, `waitFor(${job.id})`).toBe(job.status);
  }
  const unknown = String(Math.max(0, ...m.known().map((j) => Number(j.id))) + 1_000_000);
  await expect(r.skipq.waitFor(unknown, { timeout: "5s" }), "waitFor on an unknown id").rejects.toMatchObject({
    code: "SKIPQ_NOT_FOUND",
  });
}

// ── Commands ─────────────────────────────────────────────────────────────────

type Cmd = fc.AsyncCommand<Model, Real>;

function pick<T>(list: readonly T[], n: number): T | undefined {
  return list.length === 0 ? undefined : list[n % list.length];
}

function newJob(id: string, o: Partial<MJob> & { queue: string }): MJob {
  return {
    id,
    status: "pending",
    attempts: 0,
    maxAttempts: 3,
    priority: 0,
    due: true,
    ckey: null,
    idemKey: null,
    debounceKey: null,
    parents: [],
    policy: null,
    counted: new Set(),
    ghost: false,
    historyless: false,
    gone: false,
    leftLive: false,
    ...o,
  };
}

interface EnqueueSpec {
  variant: "plain" | "key" | "unique" | "unique-live" | "debounce" | "depends" | "batch";
  queue: number;
  priority: number;
  delayed: boolean;
  maxAttempts: number;
  ckey: number;
  key: number;
  parentPicks: number[];
  policy: Policy;
}

class Enqueue implements Cmd {
  constructor(readonly o: EnqueueSpec) {}
  check = () => true;
  toString = () => `Enqueue(${JSON.stringify(this.o)})`;
  async run(m: Model, r: Real): Promise<void> {
    const o = this.o;
    const queue = ALL_QUEUES[o.queue % ALL_QUEUES.length] as string;
    const ckey = CKEYS[o.ckey % CKEYS.length] ?? null;
    const key = `k${o.key % 3}`;
    const base = {
      queue,
      priority: o.priority,
      maxAttempts: o.maxAttempts,
      ...(ckey ? { concurrencyKey: ckey } : {}),
    };
    const delay = o.delayed ? { delay: "1h" as const } : {};
    const fresh = (id: string, extra: Partial<MJob> = {}) =>
      newJob(id, {
        queue,
        priority: o.priority,
        maxAttempts: o.maxAttempts,
        ckey,
        due: !o.delayed,
        ...extra,
      });
    switch (o.variant) {
      case "plain": {
        const { id, created } = await r.skipq.enqueue("m", {}, { ...base, ...delay });
        expect(created).toBe(true);
        m.jobs.set(id, fresh(id));
        return;
      }
      case "key": {
        const holder = m.keys.get(`${queue}|${key}`);
        const got = await r.skipq.enqueue("m", {}, { ...base, ...delay, idempotencyKey: key });
        if (holder !== undefined) {
          expect(got, "a taken idempotency key returns its job").toEqual({ id: holder, created: false });
          return;
        }
        expect(got.created).toBe(true);
        m.keys.set(`${queue}|${key}`, got.id);
        m.jobs.set(got.id, fresh(got.id, { idemKey: key }));
        return;
      }
      case "unique":
      case "unique-live": {
        // A window blocks for its period whatever its holder does, except for a "live" enqueue once the holder
        // left the live table (finished, deleted: job_unique.finished_at).
        const live = o.variant === "unique-live";
        const holder = m.unique.get(`${queue}|${key}`);
        const blocks = holder !== undefined && !(live && (m.jobs.get(holder) as MJob).leftLive);
        const got = await r.skipq.enqueue(
          "m",
          {},
          {
            ...base,
            ...delay,
            unique: { key, period: "1h", ...(live ? { states: "live" as const } : {}) },
          },
        );
        if (blocks) {
          expect(got, "a held uniqueness window returns its holder").toEqual({ id: holder, created: false });
          return;
        }
        expect(got.created, "a free uniqueness window takes a new job").toBe(true);
        m.unique.set(`${queue}|${key}`, got.id);
        m.jobs.set(got.id, fresh(got.id));
        return;
      }
      case "debounce": {
        const member = m
          .known()
          .find((j) => j.queue === queue && j.debounceKey === key && j.status === "pending" && !j.gone);
        const got = await r.skipq.enqueue(
          "m",
          {},
          {
            queue,
            priority: o.priority,
            maxAttempts: o.maxAttempts,
            ...(ckey ? { concurrencyKey: ckey } : {}),
            debounce: { key, delay: o.delayed ? "1h" : 0 },
          },
        );
        if (member) {
          expect(got, "a debounced enqueue updates the pending job of its key").toEqual({
            id: member.id,
            created: false,
          });
          member.priority = o.priority;
          member.maxAttempts = o.maxAttempts;
          member.ckey = ckey;
          member.due = !o.delayed;
          return;
        }
        expect(got.created).toBe(true);
        m.jobs.set(got.id, fresh(got.id, { debounceKey: key }));
        return;
      }
      case "depends": {
        const candidates = m.known().sort((x, y) => Number(x.id) - Number(y.id));
        const parents = [...new Set(o.parentPicks.map((n) => pick(candidates, n)?.id).filter((x) => x !== undefined))];
        if (parents.length === 0) return;
        const missing = parents.some((p) => {
          const job = m.jobs.get(p) as MJob;
          return job.gone || job.historyless;
        });
        const call = r.skipq.enqueue("m", {}, { ...base, ...delay, dependsOn: parents, onParentFailure: o.policy });
        if (missing) {
          await expect(call, "dependsOn a job that no longer exists").rejects.toMatchObject({
            code: "SKIPQ_INVALID_ARGUMENT",
          });
          return;
        }
        const { id } = await call;
        const child = fresh(id, { status: "waiting", parents, policy: o.policy, due: !o.delayed });
        m.jobs.set(id, child);
        this.resolveAtLink(m, child);
        return;
      }
      case "batch": {
        const result = await r.skipq.batch(
          [
            { job: "m", payload: {}, ...base },
            { job: "m", payload: {}, ...base },
          ],
          { onComplete: { job: "m", payload: {}, queue }, onSuccess: { job: "m", payload: {}, queue } },
        );
        const ids = result.jobs.map((j) => j.id);
        for (const id of ids) m.jobs.set(id, fresh(id, { due: true }));
        // The callbacks carry no options: the default of 10 attempts.
        const cb = (id: string, policy: Policy) =>
          m.jobs.set(id, newJob(id, { queue, status: "waiting", parents: ids, policy, maxAttempts: 10 }));
        cb(result.onComplete?.id as string, "run");
        cb(result.onSuccess?.id as string, "cancel");
        return;
      }
    }
  }

  /** Parents already finished when the child is linked count at once (skipq_link). */
  private resolveAtLink(m: Model, child: MJob): void {
    for (const p of child.parents) {
      const parent = m.jobs.get(p) as MJob;
      if (!FINISHED.includes(parent.status)) continue;
      if (parent.status === "completed" || child.policy === "run") child.counted.add(p);
      else if (child.policy === "cancel") {
        m.finish(child.id, "cancelled");
        return;
      }
    }
    m.release(child);
  }
}

/** A worker pass: one claim over the served queues, every handler ending as planned, one outcome flush. */
class Work implements Cmd {
  constructor(
    readonly batch: number,
    readonly outcomes: Outcome[],
  ) {}
  check = () => true;
  toString = () => `Work(${this.batch}, ${JSON.stringify(this.outcomes)})`;
  async run(m: Model, r: Real): Promise<void> {
    // A retry's backoff is 1 ms: let it pass, so that what is due is settled before the claim.
    await until(
      "retries due",
      async () => {
        const { rows } = await r.t.db.query(
          `SELECT count(*)::int AS n FROM ${r.s}.jobs WHERE status = 'pending' AND run_at > now() AND run_at < now() + interval '1 minute'`,
        );
        return rows[0].n === 0;
      },
      5_000,
      2,
    );
    // Claim order: priority, then run_at, then id. run_at is read from the database (enqueues share now()).
    const { rows: order } = await r.t.db.query(
      `SELECT j.id::text AS id FROM ${r.s}.jobs j WHERE j.status = 'pending' AND j.run_at <= now() AND j.queue = ANY($1)
        ORDER BY j.priority DESC, j.run_at, j.id`,
      [[...QUEUES]],
    );
    const candidates = order.map((x) => x.id).filter((id) => m.claimable(m.jobs.get(id) as MJob));
    const expected = candidates.slice(0, this.batch);
    r.plan.clear();
    expected.forEach((id, i) => {
      r.plan.set(id, this.outcomes[i % this.outcomes.length] ?? "ok");
    });
    const ran: string[] = [];
    const w = worker(r, ran, { queues: [...QUEUES], batchSize: this.batch, concurrency: this.batch });
    try {
      expect(await w.runOnce(), "jobs claimed").toBe(expected.length);
    } finally {
      await w.stop();
    }
    // The claim takes the first claimable jobs in claim order (handlers of one claim start concurrently: a job
    // with parents reads them first, so start order within a claim is not claim order).
    expect([...ran].sort(), "the claim took the first claimable jobs in claim order").toEqual([...expected].sort());
    for (const id of expected) {
      const job = m.jobs.get(id) as MJob;
      job.attempts++;
      const outcome = r.plan.get(id) as Outcome;
      if (outcome === "ok" || outcome === "result") m.finish(id, "completed");
      else if (outcome === "dead") m.finish(id, "dead");
      else if (outcome === "cancel") m.finish(id, "cancelled");
      else if (outcome === "snooze") {
        job.attempts--;
        job.status = "pending";
        job.debounceKey = null;
      } else if (job.attempts >= job.maxAttempts) m.finish(id, "dead");
      else {
        job.status = "pending";
        job.debounceKey = null;
      }
    }
  }
}

function worker(r: Real, ran: string[], o: { queues: string[]; batchSize: number; concurrency: number }): Worker {
  return r.skipq
    .worker({
      ...o,
      prefetch: 0,
      listen: false,
      maintenance: false,
      backoff: { baseMs: 1, maxMs: 1, jitter: 0 },
      shutdownTimeout: 0,
    })
    .register("m", async (_payload, ctx) => {
      ran.push(ctx.id);
      switch (r.plan.get(ctx.id) ?? "ok") {
        case "ok":
          return;
        case "result":
          return { attempt: ctx.attempt };
        case "throw":
          throw new Error(`job ${ctx.id} failed`);
        case "snooze":
          throw new RetryIn(0);
        case "dead":
          throw new FailPermanently(`job ${ctx.id} gave up`);
        case "cancel":
          throw new CancelJob(`job ${ctx.id} cancelled itself`);
      }
    });
}

/** A worker that dies holding jobs: they are claimed (any queue) and never finished. */
class GhostClaims implements Cmd {
  constructor(
    readonly queue: number,
    readonly n: number,
  ) {}
  check = () => true;
  toString = () => `GhostClaims(${ALL_QUEUES[this.queue % 3]}, ${this.n})`;
  async run(m: Model, r: Real): Promise<void> {
    const queue = ALL_QUEUES[this.queue % ALL_QUEUES.length] as string;
    const { rows } = await r.t.db.query(r.skipq.store.sql.jobs.jobClaimBatch.text, [[queue], this.n, "ghost", 600_000]);
    for (const row of rows) {
      const job = m.jobs.get(String(row.id)) as MJob;
      expect(m.claimable(job), `ghost claimed job ${row.id}, which is claimable`).toBe(true);
      job.status = "running";
      job.attempts++;
      job.ghost = true;
    }
  }
}

/** The ghosts' leases run out and the reaper returns their jobs. */
class Reap implements Cmd {
  check = () => true;
  toString = () => "Reap";
  async run(m: Model, r: Real): Promise<void> {
    await r.t.db.query(
      `UPDATE ${r.s}.jobs SET lease_expires_at = now() - interval '1 ms' WHERE status = 'running' AND locked_by = 'ghost'`,
    );
    await r.t.db.query(r.skipq.store.sql.maintenance.jobReapExpired.text, [1000]);
    for (const job of m.known().filter((j) => j.ghost && j.status === "running")) {
      job.ghost = false;
      if (job.attempts >= job.maxAttempts) m.finish(job.id, "dead");
      else {
        job.status = "pending";
        job.debounceKey = null;
      }
    }
  }
}

/** A worker stops while its handlers still run: their jobs are handed back, the attempt not counted. */
class HandBack implements Cmd {
  constructor(readonly n: number) {}
  check = (m: Readonly<Model>) =>
    m.known().some((j) => m.claimable(j) && (QUEUES as readonly string[]).includes(j.queue));
  toString = () => `HandBack(${this.n})`;
  async run(m: Model, r: Real): Promise<void> {
    const started: string[] = [];
    const w = r.skipq
      .worker({
        queues: [...QUEUES],
        concurrency: this.n,
        prefetch: 0,
        listen: false,
        maintenance: false,
        pollInterval: 10,
        shutdownTimeout: 0,
        abortGrace: 10,
      })
      .register("m", async (_payload, ctx) => {
        started.push(ctx.id);
        await new Promise(() => undefined); // never ends, whatever its signal says
      });
    const claimable = m.known().filter((j) => m.claimable(j) && (QUEUES as readonly string[]).includes(j.queue)).length;
    try {
      await w.start();
      await until("handlers running", () => started.length >= Math.min(this.n, claimable), 10_000, 5);
    } finally {
      await w.stop();
    }
    for (const id of started) {
      const job = m.jobs.get(id) as MJob;
      job.status = "pending";
      job.debounceKey = null;
    }
  }
}

class Cancel implements Cmd {
  constructor(readonly n: number) {}
  check = () => true;
  toString = () => `Cancel(#${this.n})`;
  async run(m: Model, r: Real): Promise<void> {
    const job = pick(
      m.known().sort((x, y) => Number(x.id) - Number(y.id)),
      this.n,
    );
    if (!job) return;
    const call = r.admin.cancelJob(job.id);
    if (job.gone || job.historyless || FINISHED.includes(job.status)) {
      await expect(call).rejects.toBeDefined();
      return;
    }
    await call;
    m.finish(job.id, "cancelled");
  }
}

class RetryFinished implements Cmd {
  constructor(readonly n: number) {}
  check = () => true;
  toString = () => `Retry(#${this.n})`;
  async run(m: Model, r: Real): Promise<void> {
    const job = pick(
      m.known().sort((x, y) => Number(x.id) - Number(y.id)),
      this.n,
    );
    if (!job) return;
    const call = r.admin.retryJob(job.id);
    if (job.gone || job.historyless || !["dead", "cancelled"].includes(job.status)) {
      await expect(call).rejects.toBeDefined();
      return;
    }
    await call;
    retried(m, job);
  }
}

/** A dead or cancelled job back to pending by an operator: attempts from zero, due now. */
function retried(m: Model, job: MJob): void {
  job.status = "pending";
  job.attempts = 0;
  job.due = true;
  // Its key: kept unless another job took it meanwhile (the model never lets that happen while a key is held).
  void m;
}

class Bulk implements Cmd {
  constructor(
    readonly action: "cancel" | "retry" | "delete",
    readonly queue: number,
  ) {}
  check = () => true;
  toString = () => `Bulk(${this.action}, ${ALL_QUEUES[this.queue % 3]})`;
  async run(m: Model, r: Real): Promise<void> {
    const queue = ALL_QUEUES[this.queue % ALL_QUEUES.length] as string;
    const mine = m.present().filter((j) => j.queue === queue);
    const n = await r.admin.bulk(this.action, { queue });
    if (this.action === "cancel") {
      const targets = mine.filter((j) => ["waiting", "pending", "running"].includes(j.status));
      expect(n, "bulk cancel: how many").toBe(targets.length);
      for (const j of targets) if (j.status !== "cancelled") m.finish(j.id, "cancelled");
    } else if (this.action === "retry") {
      const targets = mine.filter((j) => ["dead", "cancelled"].includes(j.status));
      expect(n, "bulk retry: how many").toBe(targets.length);
      for (const j of targets) retried(m, j);
    } else {
      // Delete: every job of the filter that is not running; a deleted live job resolves its dependents as a cancel.
      // The targets are chosen at once: a live target that an earlier target's cancel cascaded to (a batch's
      // onSuccess, say) is still deleted as live, so its dependents under "wait" are cancelled too.
      const targets = mine.filter((j) => j.status !== "running");
      expect(n, "bulk delete: how many").toBe(targets.length);
      const live = new Set(targets.filter((j) => !FINISHED.includes(j.status)).map((j) => j.id));
      for (const j of targets) {
        if (live.has(j.id)) m.finish(j.id, "cancelled", true);
        j.gone = true;
      }
    }
  }
}

class PauseQueue implements Cmd {
  constructor(
    readonly queue: number,
    readonly paused: boolean,
  ) {}
  check = () => true;
  toString = () => `${this.paused ? "Pause" : "Resume"}(${QUEUES[this.queue % 2]})`;
  async run(m: Model, r: Real): Promise<void> {
    const queue = QUEUES[this.queue % QUEUES.length] as string;
    if (this.paused) {
      await r.admin.pauseQueue(queue);
      m.pausedQueues.add(queue);
    } else {
      await r.admin.resumeQueue(queue);
      m.pausedQueues.delete(queue);
    }
  }
}

class PauseKey implements Cmd {
  constructor(
    readonly queue: number,
    readonly key: number,
    readonly paused: boolean,
  ) {}
  check = () => true;
  toString = () => `${this.paused ? "PauseKey" : "ResumeKey"}(${QUEUES[this.queue % 2]}, ${CKEYS[this.key % 2]})`;
  async run(m: Model, r: Real): Promise<void> {
    const queue = QUEUES[this.queue % QUEUES.length] as string;
    const key = CKEYS[this.key % 2] as string;
    if (this.paused) {
      await r.admin.pauseKey(queue, key, "1h");
      m.pausedKeys.add(`${queue}|${key}`);
    } else {
      await r.admin.resumeKey(queue, key);
      m.pausedKeys.delete(`${queue}|${key}`);
    }
  }
}

/** Retention with completed history on or off; finished jobs aged `days` back first are past it. */
class Prune implements Cmd {
  constructor(
    readonly historyOn: boolean,
    readonly agePick: number,
  ) {}
  check = () => true;
  toString = () => `Prune(history ${this.historyOn ? "on" : "off"}, age #${this.agePick})`;
  async run(m: Model, r: Real): Promise<void> {
    const finished = m.present().filter((j) => FINISHED.includes(j.status));
    const aged = pick(
      finished.sort((x, y) => Number(x.id) - Number(y.id)),
      this.agePick,
    );
    if (aged) {
      // 40 days back, into a partition of its own (retention drops it whole) or DEFAULT for a completed job.
      const parent = aged.status === "completed" ? "job_history_completed" : "job_history_failed";
      await r.t.db.query(
        `SELECT ${r.s}.skipq_history_partition($1, d, d + interval '1 day')
           FROM (SELECT date_bin(interval '1 day', now() - interval '40 days', '2000-01-01 00:00+00') AS d) x`,
        [parent],
      );
      await r.t.db.query(
        `UPDATE ${r.s}.job_history SET finished_at = now() - interval '40 days' + interval '1 minute' WHERE id = $1`,
        [aged.id],
      );
      aged.gone = true;
    }
    const pass = await new Pruner(r.skipq, { completedAfter: this.historyOn ? "1d" : 0, deadAfter: "30d" }).runOnce();
    expect(pass.leader).toBe(true);
    m.historyOn = this.historyOn;
  }
}

const enqueueSpec: fc.Arbitrary<EnqueueSpec> = fc.record({
  variant: fc.constantFrom("plain", "plain", "key", "unique", "unique-live", "debounce", "depends", "depends", "batch"),
  queue: fc.nat(5),
  priority: fc.constantFrom(0, 0, 1, 5),
  delayed: fc.boolean(),
  maxAttempts: fc.integer({ min: 1, max: 3 }),
  ckey: fc.nat(5),
  key: fc.nat(5),
  parentPicks: fc.array(fc.nat(60), { minLength: 1, maxLength: 2 }),
  policy: fc.constantFrom<Policy>("cancel", "run", "wait"),
});

const commands = [
  enqueueSpec.map((o) => new Enqueue(o)),
  enqueueSpec.map((o) => new Enqueue(o)),
  enqueueSpec.map((o) => new Enqueue(o)),
  fc
    .tuple(fc.integer({ min: 1, max: 6 }), fc.array(fc.constantFrom(...OUTCOMES), { minLength: 1, maxLength: 6 }))
    .map(([b, o]) => new Work(b, o)),
  fc
    .tuple(fc.integer({ min: 1, max: 6 }), fc.array(fc.constantFrom(...OUTCOMES), { minLength: 1, maxLength: 6 }))
    .map(([b, o]) => new Work(b, o)),
  fc.tuple(fc.nat(2), fc.integer({ min: 1, max: 3 })).map(([q, n]) => new GhostClaims(q, n)),
  fc.constant(new Reap()),
  fc.integer({ min: 1, max: 3 }).map((n) => new HandBack(n)),
  fc.nat(60).map((n) => new Cancel(n)),
  fc.nat(60).map((n) => new RetryFinished(n)),
  fc.tuple(fc.constantFrom("cancel", "retry", "delete" as const), fc.nat(2)).map(([a, q]) => new Bulk(a, q)),
  fc.tuple(fc.nat(1), fc.boolean()).map(([q, p]) => new PauseQueue(q, p)),
  fc.tuple(fc.nat(1), fc.nat(1), fc.boolean()).map(([q, k, p]) => new PauseKey(q, k, p)),
  fc.tuple(fc.boolean(), fc.nat(60)).map(([h, a]) => new Prune(h, a)),
];

// ── The run ──────────────────────────────────────────────────────────────────

const t = useTestQueue("model");

async function reset(r: Real): Promise<void> {
  const s = r.s;
  await r.t.db.query(
    `TRUNCATE ${s}.jobs, ${s}.job_history, ${s}.job_keys, ${s}.job_unique, ${s}.job_dependencies, ${s}.batches,
              ${s}.queues, ${s}.queue_keys, ${s}.rate_starts RESTART IDENTITY`,
  );
  await r.t.db.query(`UPDATE ${s}.settings SET keep_completed = true`);
}

test(
  "every feature together: no job lost or in two places, no job stuck waiting, every outcome recorded, waitFor settles",
  async () => {
    const real: Real = { t, skipq: t.skipq, admin: new Admin(t.skipq), s: `"${t.schema}"`, plan: new Map() };
    await fc.assert(
      fc.asyncProperty(fc.commands(commands, { maxCommands: MAX_COMMANDS, size: "max" }), async (cmds) => {
        await reset(real);
        const model = new Model();
        await fc.asyncModelRun(
          () => ({ model, real }),
          [...cmds].map((c) => ({
            check: (m: Readonly<Model>) => c.check(m),
            run: async (m: Model, r: Real) => {
              await c.run(m, r);
              await checkInvariants(m, r);
            },
            toString: () => c.toString(),
          })),
        );
        if (process.env.SKIPQ_MODEL_LOG) console.log(`run (${model.jobs.size} jobs): ${cmds.toString()}`);
      }),
      {
        numRuns: RUNS,
        seed: SEED,
        verbose: 1,
        // Replays one failure: the path fast-check printed with it.
        ...(process.env.SKIPQ_MODEL_PATH ? { path: process.env.SKIPQ_MODEL_PATH, endOnFailure: true } : {}),
      },
    );
  },
  // Room for the runs asked for (about a second each here, shrinking a failure included).
  Math.max(10 * 60_000, RUNS * 5_000),
);

export type { SkipqError };
