/**
 * The bench's one small interface: every queue system is an adapter with the
 * same few verbs (enqueue one, enqueue many, run a worker, seed a big table),
 * so adding a system is one file under bench/adapters/. Plus the shared
 * helpers: timing, percentiles, a query-timing pg pool, child-process wiring.
 * Invariant: a system that cannot run (e.g. no Redis) reports why; the bench
 * never prints a number it did not measure.
 */
import { readFileSync } from "node:fs";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import pg from "pg";

export interface BenchEnv {
  databaseUrl: string;
  redisHost: string;
  redisPort: number;
}

export interface WorkerHandle {
  /** Stops the worker; outcomes it buffered are written first. */
  stop(): Promise<void>;
}

export interface StartOptions {
  concurrency: number;
  /** Called at the start of every job's handler (no-op work). */
  onJob: (payload: { t?: number; i?: number }) => void;
  /** Called with the round-trip time (ms) of every claim statement, when the adapter can time them. */
  onClaim?: (ms: number) => void;
  /** One job per claim (claim latency scenario). */
  single?: boolean;
  /** Claims of at most this many jobs and no claiming ahead (the floor's batch size); skipq only. */
  batch?: number;
  /** No retention from this worker's maintenance (the retention scenario drops history itself). */
  noRetention?: boolean;
}

export interface SystemAdapter {
  readonly name: string;
  /** The library's installed version (its package.json), printed with the results. */
  readonly version: string;
  /** The settings used, printed with the results (each system's documented fastest). */
  readonly settings: string;
  /** Creates/migrates its schema or queue. Resolves to null when usable, else the reason it is not (e.g. "no Redis"). */
  setup(): Promise<string | null>;
  /** Deletes every job (between repetitions). */
  reset(): Promise<void>;
  enqueueBulk(payloads: object[]): Promise<void>;
  /** A second bulk path without ids back (skipq's `{ returning: false }` COPY), shown as its own row. */
  enqueueBulkFast?: { label: string; run(payloads: object[]): Promise<void> };
  /**
   * Brings the planner's statistics up to date after a bulk enqueue (VACUUM ANALYZE), as autovacuum
   * would in a queue that has been running. Without it a fresh table's claim plan can be far off:
   * graphile-worker drained 100k jobs at ~9k/s instead of ~37k/s here.
   */
  analyze(): Promise<void>;
  enqueueOne(payload: object): Promise<void>;
  startWorker(options: StartOptions): Promise<WorkerHandle>;
  /** Fills the table like the seeds' big one: `completed` terminal rows and `pending` runnable ones. Absent: n/a. */
  seedBig?(pending: number, completed: number): Promise<string>;
  /**
   * Adds `n` runnable jobs of the served queue by plain SQL, for systems whose bulk API is too slow
   * to fill a 1,000,000-job backlog within the run (pg-boss); absent: the bench uses enqueueBulk.
   */
  seedPending?(n: number): Promise<void>;
  /**
   * One-job claims through the system's SQL protocol (skipq's `skipq_claim`), called directly on
   * one connection: each round trip in ms, the first 10 dropped, at most `count`, until `deadline`.
   */
  sampleProtocolClaims?(count: number, deadline: number): Promise<number[]>;
  /** Adds `n` pending jobs that no worker of the bench reads (another queue or task); resolves to what was seeded. */
  seedIdle?(n: number): Promise<string>;
  /**
   * Adds `rows` finished jobs to history: finished within the last hour, or with `daysAgo`, spread over
   * that UTC day, in a partition of its own. Only systems that keep history as a table of their own.
   */
  seedHistory?(rows: number, options?: { daysAgo?: number }): Promise<string>;
  /** Retention: drops finished jobs older than `olderThanMs`; resolves to how many went. */
  dropHistory?(olderThanMs: number): Promise<number>;
  /** Drops its schema or queue. */
  teardown(): Promise<void>;
  /** Closes connections (without dropping anything). */
  close(): Promise<void>;
}

/** The installed version of a package of this checkout (node_modules/<name>/package.json; skipq: the root's), or "?". */
export function packageVersion(name: string): string {
  const root = path.join(path.dirname(fileURLToPath(import.meta.url)), "..");
  for (const file of [path.join(root, "node_modules", name, "package.json"), path.join(root, "package.json")]) {
    try {
      const pkg = JSON.parse(readFileSync(file, "utf8")) as { name?: string; version?: string };
      if (pkg.name === name && pkg.version) return pkg.version;
    } catch {
      // not installed there
    }
  }
  return "?";
}

export type AdapterFactory = (env: BenchEnv, tag: string) => SystemAdapter;

export function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  if (sorted.length === 0) return Number.NaN;
  return sorted.length % 2 ? (sorted[mid] as number) : ((sorted[mid - 1] as number) + (sorted[mid] as number)) / 2;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const index = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[index] as number;
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Resolves when `check` is true, or false at the deadline. Polls every `everyMs`. */
export async function waitFor(check: () => boolean, deadline: number, everyMs = 2): Promise<boolean> {
  while (!check()) {
    if (Date.now() > deadline) return false;
    await sleep(everyMs);
  }
  return true;
}

/** True when a Redis server answers PING at host:port within a second. */
export function redisAnswers(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.on("error", () => done(false));
    socket.on("connect", () => socket.write("PING\r\n"));
    socket.on("data", (data) => done(data.toString().startsWith("+PONG")));
  });
}

type Callback = (error: Error | null, result?: unknown) => void;

/**
 * A pg pool whose clients report the round trip of every statement matching
 * `pattern` (client-side, so it includes the network and the event loop — the
 * same for every system measured this way).
 */
export function timedPool(
  connectionString: string,
  max: number,
  pattern: RegExp,
  onMatch: (ms: number) => void,
): pg.Pool {
  const pool = new pg.Pool({ connectionString, max });
  pool.on("error", () => undefined);
  pool.on("connect", (client) => {
    const original = client.query.bind(client) as (...args: unknown[]) => unknown;
    (client as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
      const first = args[0] as string | { text?: string } | undefined;
      const text = typeof first === "string" ? first : (first?.text ?? "");
      if (!pattern.test(text)) return original(...args);
      const started = performance.now();
      const last = args[args.length - 1];
      if (typeof last === "function") {
        const callback = last as Callback;
        args[args.length - 1] = (error: Error | null, result?: unknown) => {
          if (!error) onMatch(performance.now() - started);
          callback(error, result);
        };
        return original(...args);
      }
      const result = original(...args) as Promise<unknown> | undefined;
      if (result && typeof result.then === "function") {
        result.then(
          () => onMatch(performance.now() - started),
          () => undefined,
        );
      }
      return result;
    };
  });
  return pool;
}

/**
 * A pg.Client class whose instances report the round trip of every statement matching `pattern`,
 * for libraries that build their own pool from a config (`Client` is a pg.Pool option): BullMQ's
 * PostgreSQL backend pins the schema only on a pool it builds itself.
 */
export function timedClientClass(pattern: RegExp, onMatch: (ms: number) => void): typeof pg.Client {
  return class TimedClient extends pg.Client {
    // biome-ignore lint/suspicious/noExplicitAny: pg's query has many overloads; this passes them all through
    override query(...args: any[]): any {
      const first = args[0] as string | { text?: string } | undefined;
      const text = typeof first === "string" ? first : (first?.text ?? "");
      // biome-ignore lint/suspicious/noExplicitAny: as above
      const run = () => (super.query as (...a: any[]) => any).apply(this, args);
      if (!pattern.test(text)) return run();
      const started = performance.now();
      const last = args[args.length - 1];
      if (typeof last === "function") {
        // pg.Pool's query() passes a callback.
        args[args.length - 1] = (error: Error | null, result?: unknown) => {
          if (!error) onMatch(performance.now() - started);
          (last as Callback)(error, result);
        };
        return run();
      }
      const result = run() as Promise<unknown> | undefined;
      result?.then?.(
        () => onMatch(performance.now() - started),
        () => undefined,
      );
      return result;
    }
  };
}

/** `SHOW` a server setting. */
export async function show(pool: pg.Pool, name: string): Promise<string> {
  const { rows } = await pool.query(`SHOW ${name}`);
  return String(Object.values(rows[0] ?? {})[0] ?? "?");
}
