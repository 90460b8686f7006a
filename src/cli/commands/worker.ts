/**
 * `skipq worker --tasks <module>`: runs a worker with the handlers a module
 * exports until SIGTERM or SIGINT. The first signal stops gracefully (no new
 * claims, running jobs get --shutdown-timeout to finish, then their signals
 * abort and unfinished jobs go back to pending); a second signal skips to that
 * hard stop. Invariant: the tasks module and every flag are checked before the
 * worker connects, so bad input claims nothing.
 */
import type { Command } from "commander";
import { defaultLogger } from "../../core/logger.js";
import { defaultErrorRedactor } from "../../core/secrets.js";
import { createMetrics } from "../../ops/metrics.js";
import { type MetricsServer, serveMetrics } from "../../ops/metricsServer.js";
import { Skipq } from "../../skipq.js";
import type { WorkerOptions } from "../../worker/worker.js";
import { asCliError, checkSchema, requireDatabase, resolveConfig } from "../context.js";
import { schedulerFromTasks } from "../cron.js";
import { describeTarget } from "../errors.js";
import { collect, parseDuration, parseInteger, parseName } from "../parse.js";
import { loadTasksModule } from "../tasks.js";
import { printError } from "../terminal.js";

interface WorkerFlags {
  tasks: string;
  queue?: string[];
  concurrency: string;
  lockTimeout: string;
  shutdownTimeout: string;
  pollInterval: string;
  jobTimeout?: string;
  metricsPort?: string;
  metricsHost: string;
  quiet?: boolean;
}

/**
 * `npx skipq worker` and `npm run` scripts start this process under `sh -c`, and npm passes SIGTERM to
 * that shell alone, which dies of it without passing it on: the worker would live on, orphaned, until
 * SIGKILL. Started by npm (npm_command is set), a parent that goes away is taken as the SIGTERM that
 * never arrived. Not otherwise: `nohup skipq worker &` must outlive its shell. Checked every 500 ms.
 */
function watchForOrphaning(onOrphaned: () => void): NodeJS.Timeout | undefined {
  if (process.env.npm_command === undefined) return undefined;
  const parent = process.ppid;
  const timer = setInterval(() => {
    if (process.ppid === parent) return;
    clearInterval(timer);
    onOrphaned();
  }, 500);
  timer.unref();
  return timer;
}

function log(line: string): void {
  printError(`skipq worker: ${line}\n`);
}

export function workerCommand(program: Command): void {
  program
    .command("worker")
    .description("run jobs with the handlers a tasks module exports, until SIGTERM/SIGINT")
    .requiredOption(
      "-t, --tasks <module>",
      "a .js/.mjs (or .ts, with tsx) file whose default export maps kinds to handlers",
    )
    .option("-q, --queue <name>", 'queue to take jobs from; repeatable (default "default")', collect)
    .option("-c, --concurrency <n>", "handlers running at once", "10")
    .option("--lock-timeout <duration>", "lease per claim and heartbeat; expired leases are reaped", "30s")
    .option("--shutdown-timeout <duration>", "on stop, how long running jobs may finish before they are aborted", "10s")
    .option("--poll-interval <duration>", "longest wait between claims when no notification arrives", "1s")
    .option("--job-timeout <duration>", "per-job time limit (the handler's signal aborts and the job retries)")
    .option("--metrics-port <n>", "serve Prometheus metrics (GET /metrics) on this port; 0 picks a free one")
    .option("--metrics-host <address>", "address for --metrics-port; 0.0.0.0 for a remote Prometheus", "127.0.0.1")
    .option("--quiet", "do not log failed jobs")
    .addHelpText(
      "after",
      `
The tasks module:
  // tasks.mjs
  export default {
    "send-email": async (payload, ctx) => { await mailer.send(payload.to, { signal: ctx.signal }); },
  };
  // optional: periodic jobs, enqueued once per tick however many workers run (docs/scheduling.md)
  export const cron = [{ expression: "0 * * * *", kind: "hourly-report", options: { timezone: "UTC" } }];

Examples:
  $ skipq worker --tasks ./tasks.mjs
  $ skipq worker --tasks ./tasks.ts --queue emails --queue reports --concurrency 50
  $ skipq worker --tasks ./tasks.mjs --metrics-port 9464 --metrics-host 0.0.0.0

Stopping: SIGTERM or Ctrl-C stops gracefully; a second one stops at once
(unfinished jobs go back to pending without using an attempt).`,
    )
    .action(async (flags: WorkerFlags, command: Command) => {
      const config = resolveConfig(command);
      const options: WorkerOptions = {
        queues: flags.queue && flags.queue.length > 0 ? flags.queue.map((q) => parseName("queue", q)) : ["default"],
        concurrency: parseInteger("--concurrency", flags.concurrency, 1, 10_000),
        lockTimeout: parseDuration("--lock-timeout", flags.lockTimeout, { allowZero: false }),
        shutdownTimeout: parseDuration("--shutdown-timeout", flags.shutdownTimeout),
        pollInterval: parseDuration("--poll-interval", flags.pollInterval, { allowZero: false }),
      };
      if (flags.jobTimeout !== undefined)
        options.jobTimeout = parseDuration("--job-timeout", flags.jobTimeout, { allowZero: false });
      const metricsPort =
        flags.metricsPort === undefined ? undefined : parseInteger("--metrics-port", flags.metricsPort, 0, 65_535);
      const connectionString = requireDatabase(config);
      const { handlers, cron } = await loadTasksModule(flags.tasks);

      const skipq = new Skipq({ connectionString, schema: config.schema, poolSize: 2, logger: defaultLogger });
      // The module's `cron` export, checked before connecting; enqueued once per tick across all workers.
      const scheduler = schedulerFromTasks(skipq, cron, flags.tasks);
      let stopped: Promise<void> | undefined;
      let signals = 0;
      const onSignal = (signal: NodeJS.Signals) => {
        signals++;
        if (signals === 1) {
          log(`${signal}: finishing running jobs (up to ${flags.shutdownTimeout}); send it again to stop at once`);
        } else {
          log(`${signal} again: stopping now; unfinished jobs go back to pending`);
        }
        void worker?.stop();
      };
      let worker: ReturnType<Skipq["worker"]> | undefined;
      let orphanWatch: NodeJS.Timeout | undefined;
      let metricsServer: MetricsServer | undefined;
      try {
        await checkSchema(skipq);
        // The maintainer runs the module's cron passes with the worker (and reaps and prunes as leader).
        worker = skipq.worker(scheduler ? { ...options, scheduler } : options);
        for (const [kind, handler] of handlers) worker.register(kind, handler);
        const active = worker;
        stopped = new Promise((resolve) => active.once("stopped", () => resolve()));
        if (!flags.quiet) {
          active.on("jobEnd", (job, outcome, _ms, error) => {
            if (outcome !== "retry" && outcome !== "dead") return;
            // Printed as stored: the job's secrets redacted (the worker's default redactError).
            const reason = defaultErrorRedactor(error instanceof Error ? error.message : String(error), job);
            const what =
              outcome === "dead"
                ? `is dead after attempt ${job.attempt}/${job.maxAttempts}`
                : `failed attempt ${job.attempt}/${job.maxAttempts}, will retry`;
            log(`job ${job.id} (${job.kind}) ${what}: ${reason.split("\n")[0]}`);
          });
        }
        if (metricsPort !== undefined) {
          // Counters from this worker; queue depth and health read from the database on scrape (cached 5 s).
          const metrics = createMetrics({ skipq });
          metrics.observe(active);
          metricsServer = await serveMetrics({ metrics, port: metricsPort, host: flags.metricsHost });
          log(`metrics at ${metricsServer.url}`);
        }
        await active.start();
        process.on("SIGTERM", onSignal);
        process.on("SIGINT", onSignal);
        orphanWatch = watchForOrphaning(() => {
          log("the npm/npx process that started this worker is gone (it passes SIGTERM only to its shell)");
          onSignal("SIGTERM");
        });
        log(
          `${active.id} running ${[...handlers.keys()].join(", ")} from queue${options.queues?.length === 1 ? "" : "s"} ${options.queues?.join(", ")} (concurrency ${active.concurrency}); schema "${config.schema}" at ${describeTarget(connectionString)}; ready`,
        );
        await stopped;
        const s = active.stats;
        log(`stopped: ${s.completed} completed, ${s.failed} failed attempts, ${s.released} released to pending`);
      } catch (error) {
        await worker?.stop().catch(() => undefined);
        throw asCliError(error, config);
      } finally {
        clearInterval(orphanWatch);
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
        await metricsServer?.close();
        await skipq.close().catch(() => undefined);
      }
    });
}
