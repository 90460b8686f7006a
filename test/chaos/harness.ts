/**
 * The chaos suite's harness: a PostgreSQL server each test file owns (so it
 * may restart, halt or starve it), a fresh migrated schema per test, worker
 * child processes, and the figures each test publishes to results.json.
 *
 * Invariants: every child process and server a test starts is stopped in its
 * afterAll/afterEach, whatever the test's result; waits poll a condition
 * (until()), never a fixed sleep standing in for synchronisation.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";
import { parseConnectionString } from "../../src/db/connectionString.js";
import { createPool } from "../../src/db/pool.js";
import { EmbeddedPostgres } from "../../src/embedded/embeddedPostgres.js";
import { Skipq, type SkipqOptions, silentLogger } from "../../src/index.js";
import { until as pollUntil } from "../until.js";
import { type ChildConfig, type LedgerEntry, readLedger } from "./ledger.js";

const here = path.dirname(fileURLToPath(import.meta.url));
export const RESULTS_DIR = path.join(here, ".results");

/**
 * The configuration the figures are measured with (short, so recovery tests are fast). The leader
 * lease is scaled with the job lease (production defaults: 30 s leases, a 15 s leader lease): only
 * the leader reaps, so a killed leader delays every reclaim by up to its leader lease.
 */
export const CHAOS_WORKER = {
  lockTimeout: "2s",
  heartbeatInterval: "500ms",
  reaperInterval: "200ms",
  pollInterval: "200ms",
  shutdownTimeout: "10s",
  abortGrace: "1s",
  maintenance: { leaderLease: "2s" },
} as const;

/**
 * Added to every timing bar (recovery, shutdown, reconnect): the machines CI runs on are shared
 * and loaded, and a bar a scheduler hiccup can break is a flaky test. The figures report the
 * real times; CHAOS_SLACK_MS=0 holds the suite to the matrix's bars exactly.
 */
export const SLACK_MS = Number(process.env.CHAOS_SLACK_MS ?? 5000);

export async function startServer(
  settings: Record<string, string> = {},
  env: Record<string, string> = {},
): Promise<EmbeddedPostgres> {
  const server = new EmbeddedPostgres({ settings: { fsync: "off", synchronous_commit: "off", ...settings }, env });
  await server.start();
  return server;
}

export interface ChaosQueue {
  url: string;
  skipq: Skipq;
  schema: string;
  db: pg.Pool;
  /** A fresh ledger directory for this queue's worker processes. */
  ledgerDir: string;
  cleanup(): Promise<void>;
}

let counter = 0;
export async function chaosQueue(url: string, label: string, options: SkipqOptions = {}): Promise<ChaosQueue> {
  const schema = `c_${label.toLowerCase().replace(/[^a-z0-9]+/g, "_")}_${process.pid}_${counter++}`;
  const skipq = new Skipq({ connectionString: url, logger: silentLogger, ...options, schema });
  await skipq.migrate();
  // A host list (the fleet's failover rows) needs skipq's own client to find the primary; one host, pg's.
  const db = parseConnectionString(url).managed
    ? createPool(url, 10, silentLogger, "chaos-test")
    : new pg.Pool({ connectionString: url, max: 10 });
  db.on("error", () => undefined);
  await db.query(`CREATE TABLE "${schema}".effects (job_id bigint PRIMARY KEY, lease bigint, n int DEFAULT 1)`);
  const ledgerDir = mkdtempSync(path.join(os.tmpdir(), `skipq-ledger-${label}-`));
  return {
    url,
    skipq,
    schema,
    db,
    ledgerDir,
    async cleanup() {
      await skipq.close().catch(() => undefined);
      await db.end().catch(() => undefined);
      // CHAOS_KEEP_LEDGERS=1 keeps the ledgers and the workers' stderr for a post-mortem.
      if (!process.env.CHAOS_KEEP_LEDGERS) rmSync(ledgerDir, { recursive: true, force: true });
    },
  };
}

export interface ChildHandle {
  pid: number;
  proc: ChildProcess;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>;
  stderr(): string;
}

const children = new Set<ChildProcess>();

/** Starts a worker child; resolves once it logged "ready" (or at once with waitReady false). */
export interface SpawnOptions {
  /** Resolve once the worker logged "ready". Default true. */
  waitReady?: boolean;
  /** Extra node flags, e.g. --max-old-space-size (P10). */
  nodeArgs?: string[];
  /** Extra environment, e.g. LD_PRELOAD of libfaketime (T2–T5). */
  env?: Record<string, string>;
  /** A command the child runs under, e.g. `ip netns exec <ns>` (the fleet suite's hosts); it must exec node. */
  prefix?: string[];
}

export async function spawnWorker(
  q: ChaosQueue,
  config: Omit<ChildConfig, "url" | "schema" | "ledger"> & { url?: string },
  { waitReady = true, nodeArgs = [], env = {}, prefix = [] }: SpawnOptions = {},
): Promise<ChildHandle> {
  mkdirSync(q.ledgerDir, { recursive: true });
  const ledger = path.join(q.ledgerDir, `w-${Date.now()}-${Math.random().toString(36).slice(2, 8)}.jsonl`);
  const full: ChildConfig = { url: q.url, schema: q.schema, ledger, ...config };
  // stderr goes to a file beside the ledger: it outlives the child and the test, for post-mortems.
  const errFile = `${ledger}.stderr`;
  const [command, ...args] = [
    ...prefix,
    process.execPath,
    ...nodeArgs,
    "--import",
    "tsx",
    path.join(here, "worker-child.ts"),
  ];
  const proc = spawn(command as string, args, {
    env: { ...process.env, ...env, CHAOS_CONFIG: JSON.stringify(full) },
    stdio: ["ignore", "ignore", openSync(errFile, "a")],
  });
  children.add(proc);
  const err = () => readFileSync(errFile, "utf8").slice(0, 50_000);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null; at: number }>((resolve) =>
    proc.once("exit", (code, signal) => {
      children.delete(proc);
      resolve({ code, signal, at: Date.now() });
    }),
  );
  const handle: ChildHandle = { pid: proc.pid ?? -1, proc, exited, stderr: err };
  if (waitReady) {
    await until(
      `worker ${handle.pid} ready`,
      async () => {
        // A planned kill point reached before "ready" was logged (a claim can commit while start()
        // is still returning) proves the worker ran: the test expects that exit.
        const ran = readLedger(q.ledgerDir).some((e) => e.pid === handle.pid && (e.e === "ready" || e.e === "kill"));
        if (!ran && (proc.exitCode !== null || proc.signalCode !== null))
          throw new Error(`worker exited before ready (${proc.exitCode ?? proc.signalCode}):\n${err()}`);
        return ran;
      },
      60_000,
      50,
    );
  }
  return handle;
}

/** SIGKILLs every child process still running (afterEach/afterAll safety net). */
export function killAllChildren(): Promise<void> {
  return killProcesses(children);
}

/** SIGKILLs each of `procs` still running; resolves once they have exited. */
export async function killProcesses(procs: Iterable<ChildProcess>): Promise<void> {
  const waits: Promise<unknown>[] = [];
  for (const proc of procs) {
    if (proc.exitCode === null && proc.signalCode === null) {
      waits.push(new Promise((r) => proc.once("exit", r)));
      proc.kill("SIGKILL");
    }
  }
  await Promise.all(waits);
}

export function ledgerOf(q: ChaosQueue, pid?: number): LedgerEntry[] {
  const all = readLedger(q.ledgerDir);
  return pid === undefined ? all : all.filter((e) => e.pid === pid);
}

/** Inserts `count` chaos jobs with one INSERT … SELECT; returns nothing (ids are 1..count in a fresh schema). */
export async function enqueueChaos(q: ChaosQueue, count: number, spec: Record<string, unknown>, maxAttempts = 10) {
  await q.db.query(
    `INSERT INTO "${q.schema}".jobs (kind, payload, max_attempts) SELECT 'chaos', $1::jsonb, $3 FROM generate_series(1, $2)`,
    [JSON.stringify(spec), count, maxAttempts],
  );
}

export async function statusCounts(q: ChaosQueue): Promise<Record<string, number>> {
  const { rows } = await q.db.query(`SELECT status, count(*)::int AS n FROM "${q.schema}".all_jobs GROUP BY status`);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

/** `until` with the chaos suite's longer default wait (recoveries are measured in seconds). */
export function until<T>(what: string, check: () => T | Promise<T>, timeoutMs = 30_000, everyMs = 25) {
  return pollUntil(what, check, timeoutMs, everyMs);
}

export async function terminalCount(q: ChaosQueue): Promise<number> {
  const { rows } = await q.db.query(
    `SELECT count(*)::int AS n FROM "${q.schema}".all_jobs WHERE status IN ('completed', 'dead', 'cancelled')`,
  );
  return rows[0].n;
}

export interface ResultRow {
  /** Matrix row, e.g. "P1". */
  row: string;
  title: string;
  /** The configuration the figures were measured with. */
  config: string;
  lost: number;
  duplicates: number;
  duplicatesByReason?: Record<string, number>;
  staleRejected?: number;
  /** Recovery time, ms (the worst case the test saw), when the row measures one. */
  recoveryMs?: number;
  /** Anything else the row reports, already formatted. */
  other?: string;
  /** Rows measured run after run (the failover rows): each run's figures, oldest first (at most 10 kept). */
  runs?: Array<Record<string, number | string | boolean | null>>;
}

/**
 * Publishes a row's figures with `run` appended to the runs results.json already holds for the row (the last
 * 10 are kept), so repeated runs of a row build up its per-run table.
 */
export function recordRun(
  result: Omit<ResultRow, "runs">,
  run: Record<string, number | string | boolean | null>,
): void {
  let previous: ResultRow["runs"] = [];
  try {
    const file = JSON.parse(readFileSync(path.join(here, "results.json"), "utf8")) as { rows: ResultRow[] };
    previous = file.rows.find((r) => r.row === result.row)?.runs ?? [];
  } catch {
    /* no results yet */
  }
  recordResult({ ...result, runs: [...previous, { at: new Date().toISOString(), ...run }].slice(-10) });
}

/** Publishes a row's figures; the suite's teardown merges them into results.json. */
export function recordResult(result: ResultRow): void {
  mkdirSync(RESULTS_DIR, { recursive: true });
  writeFileSync(path.join(RESULTS_DIR, `${result.row}.json`), `${JSON.stringify(result, null, 2)}\n`);
}

export function maxOf(values: number[]): number | undefined {
  return values.length === 0 ? undefined : Math.max(...values);
}
