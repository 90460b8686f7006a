/**
 * What the demo prints: progress lines, the summary read back from the
 * database (counts, rates, pickup latency, dead jobs by error), and the next
 * steps for a newcomer.
 */

import { demoStatements } from "../../db/sql/demo.js";
import { Admin } from "../../ops/admin.js";
import type { Skipq } from "../../skipq.js";
import { table } from "../context.js";
import { shippedDoc } from "../docs.js";
import { CliError, describeTarget, EXIT_FAILURE } from "../errors.js";
import type { DemoOptions } from "./sample.js";

/** The comment that marks a schema as the demo's own, so a rerun may drop it. */
export const DEMO_MARK = "skipq demo schema: dropped and recreated by every `skipq demo` run";
export function percentile(sorted: number[], q: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] as number;
}

export function ms(value: number): string {
  if (Number.isNaN(value)) return "-";
  return value >= 10_000 ? `${(value / 1000).toFixed(1)} s` : `${n(Math.round(value))} ms`;
}

export const n = (value: number) => value.toLocaleString("en-US");

export function say(line = ""): void {
  process.stdout.write(`${line}\n`);
}

/** Runs the demo; resolves when it finished and everything it started is stopped. */
export interface RunFigures {
  seconds: number;
  peak: number;
  enqueueSeconds: number;
  failedAttempts: number;
  backlogWait: number[];
  probeLatency: number[];
  /** How long each probe's `enqueue` call took (its commit included): the floor under its pickup. */
  probeEnqueue: number[];
  sampleJobs: number;
  sampleDone: number;
  expectedDead: number;
}

export async function summary(skipq: Skipq, f: RunFigures): Promise<void> {
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
        [
          "  the enqueue call itself p50 / p99",
          `${ms(percentile(f.probeEnqueue, 0.5))} / ${ms(percentile(f.probeEnqueue, 0.99))} (its commit included: a job is announced when it commits, so its pickup cannot be faster)`,
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

export function nextSteps(options: DemoOptions, schema: string, url: string, embedded: boolean): void {
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
  say(`  Docs: ${shippedDoc("cli.md")} (every command), README.md (the library).`);
}
