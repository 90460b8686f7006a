/**
 * A chaos worker process: one skipq Worker in its own OS process, so the suite
 * can SIGKILL or SIGTERM it for real. Configured by the CHAOS_CONFIG env var.
 *
 * Every handler execution is appended to this process's ledger file (one JSON
 * line per event, written synchronously so a SIGKILL a moment later cannot
 * lose it, and a file so a database fault cannot either). It never decides
 * whether a run was correct: the parent's reconciler does, from the ledgers
 * and the database.
 */
import { appendFileSync, existsSync } from "node:fs";
import pg from "pg";
import { defaultLogger, type Job, Scheduler, Skipq, type WorkerOptions } from "../../src/index.js";
import type { ChildConfig, JobSpec } from "./ledger.js";

const config = JSON.parse(process.env.CHAOS_CONFIG ?? "{}") as ChildConfig;
const realNow = Date.now;

// T1: a worker whose wall clock is off. Everything in skipq that compares times
// does so in the database, so this must change nothing.
if (config.skewMs) {
  const skew = config.skewMs;
  const RealDate = Date;
  class SkewedDate extends RealDate {
    // biome-ignore lint/suspicious/noExplicitAny: mirrors Date's overloaded constructor.
    constructor(...args: any[]) {
      if (args.length === 0) super(realNow() + skew);
      else super(...(args as [number]));
    }
    static override now(): number {
      return realNow() + skew;
    }
  }
  globalThis.Date = SkewedDate as DateConstructor;
}

/** The real wall clock, for the ledger: libfaketime's known skew (T2–T5) taken out. */
const ledgerNow = () => realNow() - (config.fakeClockOffsetMs ?? 0);

function log(entry: Record<string, unknown>): void {
  appendFileSync(config.ledger, `${JSON.stringify({ ...entry, pid: process.pid, t: ledgerNow() })}\n`);
}

const skipq = new Skipq({
  connectionString: config.url,
  schema: config.schema,
  logger: defaultLogger,
  preparedStatements: config.preparedStatements ?? true,
  ...(config.sessionSettings === undefined ? {} : { sessionSettings: config.sessionSettings }),
});
const effects = config.effects ? new pg.Pool({ connectionString: config.url, max: 2 }) : undefined;
effects?.on("error", () => undefined);

let handled = 0;
const scheduler = config.cron
  ? new Scheduler(skipq).add(config.cron.expression, "tick", {}, { backfill: config.cron.backfill })
  : undefined;
const options: WorkerOptions = {
  ...config.worker,
  ...(scheduler ? { scheduler } : {}),
  hooks: {
    afterClaimCommit: (jobs: ReadonlyArray<Job>) => {
      if (config.killAt === "afterClaimCommit" && jobs.length > 0) {
        log({ e: "kill", point: "afterClaimCommit", ids: jobs.map((j) => j.id) });
        process.kill(process.pid, "SIGKILL");
      }
    },
    afterHandlerBeforeOutcome: (job: Job) => {
      handled++;
      if (config.killAt === "afterHandlerBeforeOutcome" && handled >= (config.killAfter ?? 1)) {
        log({ e: "kill", point: "afterHandlerBeforeOutcome", ids: [job.id] });
        process.kill(process.pid, "SIGKILL");
      }
    },
  },
};
const worker = skipq.worker(options);

/** Waits `ms`, or rejects with the signal's reason when it aborts (as timers/promises does). */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(resolve, ms);
    signal?.addEventListener("abort", () => {
      clearTimeout(timer);
      reject(signal.reason);
    });
  });
}

/** P7: every shape a handler can fail with. */
function fail(shape: string, id: string): unknown {
  switch (shape) {
    case "error":
      throw new Error(`handler failed on job ${id}`);
    case "string":
      throw `a string thrown by job ${id}`;
    case "null":
      throw null;
    case "undefined":
      throw undefined;
    case "object":
      throw { code: 42, why: "a plain object" };
    case "number":
      throw 7;
    case "reject":
      return Promise.reject(new TypeError("rejected promise"));
    case "late":
      // Rejects after the job timeout already settled the job: must not become an unhandled rejection.
      return new Promise((_, reject) => setTimeout(() => reject(new Error("late rejection")), 300));
    case "floating":
      // A rejection the handler forgets to await, handled later (a common bug shape).
      return Promise.reject(new Error("rejected, caught by the worker"));
    default:
      throw new Error(`unknown failure shape ${shape}`);
  }
}

/** P10: keeps allocating, and keeps it all reachable, until V8 aborts the process at its heap limit. */
function exhaustHeap(): never {
  const hog: number[][] = [];
  for (;;) hog.push(new Array(1 << 20).fill(hog.length));
}

let starts = 0;
worker.register("chaos", async (raw, ctx) => {
  const payload = raw as JobSpec;
  const { job } = ctx;
  log({ e: "start", id: job.id, attempt: job.attempt, lease: job.lease });
  starts++;
  if (config.oomAfterStarts !== undefined && starts > config.oomAfterStarts) {
    log({ e: "kill", point: "oom", ids: [job.id] });
    exhaustHeap();
  }
  let ok = false;
  try {
    if (config.blockMs) {
      // P9: a synchronous loop; no timer, heartbeat or I/O callback runs meanwhile. It returns without
      // awaiting anything after it, so the outcome reaches the database before the overdue heartbeat
      // (which would otherwise find the lease gone first and discard the outcome: also fenced, another path).
      const until = performance.now() + config.blockMs;
      while (performance.now() < until);
      ok = true;
      return;
    }
    if (payload.never) await new Promise(() => undefined);
    while (payload.untilFile && !existsSync(payload.untilFile)) await sleep(50, ctx.signal);
    const ms = Math.min(payload.ms ?? 0, config.maxMs ?? Number.POSITIVE_INFINITY);
    await sleep(ms, payload.ignoreAbort ? undefined : ctx.signal);
    if (effects && payload.effect) {
      // A side effect made idempotent by the job id: at most one row whatever the runs.
      await effects.query(
        `INSERT INTO "${config.schema}".effects (job_id, lease) VALUES ($1, $2) ON CONFLICT (job_id) DO UPDATE SET n = effects.n + 1`,
        [job.id, job.lease],
      );
    }
    if (payload.throws) await fail(payload.throws, job.id);
    if (payload.failP && Math.random() < payload.failP) throw new Error(`injected failure on job ${job.id}`);
    ok = true;
  } finally {
    log({ e: "end", id: job.id, attempt: job.attempt, lease: job.lease, ok });
  }
});

// Cron's ticks: counted in the database (one job per tick), nothing to do here.
if (scheduler) worker.register("tick", () => undefined);

worker.on("jobEnd", (job, outcome) => log({ e: "outcome", id: job.id, lease: job.lease, outcome }));
worker.on("staleOutcome", (ids) => log({ e: "stale", ids }));
worker.on("claimed", (jobs) => log({ e: "claimed", n: jobs.length, ids: jobs.map((j) => j.id) }));
worker.on("reaped", (jobs) => log({ e: "reaped", ids: jobs.map((j) => j.id) }));
worker.on("listener", (connected) => log({ e: "listener", ok: connected }));
// Database errors the worker survived, by where they happened (claim, heartbeat, outcome, start), for the ticks.
const warnings: Record<string, number> = {};
worker.on("warning", (_error, context) => {
  warnings[context] = (warnings[context] ?? 0) + 1;
});

let signals = 0;
const onSignal = (signal: string) => {
  signals++;
  log({ e: "signal", signal, n: signals });
  void worker.stop();
};
process.on("SIGTERM", () => onSignal("SIGTERM"));
process.on("SIGINT", () => onSignal("SIGINT"));

worker.on("stopped", () => {
  log({ e: "stopped", stats: worker.stats, warnings });
  void Promise.all([skipq.close(), effects?.end()]).finally(() => process.exit(0));
});

log({ e: "starting" });
await worker.start();
log({ e: "ready", clock: Date.now() });
// A heartbeat of the process itself: a gap in these lines means the event loop was blocked.
setInterval(() => log({ e: "tick", running: worker.running, stats: worker.stats, warnings }), 1000).unref();
