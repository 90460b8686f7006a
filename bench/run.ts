/**
 * The bench: skipq against graphile-worker, pg-boss and BullMQ on the same
 * machine and the same PostgreSQL, in one command, written to bench/RESULTS.md.
 *
 *   npm run bench                      # default sizes (issue 4), under 20 minutes
 *   npm run bench -- --quick           # small sizes, for the CI smoke step (no timing assertions)
 *   npm run bench -- --batch [jobs,reps,concurrency,size] # registerBatch against register (bench/batch.ts)
 *   npm run bench -- --fleet [--quick] # section 13: hosts as namespaces, PgBouncer, added RTT (bench/fleet.ts; root)
 *   npm run bench -- --systems skipq,graphile-worker --scenarios 3,7 --out /tmp/r.md
 *
 * PostgreSQL: DATABASE_URL, else a throwaway embedded server (fsync on).
 * Node: the peers' current majors (graphile-worker 0.18, pg-boss 12) need Node ≥ 22, so under
 * an older node the harness re-runs itself under the pinned Node 24 (scripts/runtimes.mjs,
 * installed from npm into .ci-runtimes/ when missing) and says so; children inherit it.
 * Invariants: every scenario is time-bounded; a system that cannot run says
 * why instead of printing a number; every schema it creates is dropped.
 */
import { type ChildProcess, execFileSync, fork, spawn } from "node:child_process";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { EmbeddedPostgres } from "../src/embedded/embeddedPostgres.js";
import { runFloor } from "./floor.js";
import { type BenchEnv, median, percentile, type SystemAdapter, show, sleep, waitFor } from "./lib.js";
import { runOutboxBench } from "./outbox.js";

const here = path.dirname(fileURLToPath(import.meta.url));

/** The oldest Node major the peers' current releases run on (graphile-worker 0.18: ≥ 22.18). */
const PEERS_NODE_MAJOR = 22;
if (Number(process.versions.node.split(".")[0]) < PEERS_NODE_MAJOR) {
  // Before the adapters are imported: pg-boss 12 and graphile-worker 0.18 are not loaded under this node.
  const runtimes = path.join(here, "..", "scripts", "runtimes.mjs");
  execFileSync(process.execPath, [runtimes, "install", "node24"], { stdio: ["ignore", "ignore", "inherit"] });
  const node24 = execFileSync(process.execPath, [runtimes, "path", "node24"], { encoding: "utf8" }).trim();
  console.log(
    `[bench] Node ${process.version} is older than the peers need (graphile-worker 0.18, pg-boss 12: Node >= ${PEERS_NODE_MAJOR}): running the bench under ${path.relative(process.cwd(), node24)} (Node 24, scripts/runtimes.mjs)`,
  );
  const child = spawn(node24, [...process.execArgv, fileURLToPath(import.meta.url), ...process.argv.slice(2)], {
    stdio: "inherit",
    env: { ...process.env, SKIPQ_BENCH_LAUNCHED_BY: process.version },
  });
  // A terminal's Ctrl-C reaches both processes; a signal sent to this one alone is passed on.
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.on(signal, () => child.kill(signal));
  const code = await new Promise<number>((resolve) =>
    child.on("exit", (status, signal) => resolve(status ?? (signal ? 130 : 1))),
  );
  process.exit(code);
}
const { adapters } = await import("./adapters/index.js");
/** The host's load when the run began (the machine is shared: RESULTS.md prints it beside the load at the end). */
const loadAtStart = os.loadavg();

interface Args {
  quick: boolean;
  systems: string[];
  scenarios: number[];
  out: string;
  reps?: number;
  keep: boolean;
}

function parseArgs(argv: string[]): Args {
  const args: Args = {
    quick: false,
    systems: Object.keys(adapters),
    scenarios: [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16],
    out: path.join(here, "RESULTS.md"),
    keep: false,
  };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] as string;
    const value = () => {
      const v = arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : argv[++i];
      if (v === undefined) throw new Error(`${arg} needs a value`);
      return v;
    };
    if (arg === "--quick") args.quick = true;
    else if (arg.startsWith("--systems")) args.systems = value().split(",");
    else if (arg.startsWith("--scenarios")) args.scenarios = value().split(",").map(Number);
    else if (arg.startsWith("--out")) args.out = path.resolve(value());
    else if (arg.startsWith("--reps")) args.reps = Number(value());
    else if (arg === "--keep") args.keep = true;
    else if (arg === "--help" || arg === "-h") {
      console.log(
        "usage: bench/run.ts [--quick] [--systems a,b] [--scenarios 1,2,...] [--reps n] [--keep] [--out file.md]\n  --keep: keep the sections of scenarios not run from the existing output file",
      );
      process.exit(0);
    } else throw new Error(`unknown argument ${arg} (try --help)`);
  }
  for (const s of args.systems) {
    if (!adapters[s]) throw new Error(`unknown system "${s}"; known: ${Object.keys(adapters).join(", ")}`);
  }
  return args;
}

// Batch handlers against single-job handlers (issue 26): their own small drain, a table of rates and ratios.
if (process.argv.includes("--batch")) {
  const { runBatchBench } = await import("./batch.js");
  await runBatchBench(process.argv.slice(2).filter((a) => a !== "--batch"));
  process.exit(0);
}
// The fleet scenario (issue 17) has its own setup (namespaces, PgBouncer) and writes section 13 alone.
if (process.argv.includes("--fleet")) {
  const { runFleetBench } = await import("./fleet.js");
  await runFleetBench(process.argv.slice(2).filter((a) => a !== "--fleet"));
  process.exit(0);
}
const args = parseArgs(process.argv.slice(2));
// A peer library's stray rejection must not take the whole run down; it is logged and the run goes on.
process.on("unhandledRejection", (error) => log(`unhandled rejection (ignored): ${String(error)}`));
const sizes = args.quick
  ? {
      bulk: 2_000,
      singleMs: 1_000,
      drain: 2_000,
      reps: 1,
      drainLimitMs: 15_000,
      procs: 2,
      pickupJobs: 100,
      claimSamples: 100,
      bigPending: 2_000,
      bigCompleted: 18_000,
      rssJobs: 1_000,
      idle: 20_000,
      history: 50_000,
      retention: 20_000,
      outbox: { manyKeys: 2_000, oneKey: 500, floor: 2_000, reps: 1, limitMs: 10_000 },
      held: 2_000,
      heldLimitMs: 15_000,
      heldBig: 5_000,
      heldBigLimitMs: 15_000,
    }
  : {
      bulk: 100_000,
      singleMs: 5_000,
      drain: 100_000,
      reps: 3,
      drainLimitMs: 12_000,
      procs: 4,
      pickupJobs: 1_000,
      claimSamples: 1_000,
      bigPending: 200_000,
      bigCompleted: 1_800_000,
      rssJobs: 20_000,
      idle: 1_000_000,
      history: 5_000_000,
      retention: 1_000_000,
      outbox: { manyKeys: 20_000, oneKey: 5_000, floor: 20_000, reps: 3, limitMs: 15_000 },
      held: 200_000,
      heldLimitMs: 90_000,
      heldBig: 1_000_000,
      heldBigLimitMs: 180_000,
    };
if (args.reps !== undefined) {
  sizes.reps = args.reps;
  sizes.outbox.reps = args.reps;
}

type Cell = string;
interface Table {
  title: string;
  note: string;
  header: string[];
  rows: Cell[][];
  /** skipq's ratio to the best peer (> 1 means skipq is better), with the peer named. */
  ratio?: string;
}
const tables: Table[] = [];

const fmt = (n: number, digits = 0) =>
  Number.isFinite(n)
    ? n.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: digits })
    : "—";
const ms = (n: number) => fmt(n, n < 10 ? 2 : 1);

function log(message: string): void {
  console.log(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

/** skipq's figure against the best peer's, for "higher is better" or "lower is better" metrics. */
function ratioLine(results: Map<string, number>, higherIsBetter: boolean, what: string): string | undefined {
  const ours = results.get("skipq");
  if (ours === undefined || !Number.isFinite(ours)) return undefined;
  const bestOf = (names: (name: string) => boolean): [string, number] | undefined => {
    let best: [string, number] | undefined;
    for (const [name, value] of results) {
      if (name === "skipq" || !names(name) || !Number.isFinite(value)) continue;
      if (!best || (higherIsBetter ? value > best[1] : value < best[1])) best = [name, value];
    }
    return best;
  };
  const line = (label: string, best: [string, number]) =>
    `skipq vs ${label} (${best[0]}) on ${what}: **${(higherIsBetter ? ours / best[1] : best[1] / ours).toFixed(2)}×**`;
  const best = bestOf(() => true);
  if (!best) return undefined;
  // Several targets compare with the PostgreSQL queues only; BullMQ runs on Redis.
  const bestOnPostgres = bestOf((name) => !name.includes("Redis"));
  const lines = [line("best peer", best)];
  if (bestOnPostgres && bestOnPostgres[0] !== best[0]) lines.push(line("best PostgreSQL peer", bestOnPostgres));
  return `${lines.join("; ")} (> 1 means skipq is better)`;
}

async function main(): Promise<void> {
  const started = Date.now();
  let embedded: EmbeddedPostgres | undefined;
  let databaseUrl = process.env.DATABASE_URL ?? "";
  if (!databaseUrl) {
    embedded = new EmbeddedPostgres();
    databaseUrl = await embedded.start();
    log(`started embedded PostgreSQL ${embedded.version} at ${databaseUrl}`);
  }
  const env: BenchEnv = { databaseUrl, redisHost: "127.0.0.1", redisPort: 6379 };
  const tag = Math.random().toString(36).slice(2, 8);
  const admin = new pg.Pool({ connectionString: databaseUrl, max: 2 });
  admin.on("error", () => undefined);
  const server = {
    version: await show(admin, "server_version"),
    fsync: await show(admin, "fsync"),
    synchronousCommit: await show(admin, "synchronous_commit"),
  };
  log(`PostgreSQL ${server.version}, fsync=${server.fsync}, synchronous_commit=${server.synchronousCommit}`);

  const systems: Array<{ key: string; adapter: SystemAdapter; unavailable: string | null }> = [];
  for (const key of args.systems) {
    const adapter = (adapters[key] as (typeof adapters)[string])(env, tag);
    let unavailable: string | null;
    try {
      unavailable = await adapter.setup();
    } catch (error) {
      unavailable = `setup failed: ${error instanceof Error ? error.message : String(error)}`;
    }
    systems.push({ key, adapter, unavailable });
    log(`${adapter.name}: ${unavailable ?? "ready"}`);
  }
  const drainResults = new Map<number, number>(); // skipq drain jobs/s by concurrency, for the floor
  const drainPayloads = Array.from({ length: sizes.drain }, (_, i) => ({ i }));
  /**
   * `sizes.reps` drains of a queue of `sizes.drain` jobs, topped back up before each (a drain stopped at
   * the time bound leaves jobs behind); `once` runs one drain and says how many jobs it handled, in how
   * long, and whether it finished within the bound. Median jobs/s, every rep's rate, and whether any stopped early.
   */
  const drainReps = async (
    adapter: SystemAdapter,
    once: () => Promise<{ handled: number; ms: number; done: boolean }>,
  ): Promise<{ rate: number; rates: number[]; partial: boolean }> => {
    const rates: number[] = [];
    let partial = false;
    await adapter.reset();
    let missing = sizes.drain;
    for (let rep = 0; rep < sizes.reps; rep++) {
      await adapter.enqueueBulk(drainPayloads.slice(0, missing));
      await adapter.analyze();
      const { handled, ms, done } = await once();
      partial ||= !done;
      rates.push(handled / (ms / 1000));
      missing = Math.min(sizes.drain, handled);
    }
    await adapter.reset();
    return { rate: median(rates), rates, partial };
  };
  /** One drain by one in-process worker; with `batch`, claims of at most that many jobs and no prefetch. */
  const inProcessDrain = (adapter: SystemAdapter, concurrency: number, batch?: number) => async () => {
    let count = 0;
    const worker = await adapter.startWorker({ concurrency, batch, onJob: () => void count++ });
    // The clock starts once the worker is up; jobs it took during start-up are not counted.
    const before = count;
    const t0 = performance.now();
    const done = await waitFor(() => count >= sizes.drain, Date.now() + sizes.drainLimitMs);
    // Stopping writes the completions a worker still buffers: the clock runs until they are recorded.
    await worker.stop();
    return { handled: count - before, ms: performance.now() - t0, done };
  };
  /** skipq's drain for the floor: with `batch`, the floor's batch size; without, defaults (scenario 3 not run). */
  const skipqDrain = async (adapter: SystemAdapter, concurrency: number, batch?: number): Promise<number> => {
    const { rate } = await drainReps(adapter, inProcessDrain(adapter, concurrency, batch));
    log(`skipq drain c${concurrency}${batch ? ` claims of ${batch}` : ""} for the floor: ${fmt(rate)} jobs/s`);
    return rate;
  };

  /**
   * One-job claims by a worker at concurrency 1: each claim's round trip and the moment it returned
   * (performance.now()), the first 10 dropped (they prepare statements and warm caches); at most 15 s.
   * With `during`: once `sizes.claimSamples` are in, runs it, then samples as many again.
   */
  const sampleClaims = async (
    adapter: SystemAdapter,
    options: { during?: () => Promise<void>; noRetention?: boolean } = {},
  ): Promise<Array<{ at: number; ms: number }>> => {
    const samples: Array<{ at: number; ms: number }> = [];
    const worker = await adapter.startWorker({
      concurrency: 1,
      single: true,
      noRetention: options.noRetention,
      onJob: () => undefined,
      onClaim: (t) => samples.push({ at: performance.now(), ms: t }),
    });
    await waitFor(() => samples.length >= sizes.claimSamples + 10, Date.now() + 15_000);
    if (options.during) {
      await options.during();
      const after = samples.length;
      await waitFor(() => samples.length >= after + sizes.claimSamples, Date.now() + 15_000);
    }
    await worker.stop();
    return samples.slice(10);
  };
  const p = (values: number[], q: number) => (values.length ? ms(percentile(values, q)) : "—");
  const hotJobs = () => Array.from({ length: Math.max(2_000, sizes.claimSamples * 3) }, (_, i) => ({ i }));

  /** The systems the held-snapshot scenarios run (issue 22): skipq and the PostgreSQL peers it names. */
  const heldSystems = () => systems.filter((s) => ["skipq", "graphile-worker", "pg-boss"].includes(s.key));
  /**
   * Another session holding a REPEATABLE READ snapshot: BEGIN, then `SELECT 1` takes the snapshot
   * (its xmin pins every row version that committed after it). Resolves once pg_stat_activity shows
   * its backend_xmin; the returned function ends the transaction.
   */
  const holdSnapshot = async (): Promise<{ xmin: string; release: () => Promise<void> }> => {
    const client = new pg.Client({ connectionString: databaseUrl, application_name: "skipq-bench-held-snapshot" });
    client.on("error", () => undefined);
    await client.connect();
    await client.query("BEGIN ISOLATION LEVEL REPEATABLE READ");
    await client.query("SELECT 1");
    const { rows } = await admin.query<{ xmin: string | null }>(
      "SELECT backend_xmin::text AS xmin FROM pg_stat_activity WHERE pid = $1",
      [(client as unknown as { processID: number }).processID],
    );
    const release = async () => {
      await client.query("ROLLBACK").catch(() => undefined);
      await client.end().catch(() => undefined);
    };
    interrupted.push(release);
    if (!rows[0]?.xmin) {
      await release();
      throw new Error("the held session shows no backend_xmin: its snapshot is not held");
    }
    return { xmin: rows[0].xmin, release };
  };
  /** Fills the served queue with `n` runnable jobs: the system's SQL seed when it has one, else its bulk API in chunks. */
  const fillQueue = async (adapter: SystemAdapter, n: number) => {
    if (adapter.seedPending) await adapter.seedPending(n);
    else {
      for (let done = 0; done < n; done += 100_000) {
        await adapter.enqueueBulk(Array.from({ length: Math.min(100_000, n - done) }, (_, i) => ({ i: done + i })));
      }
    }
    await adapter.analyze();
  };
  /**
   * One drain of `jobs` by one in-process worker at concurrency 10 (library defaults otherwise), with the
   * moment each tenth of the jobs had started: jobs/s over the whole drain (until the worker has stopped
   * with every completion recorded) and per tenth (NaN for a tenth not reached within `limitMs`).
   */
  const drainByTenths = async (adapter: SystemAdapter, jobs: number, limitMs: number) => {
    let count = 0;
    const marks: number[] = [];
    const tenth = jobs / 10;
    const worker = await adapter.startWorker({
      concurrency: 10,
      onJob: () => {
        count++;
        if (count >= (marks.length + 1) * tenth) marks.push(performance.now());
      },
    });
    const before = count;
    const t0 = performance.now();
    const done = await waitFor(() => count >= jobs, Date.now() + limitMs, 5);
    await worker.stop();
    const took = performance.now() - t0;
    const tenths = Array.from({ length: 10 }, (_, k) => {
      const end = marks[k];
      const start = k === 0 ? t0 : marks[k - 1];
      return end === undefined || start === undefined ? Number.NaN : tenth / (Math.max(0.001, end - start) / 1000);
    });
    return { rate: (count - before) / (took / 1000), handled: count - before, seconds: took / 1000, done, tenths };
  };
  /** Jobs per bulk call in scenario 1 (issue 24's target: enqueueMany ≥ 2× addJobs at 5,000 a call). */
  const BULK_CALL = 5_000;
  const ratio = (a: number, b: number) => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}×` : "—");

  /** Drops what a running scenario created, should a signal stop the run in the middle of it. */
  const interrupted: Array<() => Promise<void>> = [];
  const scenarios: Record<number, () => Promise<void>> = {
    1: async () => {
      const results = new Map<string, number>();
      const rows: Cell[][] = [];
      const payloads = Array.from({ length: sizes.bulk }, (_, i) => ({ i }));
      const fastPaths = new Map<string, number>();
      for (const { adapter, unavailable } of systems) {
        if (unavailable) {
          rows.push([adapter.name, unavailable]);
          continue;
        }
        const paths: Array<[string, (p: object[]) => Promise<void>]> = [[adapter.name, (p) => adapter.enqueueBulk(p)]];
        if (adapter.enqueueBulkFast) paths.push([adapter.enqueueBulkFast.label, adapter.enqueueBulkFast.run]);
        for (const [name, enqueue] of paths) {
          const rates: number[] = [];
          for (let rep = 0; rep < sizes.reps; rep++) {
            await adapter.reset();
            const t0 = performance.now();
            // The issue's shape: 5,000 jobs a call (ids returned, except on skipq's COPY path), as an app sends them.
            for (let i = 0; i < payloads.length; i += BULK_CALL) await enqueue(payloads.slice(i, i + BULK_CALL));
            rates.push(sizes.bulk / ((performance.now() - t0) / 1000));
          }
          await adapter.reset();
          if (name === adapter.name) results.set(name, median(rates));
          else fastPaths.set(name, median(rates));
          rows.push([name, fmt(median(rates))]);
          log(`bulk enqueue ${name}: ${fmt(median(rates))} jobs/s`);
        }
      }
      const graphile = results.get("graphile-worker");
      const fastLines = [...fastPaths].map(
        ([name, rate]) =>
          `${name} vs graphile-worker's addJobs: **${graphile ? (rate / graphile).toFixed(2) : "n/a"}×**`,
      );
      tables.push({
        title: `1. Bulk enqueue of ${fmt(sizes.bulk)} jobs`,
        note: `Each system's bulk API, ${fmt(BULK_CALL)} jobs a call (ids returned), median of ${sizes.reps}; skipq also through its \`{ returning: false }\` path (one COPY a call, no ids back). Target: skipq ≥ 2× graphile-worker's addJobs.`,
        header: ["System", "jobs/s"],
        rows,
        ratio: [ratioLine(results, true, "jobs/s"), ...fastLines].filter(Boolean).join("; "),
      });
    },

    2: async () => {
      const results = new Map<string, number>();
      const rows: Cell[][] = [];
      for (const { adapter, unavailable } of systems) {
        if (unavailable) {
          rows.push([adapter.name, unavailable]);
          continue;
        }
        await adapter.reset();
        let count = 0;
        const deadline = performance.now() + sizes.singleMs;
        const t0 = performance.now();
        await Promise.all(
          Array.from({ length: 10 }, async () => {
            while (performance.now() < deadline) {
              await adapter.enqueueOne({ i: count });
              count++;
            }
          }),
        );
        const rate = count / ((performance.now() - t0) / 1000);
        await adapter.reset();
        results.set(adapter.name, rate);
        rows.push([adapter.name, fmt(rate)]);
        log(`single enqueues ${adapter.name}: ${fmt(rate)} jobs/s`);
      }
      tables.push({
        title: "2. Single enqueues from 10 concurrent producers",
        note: `One job per call, 10 async producers for ${sizes.singleMs / 1000} s.`,
        header: ["System", "jobs/s"],
        rows,
        ratio: ratioLine(results, true, "jobs/s"),
      });
    },

    3: async () => {
      for (const concurrency of [10, 50]) {
        const results = new Map<string, number>();
        const rows: Cell[][] = [];
        for (const { adapter, unavailable } of systems) {
          if (unavailable) {
            rows.push([adapter.name, unavailable, ""]);
            continue;
          }
          const { rate, rates, partial } = await drainReps(adapter, inProcessDrain(adapter, concurrency));
          results.set(adapter.name, rate);
          if (adapter.name === "skipq") drainResults.set(concurrency, rate);
          rows.push([
            adapter.name,
            fmt(rate),
            partial ? `stopped at the ${sizes.drainLimitMs / 1000} s bound; rate over the jobs done` : "",
          ]);
          log(`drain c${concurrency} ${adapter.name}: ${fmt(rate)} jobs/s (${rates.map((r) => fmt(r)).join(", ")})`);
        }
        tables.push({
          title: `3. Drain ${fmt(sizes.drain)} pre-enqueued no-op jobs, one process, concurrency ${concurrency}`,
          note: `Jobs per second from the moment the worker is up until it has stopped with every completion recorded; median of ${sizes.reps}.`,
          header: ["System", "jobs/s", "note"],
          rows,
          ratio: ratioLine(results, true, "jobs/s"),
        });
      }
    },

    4: async () => {
      const results = new Map<string, number>();
      const rows: Cell[][] = [];
      for (const { key, adapter, unavailable } of systems) {
        if (unavailable) {
          rows.push([adapter.name, unavailable, ""]);
          continue;
        }
        const { rate, rates, partial } = await drainReps(adapter, async () => {
          const children = await Promise.all(Array.from({ length: sizes.procs }, () => spawnChild(env, key, tag, 10)));
          const counts = children.map(() => 0);
          for (const [n, child] of children.entries()) {
            child.process.on("message", (m: { type: string; n: number }) => {
              if (m.type === "count") counts[n] = m.n;
            });
          }
          const total = () => counts.reduce((a, b) => a + b, 0);
          const t0 = performance.now();
          for (const child of children) child.process.send({ type: "go" });
          const done = await waitFor(() => total() >= sizes.drain, Date.now() + sizes.drainLimitMs);
          const stopped = await Promise.all(children.map((child) => child.stop()));
          return { handled: stopped.reduce((sum, r) => sum + r.n, 0), ms: performance.now() - t0, done };
        });
        results.set(adapter.name, rate);
        rows.push([
          adapter.name,
          fmt(rate),
          partial ? `stopped at the ${sizes.drainLimitMs / 1000} s bound; rate over the jobs done` : "",
        ]);
        log(
          `drain ${sizes.procs} processes ${adapter.name}: ${fmt(rate)} jobs/s (${rates.map((r) => fmt(r)).join(", ")})`,
        );
      }
      tables.push({
        title: `4. Drain ${fmt(sizes.drain)} jobs with ${sizes.procs} worker processes (concurrency 10 each)`,
        note: `Real child processes, started and connected before the clock starts and stopped after the drain with every completion recorded; median of ${sizes.reps}.`,
        header: ["System", "jobs/s", "note"],
        rows,
        ratio: ratioLine(results, true, "jobs/s"),
      });
    },

    5: async () => {
      const p50s = new Map<string, number>();
      const p99s = new Map<string, number>();
      const rows: Cell[][] = [];
      for (const { adapter, unavailable } of systems) {
        if (unavailable) {
          rows.push([adapter.name, unavailable, "", "", ""]);
          continue;
        }
        await adapter.reset();
        const latencies: number[] = [];
        const worker = await adapter.startWorker({
          concurrency: 10,
          onJob: (payload) => {
            if (typeof payload.t === "number") latencies.push(performance.now() - payload.t);
          },
        });
        await sleep(1000); // idle: listeners connected, pollers asleep
        const t0 = performance.now();
        const sends: Promise<void>[] = [];
        for (let k = 0; k < sizes.pickupJobs; k++) {
          const due = t0 + k * 5; // 200 jobs/s, open loop: a slow enqueue does not slow the rate
          const wait = due - performance.now();
          if (wait > 0) await sleep(wait);
          sends.push(adapter.enqueueOne({ t: performance.now() }));
        }
        await Promise.all(sends);
        await waitFor(() => latencies.length >= sizes.pickupJobs, Date.now() + 10_000);
        await worker.stop();
        await adapter.reset();
        const p50 = percentile(latencies, 50);
        const p95 = percentile(latencies, 95);
        const p99 = percentile(latencies, 99);
        p50s.set(adapter.name, p50);
        p99s.set(adapter.name, p99);
        rows.push([adapter.name, ms(p50), ms(p95), ms(p99), `${latencies.length}/${sizes.pickupJobs} picked up`]);
        log(`pickup ${adapter.name}: p50 ${ms(p50)} p95 ${ms(p95)} p99 ${ms(p99)} ms`);
      }
      tables.push({
        title: "5. Pickup latency (enqueue → handler start) at a steady 200 jobs/s, idle workers",
        note: `${fmt(sizes.pickupJobs)} single enqueues, one every 5 ms, to a worker (concurrency 10) idle for 1 s first.`,
        header: ["System", "p50 ms", "p95 ms", "p99 ms", "note"],
        rows,
        ratio: [ratioLine(p50s, false, "p50"), ratioLine(p99s, false, "p99")].filter(Boolean).join("; "),
      });
    },

    6: async () => {
      const rows: Cell[][] = [];
      // Per row (skipq's worker, skipq's protocol function, each peer's worker): big p95, parked p50.
      const bigP95 = new Map<string, number>();
      const parkedP50 = new Map<string, number>();
      const protocol = "skipq, protocol skipq_claim";
      const smallJobs = Math.max(2_000, sizes.claimSamples * 2);
      const cells = (xs: number[]) => `${p(xs, 50)} / ${p(xs, 95)} / ${p(xs, 99)}`;
      for (const { adapter, unavailable } of systems) {
        if (unavailable) {
          rows.push([adapter.name, unavailable, "", "", "", "", ""]);
          continue;
        }
        if (!adapter.seedBig) {
          rows.push([adapter.name, "n/a (not PostgreSQL)", "", "", "", "", ""]);
          continue;
        }
        const seedBig = adapter.seedBig.bind(adapter);
        const measure = async () => {
          const worker = (await sampleClaims(adapter)).map((x) => x.ms);
          const sql = adapter.sampleProtocolClaims
            ? await adapter.sampleProtocolClaims(sizes.claimSamples, Date.now() + 15_000)
            : undefined;
          return { worker, sql };
        };
        const seeded = async (what: string, seed: () => Promise<string>) => {
          await adapter.reset();
          const seedStart = performance.now();
          const result = await seed();
          log(`seeded ${adapter.name} (${what}): ${result} in ${fmt((performance.now() - seedStart) / 1000, 1)} s`);
          return result;
        };
        await seeded("small", async () => {
          await adapter.enqueueBulk(Array.from({ length: smallJobs }, (_, i) => ({ i })));
          await adapter.analyze();
          return `${smallJobs} pending`;
        });
        const smallWorker = (await sampleClaims(adapter)).map((x) => x.ms);
        // The protocol's own sample of the small table, from a fresh fill (the worker's claims left it short).
        let smallSql: number[] | undefined;
        if (adapter.sampleProtocolClaims) {
          await adapter.reset();
          await adapter.enqueueBulk(Array.from({ length: smallJobs }, (_, i) => ({ i })));
          await adapter.analyze();
          smallSql = await adapter.sampleProtocolClaims(sizes.claimSamples, Date.now() + 15_000);
        }
        const bigTable = await seeded("big", () => seedBig(sizes.bigPending, sizes.bigCompleted));
        const big = await measure();
        // Plan cost: as many rows again, but the terminal ones are runnable jobs parked in another queue/task.
        const parkedTable = await seeded("parked", async () => {
          const idle = await (adapter.seedIdle?.(sizes.bigCompleted) ?? Promise.resolve("n/a"));
          await seedBig(sizes.bigPending, 0);
          await adapter.analyze();
          return `${sizes.bigPending} pending in the served queue + ${idle}`;
        });
        const parked = adapter.seedIdle ? await measure() : undefined;
        await adapter.reset();
        const line = (name: string, small: number[], bigs: number[], parks: number[] | undefined) => {
          bigP95.set(name, percentile(bigs, 95));
          if (parks?.length) parkedP50.set(name, percentile(parks, 50));
          rows.push([
            name,
            cells(small),
            cells(bigs),
            ratio(percentile(bigs, 95), percentile(small, 95)),
            parks ? cells(parks) : "n/a",
            `${small.length} / ${bigs.length} / ${parks?.length ?? 0}`,
          ]);
          log(
            `claim ${name}: small p95 ${p(small, 95)}, big p95 ${p(bigs, 95)}, parked p50 ${parks ? p(parks, 50) : "n/a"} ms`,
          );
        };
        line(adapter.name, smallWorker, big.worker, parked?.worker);
        if (smallSql && big.sql) line(protocol, smallSql, big.sql, parked?.sql);
        rows.push([`${adapter.name}: tables`, "", bigTable, "", parkedTable, ""]);
      }
      const versus = (values: Map<string, number>, ours: string, peer?: string) => {
        const mine = values.get(ours);
        let best: [string, number] | undefined;
        for (const [name, value] of values) {
          if (name.startsWith("skipq") || !Number.isFinite(value) || (peer && name !== peer)) continue;
          if (!best || value < best[1]) best = [name, value];
        }
        return mine === undefined || !best ? undefined : `${ours} vs ${best[0]}: **${(best[1] / mine).toFixed(2)}×**`;
      };
      tables.push({
        title:
          "6. Claim latency, one job per claim: small table, the seeds' 2M-row table, and 2M rows mostly parked in another queue (plan cost)",
        note: `Client-side round trip of each one-job claim (the worker's claim statement on an instrumented pool: matched by its SKIP LOCKED, BullMQ's by its function name), worker at concurrency 1, first 10 claims dropped, at most 15 s each (pg-boss polls every 0.5 s with a one-job batch, so it gets few samples). skipq's protocol row: \`skipq_claim(ARRAY['default'], 1, …)\` called in a loop on one connection (a named statement), as a client in another language would. Small: ${fmt(smallJobs)} pending. Big (the seeds' table): ${fmt(sizes.bigCompleted)} finished + ${fmt(sizes.bigPending)} pending (graphile-worker and BullMQ as configured delete finished jobs; skipq keeps them in job_history). Parked (plan cost): ${fmt(sizes.bigPending)} pending in the served queue beside ${fmt(sizes.bigCompleted)} pending in a queue no worker reads (graphile-worker: a task no worker runs) and 1,800 in 18 others. Ratios: the best peer's figure over skipq's (> 1 means skipq is faster).`,
        header: [
          "System",
          "small p50 / p95 / p99 ms",
          "big p50 / p95 / p99 ms",
          "big/small p95",
          "parked p50 / p95 / p99 ms",
          "samples small / big / parked",
        ],
        rows,
        ratio: [
          versus(bigP95, "skipq") && `big-table p95: ${versus(bigP95, "skipq")}`,
          versus(bigP95, protocol) && `big-table p95: ${versus(bigP95, protocol)}`,
          versus(parkedP50, "skipq") && `parked p50: ${versus(parkedP50, "skipq")}`,
          versus(parkedP50, protocol) && `parked p50: ${versus(parkedP50, protocol)}`,
          versus(parkedP50, "skipq", "graphile-worker") &&
            `parked p50: ${versus(parkedP50, "skipq", "graphile-worker")}`,
          versus(parkedP50, protocol, "graphile-worker") &&
            `parked p50: ${versus(parkedP50, protocol, "graphile-worker")}`,
        ]
          .filter(Boolean)
          .join("; "),
      });
    },

    7: async () => {
      const rows: Cell[][] = [];
      const share = (ours: number | undefined, floor: number | undefined) =>
        ours === undefined || floor === undefined ? "—" : `**${fmt((100 * ours) / floor)}%**`;
      for (const batch of [10, 50]) {
        const floor = await runFloor({ databaseUrl, batch, jobs: sizes.drain, tag, log });
        const skipq = systems.find((s) => s.key === "skipq" && !s.unavailable);
        if (!drainResults.has(batch) && skipq) drainResults.set(batch, await skipqDrain(skipq.adapter, batch));
        const ours = drainResults.get(batch);
        const sameBatch = skipq ? await skipqDrain(skipq.adapter, batch, batch) : undefined;
        rows.push([
          String(batch),
          floor.jobsPerSecond === undefined ? floor.note : fmt(floor.jobsPerSecond),
          sameBatch === undefined ? "skipq not run" : fmt(sameBatch),
          share(sameBatch, floor.jobsPerSecond),
          ours === undefined ? "skipq not run" : fmt(ours),
          share(ours, floor.jobsPerSecond),
          floor.note,
        ]);
      }
      tables.push({
        title: "7. The floor: PostgreSQL's own rate for claim-batch + complete-batch (pgbench, no Node)",
        note: "The same claim statement as skipq's worker and its batched completion, each its own transaction, driven by pgbench with prepared statements. skipq's drain (one process, concurrency = batch) as a share of it: with claims of the same batch size (batchSize = batch, prefetch 0), and with its defaults (scenario 3; prefetch lets a claim take up to 1000 jobs).",
        header: [
          "batch",
          "pgbench jobs/s",
          "skipq, claims of batch",
          "share of floor",
          "skipq, defaults",
          "share of floor",
          "pgbench run",
        ],
        rows,
      });
    },

    8: async () => {
      const rows: Cell[][] = [];
      const rss = new Map<string, number>();
      const baseline = await spawnChild(env, "baseline", tag, 0);
      const base = await baseline.stop();
      rows.push(["node + tsx, no queue library (baseline)", fmt(base.maxRssKb / 1024, 1), ""]);
      const payloads = Array.from({ length: sizes.rssJobs }, (_, i) => ({ i }));
      for (const { key, adapter, unavailable } of systems) {
        if (unavailable) {
          rows.push([adapter.name, unavailable, ""]);
          continue;
        }
        await adapter.reset();
        await adapter.enqueueBulk(payloads);
        await adapter.analyze();
        const child = await spawnChild(env, key, tag, 100);
        let count = 0;
        child.process.on("message", (m: { type: string; n: number }) => {
          if (m.type === "count") count = m.n;
        });
        child.process.send({ type: "go" });
        const done = await waitFor(() => count >= sizes.rssJobs, Date.now() + 30_000, 20);
        const result = await child.stop();
        await adapter.reset();
        const mb = result.maxRssKb / 1024;
        rss.set(adapter.name, mb);
        rows.push([
          adapter.name,
          fmt(mb, 1),
          done ? `${fmt(result.n)} jobs` : `stopped at 30 s after ${fmt(result.n)}`,
        ]);
        log(`peak RSS ${adapter.name}: ${fmt(mb, 1)} MB`);
      }
      tables.push({
        title: "8. Worker peak RSS at concurrency 100",
        note: `A child process draining ${fmt(sizes.rssJobs)} jobs at concurrency 100; process.resourceUsage().maxRSS at the end. Every process runs under tsx (the baseline row is its cost).`,
        header: ["System", "peak RSS MB", "note"],
        rows,
        ratio: ratioLine(rss, false, "peak RSS"),
      });
    },

    9: async () => {
      const share = (x: number | undefined) => (x === undefined ? "—" : `**${fmt(100 * x)}%**`);
      const results = await runOutboxBench({
        databaseUrl,
        rabbitUrl: process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672",
        natsServers: process.env.NATS_SERVER ?? "127.0.0.1:4222",
        tag,
        sizes: sizes.outbox,
        log,
        onInterrupt: (drop) => interrupted.push(drop),
      });
      interrupted.length = 0;
      tables.push({
        title: "9. Outbox relay against the broker floor (peers have no outbox: the comparison is to the floor)",
        note: `The floor: the broker's own client publishing the same messages with the same confirmation (RabbitMQ publisher confirms of persistent messages to a durable queue, JetStream PubAck from a file stream, a 2xx from a local receiver in the bench process), pipelined: the best of its confirmation windows, ${fmt(sizes.outbox.floor)} messages. The relay: one \`OutboxRelay\` with default options, from a filled outbox (${fmt(sizes.outbox.manyKeys)} events over 100 keys, interleaved; ${fmt(sizes.outbox.oneKey)} on one key) to the last delivered mark, every event checked to be at the destination. Each rep measures the floor and then the relay, moments apart; shares are the median of each rep's ratio to its own floor (rates and floors move together on a shared machine), rates the median rate; ${sizes.outbox.reps} rep(s).`,
        header: [
          "Destination",
          "floor msgs/s",
          "relay, 100 keys",
          "share of floor",
          "relay, 1 key",
          "share of floor",
          "note",
        ],
        rows: results.map((r) => [
          r.target,
          r.floor === undefined ? r.floorNote : `${fmt(r.floor)} (${r.floorNote})`,
          r.manyKeys === undefined ? "—" : fmt(r.manyKeys),
          share(r.manyKeysShare),
          r.oneKey === undefined ? "—" : fmt(r.oneKey),
          share(r.oneKeyShare),
          r.note,
        ]),
      });
    },
  };

  scenarios[14] = async () => {
    const rows: Cell[][] = [];
    const summary: string[] = [];
    for (const { adapter, unavailable } of heldSystems()) {
      if (unavailable) {
        rows.push([adapter.name, unavailable]);
        continue;
      }
      const run = async (held: boolean) => {
        await adapter.reset();
        // The snapshot is taken before the enqueue: every job of the drain is newer than it.
        const snapshot = held ? await holdSnapshot() : undefined;
        try {
          await fillQueue(adapter, sizes.held);
          return { ...(await drainByTenths(adapter, sizes.held, sizes.heldLimitMs)), xmin: snapshot?.xmin };
        } finally {
          await snapshot?.release();
          await adapter.reset();
        }
      };
      const unheld = await run(false);
      const held = await run(true);
      const note = (r: typeof held) =>
        r.done ? "" : `stopped at the ${sizes.heldLimitMs / 1000} s bound after ${fmt(r.handled)} jobs`;
      const lastOf = (r: typeof held) => r.tenths[9] as number;
      rows.push(
        [`${adapter.name}, no snapshot held`, fmt(unheld.rate), fmt(lastOf(unheld)), "", "", note(unheld)],
        [
          `${adapter.name}, snapshot held (xmin ${held.xmin})`,
          fmt(held.rate),
          fmt(lastOf(held)),
          `**${ratio(held.rate, unheld.rate)}**`,
          `**${ratio(lastOf(held), lastOf(unheld))}**`,
          note(held),
        ],
      );
      summary.push(
        `${adapter.name}: held/unheld ${ratio(held.rate, unheld.rate)}, last tenth ${ratio(lastOf(held), lastOf(unheld))}`,
      );
      log(
        `held snapshot ${adapter.name}: ${fmt(unheld.rate)} → ${fmt(held.rate)} jobs/s (${ratio(held.rate, unheld.rate)}), last tenth ${fmt(lastOf(unheld))} → ${fmt(lastOf(held))} (${ratio(lastOf(held), lastOf(unheld))})`,
      );
    }
    tables.push({
      title: `14. Held snapshot: a ${fmt(sizes.held)}-job drain with and without another session's REPEATABLE READ snapshot`,
      note: `One process, concurrency 10, library defaults otherwise (peers: the settings above). Held: another session runs \`BEGIN ISOLATION LEVEL REPEATABLE READ; SELECT 1\` before the enqueue and keeps the transaction open until the drain has stopped (its backend_xmin is checked), so no row version the drain leaves behind can be pruned. Rate: from the moment the worker is up until it has stopped with every completion recorded; last tenth: the rate over the last ${fmt(sizes.held / 10)} jobs to start. One drain each, unheld first, moments apart. Targets (skipq): ≥ 0.9× overall, ≥ 0.8× over the last tenth.`,
      header: ["System", "jobs/s", "last tenth jobs/s", "held/unheld", "last tenth held/unheld", "note"],
      rows,
      ratio: summary.join("; "),
    });
  };

  scenarios[15] = async () => {
    const rows: Cell[][] = [];
    for (const { adapter, unavailable } of heldSystems()) {
      if (unavailable) {
        rows.push([adapter.name, unavailable]);
        continue;
      }
      await adapter.reset();
      const snapshot = await holdSnapshot();
      let result: Awaited<ReturnType<typeof drainByTenths>>;
      try {
        const fillStart = performance.now();
        await fillQueue(adapter, sizes.heldBig);
        log(`held 1M ${adapter.name}: filled in ${fmt((performance.now() - fillStart) / 1000, 1)} s`);
        result = await drainByTenths(adapter, sizes.heldBig, sizes.heldBigLimitMs);
      } finally {
        await snapshot.release();
        await adapter.reset();
      }
      const reached = result.tenths.filter(Number.isFinite).length;
      rows.push([
        adapter.name,
        fmt(result.rate),
        ...result.tenths.map((t) => fmt(t)),
        result.done
          ? `${fmt(result.seconds, 1)} s`
          : `stopped at the ${sizes.heldBigLimitMs / 1000} s bound after ${fmt(result.handled)} jobs (${reached} of 10 tenths)`,
      ]);
      log(`held 1M ${adapter.name}: ${fmt(result.rate)} jobs/s; tenths ${result.tenths.map((t) => fmt(t)).join(" ")}`);
    }
    tables.push({
      title: `15. A ${fmt(sizes.heldBig)}-job drain under a held snapshot: jobs/s per tenth of the jobs`,
      note: `As scenario 14's held run (snapshot taken before the enqueue, kept for the whole drain), one drain per system, bounded at ${sizes.heldBigLimitMs / 1000} s (a system stopped there is marked, with the tenths it reached). pg-boss's backlog is inserted by SQL (its \`insert()\` would take minutes); the others use their bulk API. Columns 1-10: jobs/s over each successive tenth of the jobs to start.`,
      header: ["System", "jobs/s", ...Array.from({ length: 10 }, (_, k) => `${k + 1}/10`), "drain"],
      rows,
    });
  };

  scenarios[10] = async () => {
    const rows: Cell[][] = [];
    const loadedP95 = new Map<string, number>();
    for (const { adapter, unavailable } of systems) {
      if (unavailable || !adapter.seedIdle) {
        rows.push([adapter.name, unavailable ?? "n/a (not PostgreSQL)", "", "", "", ""]);
        continue;
      }
      await adapter.reset();
      await adapter.enqueueBulk(hotJobs());
      await adapter.analyze();
      const empty = (await sampleClaims(adapter)).map((x) => x.ms);
      await adapter.reset();
      const seedStart = performance.now();
      const seeded = await adapter.seedIdle(sizes.idle);
      log(`seeded ${adapter.name}: ${seeded} in ${fmt((performance.now() - seedStart) / 1000, 1)} s`);
      await adapter.enqueueBulk(hotJobs());
      await adapter.analyze();
      const loaded = (await sampleClaims(adapter)).map((x) => x.ms);
      await adapter.reset();
      const ratio = percentile(loaded, 95) / percentile(empty, 95);
      loadedP95.set(adapter.name, percentile(loaded, 95));
      rows.push([
        adapter.name,
        `${p(empty, 50)} / ${p(empty, 95)}`,
        `${p(loaded, 50)} / ${p(loaded, 95)}`,
        Number.isFinite(ratio) ? `${ratio.toFixed(2)}×` : "—",
        seeded,
        `${empty.length} / ${loaded.length}`,
      ]);
      log(`multi-queue ${adapter.name}: p95 ${p(empty, 95)} → ${p(loaded, 95)} ms`);
    }
    tables.push({
      title: `10. Claims of one queue beside ${fmt(sizes.idle)} pending jobs in a queue no worker reads`,
      note: "One-job claims of the served queue (worker at concurrency 1, first 10 dropped), first with nothing else in the table, then with the backlog parked in another queue (graphile-worker has no queue filter for workers: its analogue is a task no worker runs). Target: skipq within 1.2× of its empty figure.",
      header: [
        "System",
        "empty p50 / p95 ms",
        "with the backlog p50 / p95 ms",
        "backlog/empty p95",
        "parked",
        "samples",
      ],
      rows,
      ratio: ratioLine(loadedP95, false, "p95 with the backlog"),
    });
  };

  scenarios[11] = async () => {
    const rows: Cell[][] = [];
    for (const { adapter, unavailable } of systems) {
      if (unavailable || !adapter.seedHistory) {
        rows.push([adapter.name, unavailable ?? "n/a: no history table of its own", "", "", "", ""]);
        continue;
      }
      const measure = async (history: number) => {
        await adapter.reset();
        if (history > 0) {
          const seedStart = performance.now();
          const seeded = await adapter.seedHistory?.(history);
          log(`seeded ${adapter.name}: ${seeded} in ${fmt((performance.now() - seedStart) / 1000, 1)} s`);
        }
        await adapter.enqueueBulk(hotJobs());
        await adapter.analyze();
        const claims = (await sampleClaims(adapter)).map((x) => x.ms);
        const rates: number[] = [];
        for (let rep = 0; rep < sizes.reps; rep++) {
          await adapter.enqueueBulk(drainPayloads);
          await adapter.analyze();
          const { handled, ms: took } = await inProcessDrain(adapter, 10)();
          rates.push(handled / (took / 1000));
        }
        return { claims, rate: median(rates), rates };
      };
      const none = await measure(0);
      const full = await measure(sizes.history);
      await adapter.reset();
      const row = (label: string, r: typeof none, base?: typeof none) => [
        `${adapter.name}, ${label}`,
        `${fmt(r.rate)} (${r.rates.map((x) => fmt(x)).join(", ")})`,
        base ? `${(r.rate / base.rate).toFixed(2)}×` : "",
        `${p(r.claims, 50)} / ${p(r.claims, 95)}`,
        base ? `${(percentile(r.claims, 95) / percentile(base.claims, 95)).toFixed(2)}×` : "",
        String(r.claims.length),
      ];
      rows.push(row("no history", none), row(`${fmt(sizes.history)} history rows`, full, none));
      log(
        `history ${adapter.name}: drain ${fmt(none.rate)} → ${fmt(full.rate)}, claim p95 ${p(none.claims, 95)} → ${p(full.claims, 95)}`,
      );
    }
    tables.push({
      title: `11. History growth: drain and claims with ${fmt(sizes.history)} finished jobs kept versus none`,
      note: `Drain of ${fmt(sizes.drain)} jobs, one process, concurrency 10, median of ${sizes.reps}; one-job claim round trips as in scenario 6. History rows finished within the last hour (retention keeps them). graphile-worker and BullMQ (as configured) delete finished jobs; pg-boss keeps them in its job table, measured in scenario 6. Target: within 1.1×.`,
      header: ["System", "drain jobs/s", "vs none", "claim p50 / p95 ms", "p95 vs none", "claim samples"],
      rows,
    });
  };

  scenarios[12] = async () => {
    const rows: Cell[][] = [];
    for (const { adapter, unavailable } of systems) {
      if (unavailable || !adapter.seedHistory || !adapter.dropHistory) {
        rows.push([adapter.name, unavailable ?? "n/a: no dated history to drop", "", "", "", ""]);
        continue;
      }
      await adapter.reset();
      const seedStart = performance.now();
      const seeded = await adapter.seedHistory(sizes.retention, { daysAgo: 3 });
      log(`seeded ${adapter.name}: ${seeded} in ${fmt((performance.now() - seedStart) / 1000, 1)} s`);
      await adapter.enqueueBulk(hotJobs());
      await adapter.analyze();
      let window: [number, number] = [0, 0];
      let dropped = 0;
      const samples = await sampleClaims(adapter, {
        noRetention: true,
        during: async () => {
          const t0 = performance.now();
          dropped = await (adapter.dropHistory as (olderThanMs: number) => Promise<number>)(2 * 86_400_000);
          window = [t0, performance.now()];
        },
      });
      await adapter.reset();
      const before = samples.filter((x) => x.at < window[0]).map((x) => x.ms);
      // A claim overlaps the drop when it returned after the drop began and started before it ended.
      const during = samples.filter((x) => x.at >= window[0] && x.at - x.ms <= window[1]).map((x) => x.ms);
      const after = samples.filter((x) => x.at - x.ms > window[1]).map((x) => x.ms);
      rows.push([
        adapter.name,
        `${fmt(dropped)} rows in ${ms(window[1] - window[0])} ms`,
        `${p(before, 50)} / ${p(before, 99)}`,
        during.length
          ? `${p(during, 50)} / ${ms(Math.max(...during))} (${during.length} claims)`
          : "no claim overlapped",
        `${p(after, 50)} / ${p(after, 99)}`,
        `${before.length} / ${during.length} / ${after.length}`,
      ]);
      log(`retention ${adapter.name}: dropped ${dropped} in ${ms(window[1] - window[0])} ms`);
    }
    tables.push({
      title: `12. Retention: dropping a day of ${fmt(sizes.retention)} finished jobs while a worker claims`,
      note: "A worker at concurrency 1 (its own retention off) claims one job at a time; after its first claims, retention drops the day's history (`Admin.prune`: a DROP of the day's partition). Claim round trips before, overlapping, and after the drop. Target: claims unaffected (within 1.2×).",
      header: [
        "System",
        "drop",
        "claims before p50 / p99 ms",
        "claims during p50 / max ms",
        "claims after p50 / p99 ms",
        "samples",
      ],
      rows,
    });
  };

  scenarios[16] = async () => {
    // skipq only (fairness is skipq's setQueueLimits option): bench/fair.ts in its own process, its table kept.
    const { execFile } = await import("node:child_process");
    const { promisify } = await import("node:util");
    const { stdout } = await promisify(execFile)(
      process.execPath,
      ["--import", "tsx", path.join(here, "fair.ts"), ...(args.quick ? ["--quick"] : [])],
      { env: { ...process.env, DATABASE_URL: databaseUrl }, maxBuffer: 1 << 24 },
    );
    const lines = stdout.split("\n");
    const rows = lines
      .filter((l) => l.startsWith("| ") && !l.startsWith("| measure") && !l.startsWith("| ---"))
      .map((l) => l.slice(2, -2).split(" | "));
    tables.push({
      title: "16. Fair claims across tenants (skipq)",
      note: `${lines[0] ?? ""}. The second column is the same queue with the same limits and no fairness (the limited claim). bench/fair.ts; docs/flow-control.md, "Fairness".`,
      header: ["measure", "fairness", "without fairness (same limits)", "target"],
      rows,
    });
  };

  const cleanup = async () => {
    // A scenario interrupted by a signal leaves its own resources (scenario 9: a schema, a queue, a stream).
    for (const drop of interrupted.splice(0)) await drop().catch(() => undefined);
    for (const { adapter } of systems) {
      await adapter.teardown().catch((error) => log(`teardown ${adapter.name}: ${error}`));
      await adapter.close().catch(() => undefined);
    }
    await admin.end().catch(() => undefined);
    await embedded?.stop();
  };
  for (const signal of ["SIGINT", "SIGTERM"] as const) {
    process.once(signal, () => {
      log(`${signal}: dropping the bench schemas and queues, then exiting`);
      void cleanup().finally(() => process.exit(130));
    });
  }
  try {
    for (const n of args.scenarios) {
      const scenario = scenarios[n];
      if (!scenario) throw new Error(`no scenario ${n} (1-12, 14-16; 13 is --fleet)`);
      log(`scenario ${n}`);
      await scenario();
      // Written after every scenario, so a failure later keeps what was measured.
      writeResults(server, systems, (Date.now() - started) / 60_000);
    }
  } finally {
    await cleanup();
  }

  log(`wrote ${args.out} (${((Date.now() - started) / 60_000).toFixed(1)} min)`);
}

/** Writes the output file; with --keep, sections of scenarios not run now are kept from the existing file. */
function writeResults(
  server: { version: string; fsync: string; synchronousCommit: string },
  systems: Array<{ adapter: SystemAdapter; unavailable: string | null }>,
  minutes: number,
): void {
  let text = render(server, systems, minutes);
  // Section 13 comes from `--fleet` alone (bench/fleet.ts): kept as it is.
  const fleet = existsSync(args.out)
    ? readFileSync(args.out, "utf8")
        .split(/\n(?=## \d+\. )/)
        .find((part) => part.startsWith("## 13. "))
    : undefined;
  if (fleet && !args.keep) text = `${text.trimEnd()}\n\n${fleet.trimEnd()}\n`;
  if (args.keep && existsSync(args.out)) {
    // A scenario may write several tables under one number (3: c10 and c50): a section is all of them.
    const sections = new Map<number, string>();
    const add = (part: string) => {
      const n = Number(/^## (\d+)\./.exec(part)?.[1]);
      const before = sections.get(n);
      sections.set(n, before ? `${before}\n\n${part.trimEnd()}` : part.trimEnd());
    };
    for (const part of readFileSync(args.out, "utf8")
      .split(/\n(?=## \d+\. )/)
      .slice(1))
      add(part);
    for (const table of tables) sections.delete(Number(/^(\d+)\./.exec(table.title)?.[1]));
    const fresh = text.split(/\n(?=## \d+\. )/);
    for (const part of fresh.slice(1)) add(part);
    const head = `${(fresh[0] ?? "").trimEnd()}\n\nSections ${[...sections.keys()]
      .filter((n) => !args.scenarios.includes(n))
      .join(", ")} are kept from an earlier run (\`--keep\`); the header above describes this run.\n`;
    text = `${[head, ...[...sections.entries()].sort((a, b) => a[0] - b[0]).map(([, v]) => v)].join("\n\n")}\n`;
  }
  writeFileSync(args.out, text);
}

interface Child {
  process: ChildProcess;
  stop(): Promise<{ n: number; maxRssKb: number }>;
}

/** Forks bench/child.ts under tsx and waits until it is connected and ready. */
async function spawnChild(env: BenchEnv, system: string, tag: string, concurrency: number): Promise<Child> {
  const child = fork(path.join(here, "child.ts"), [system, tag, String(concurrency)], {
    execArgv: ["--import", "tsx"],
    env: { ...process.env, SKIPQ_BENCH_ENV: JSON.stringify(env) },
    stdio: ["ignore", "inherit", "inherit", "ipc"],
  });
  await new Promise<void>((resolve, reject) => {
    child.on("message", (m: { type: string }) => {
      if (m.type === "ready") resolve();
    });
    child.once("exit", (code) => reject(new Error(`bench child ${system} exited with ${code} before ready`)));
  });
  return {
    process: child,
    stop: () =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => {
          child.kill("SIGKILL");
          reject(new Error(`bench child ${system} did not stop within 30 s`));
        }, 30_000);
        child.on("message", (m: { type: string; n: number; maxRssKb: number }) => {
          if (m.type === "stopped") {
            clearTimeout(timer);
            resolve({ n: m.n, maxRssKb: m.maxRssKb });
          }
        });
        child.send({ type: "stop" });
      }),
  };
}

function render(
  server: { version: string; fsync: string; synchronousCommit: string },
  systems: Array<{ adapter: SystemAdapter; unavailable: string | null }>,
  minutes: number,
): string {
  const cpu = os.cpus()[0]?.model ?? "?";
  const lines = [
    "# skipq benchmark results",
    "",
    `Generated by \`npm run bench${args.quick ? " -- --quick" : ""}\` on ${new Date().toISOString().slice(0, 16).replace("T", " ")} UTC in ${minutes.toFixed(1)} min.`,
    "",
    `- PostgreSQL ${server.version}, fsync=${server.fsync}, synchronous_commit=${server.synchronousCommit}`,
    `- Node ${process.version}${process.env.SKIPQ_BENCH_LAUNCHED_BY ? ` (Node 24 from npm, scripts/runtimes.mjs: \`npm run bench\` re-ran itself under it because the machine's node, ${process.env.SKIPQ_BENCH_LAUNCHED_BY}, is older than the peers need)` : ""}, ${os.cpus().length} × ${cpu}, load average (1 / 5 / 15 min) at the start ${loadAtStart.map((l) => l.toFixed(1)).join(" / ")}, at the end ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(" / ")} (a shared machine: compare ratios from one run, not absolute numbers)`,
    `- Sizes: ${args.quick ? "--quick (smoke sizes; figures are not meaningful)" : "the issue's defaults"}`,
    "",
    "Settings per system (each one's documented fastest):",
    "",
    ...systems.map(
      ({ adapter, unavailable }) => `- **${adapter.name}** ${adapter.version}: ${unavailable ?? adapter.settings}`,
    ),
    "",
    "The same for every system: after a bulk enqueue, `VACUUM ANALYZE` of its table (a running queue has",
    "statistics; a fresh table's claim plan can be far off), and a drain's clock stops once the workers",
    "have stopped with every completion recorded, not at the last handler call.",
    "",
  ];
  // In scenario order, whatever order they ran in (a run may put the long ones first: --scenarios 14,15,6,…).
  const number = (t: Table) => Number(/^(\d+)\./.exec(t.title)?.[1] ?? 0);
  for (const table of [...tables].sort((a, b) => number(a) - number(b))) {
    lines.push(`## ${table.title}`, "", table.note, "");
    const header = table.header.filter((h, i) => h !== "" || table.rows.some((r) => r[i]));
    const width = header.length;
    lines.push(`| ${header.join(" | ")} |`, `|${" --- |".repeat(width)}`);
    for (const row of table.rows) {
      const cells = [...row.slice(0, width)];
      while (cells.length < width) cells.push("");
      lines.push(`| ${cells.join(" | ")} |`);
    }
    lines.push("");
    if (table.ratio) lines.push(table.ratio, "");
  }
  return `${lines.join("\n")}\n`;
}

await main();
// Some peer libraries keep timers alive after close; the run is over.
process.exit(0);
