/**
 * What a job costs the database: WAL bytes and records, heap and index
 * writes per job for a drain, skipq with history on and off next to
 * graphile-worker, on the same PostgreSQL in one run.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/test npm run bench -- --cost
 *   node --import tsx bench/cost.ts --jobs 50000 [--waldir /var/lib/postgresql/15/main/pg_wal]
 *
 * Each system: enqueue N jobs, ANALYZE, CHECKPOINT (so every system starts
 * from the same full-page-image state), note the WAL position, drain with
 * one in-process worker (concurrency 10, its defaults), note the WAL position
 * again. With pg_waldump and the server's WAL directory readable (the
 * machine's PostgreSQL, as root) the range is broken down by record type.
 * Invariant: only the drain is measured (enqueue is outside the WAL range).
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import pg from "pg";
import { adapters } from "./adapters/index.js";
import { type BenchEnv, waitFor } from "./lib.js";

export interface CostRow {
  system: string;
  jobs: number;
  walBytes: number;
  walRecords: number;
  fpiBytes: number;
  /** Records per job by resource manager and type (Heap INSERT, Btree INSERT_LEAF, …), when pg_waldump could read the WAL. */
  records: Record<string, number> | null;
}

interface Options {
  jobs: number;
  waldir: string | undefined;
}

async function lsn(db: pg.Pool): Promise<string> {
  return (await db.query("SELECT pg_current_wal_lsn()::text AS l")).rows[0].l;
}

async function walStats(db: pg.Pool): Promise<{ records: number; fpiBytes: number; bytes: number }> {
  const { rows } = await db.query("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal");
  return { records: Number(rows[0].wal_records), fpiBytes: Number(rows[0].wal_fpi), bytes: Number(rows[0].wal_bytes) };
}

/** pg_waldump --stats=record over [from, to): records per "Rmgr/TYPE". */
function waldump(waldir: string, from: string, to: string): Record<string, number> | null {
  const candidates = ["pg_waldump", ...["18", "17", "16", "15"].map((v) => `/usr/lib/postgresql/${v}/bin/pg_waldump`)];
  for (const bin of candidates) {
    try {
      const out = execFileSync(bin, ["--stats=record", "-p", waldir, "-s", from, "-e", to], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      });
      const counts: Record<string, number> = {};
      for (const line of out.split("\n")) {
        // "Heap/INSERT                                   100000 ( 40.00) ..."
        const m = /^(\S+\/\S+)\s+(\d+)\s/.exec(line.trim());
        if (m) counts[m[1] as string] = Number(m[2]);
      }
      return counts;
    } catch {
      // not installed, or the WAL directory is not readable: try the next one
    }
  }
  return null;
}

async function measure(
  env: BenchEnv,
  db: pg.Pool,
  key: string,
  label: string,
  o: Options,
  prepare?: (tag: string) => Promise<void>,
): Promise<CostRow> {
  const tag = `cost${Math.random().toString(36).slice(2, 6)}`;
  const adapter = (adapters[key] as (typeof adapters)[string])(env, tag);
  const unavailable = await adapter.setup();
  if (unavailable) throw new Error(`${label}: ${unavailable}`);
  try {
    await prepare?.(tag);
    await adapter.reset();
    await adapter.enqueueBulk(Array.from({ length: o.jobs }, (_, i) => ({ i })));
    await adapter.analyze();
    await db.query("CHECKPOINT");
    const fromLsn = await lsn(db);
    const before = await walStats(db);
    let count = 0;
    const worker = await adapter.startWorker({ concurrency: 10, onJob: () => void count++ });
    await waitFor(() => count >= o.jobs, Date.now() + 120_000);
    await worker.stop();
    const after = await walStats(db);
    const toLsn = await lsn(db);
    const { rows } = await db.query("SELECT pg_wal_lsn_diff($1, $2)::float8 AS d", [toLsn, fromLsn]);
    const records = o.waldir ? waldump(o.waldir, fromLsn, toLsn) : null;
    const perJob = records ? Object.fromEntries(Object.entries(records).map(([k, v]) => [k, v / count])) : null;
    return {
      system: label,
      jobs: count,
      walBytes: Number(rows[0].d) / count,
      walRecords: (after.records - before.records) / count,
      fpiBytes: (after.fpiBytes - before.fpiBytes) / count,
      records: perJob,
    };
  } finally {
    await adapter.teardown().catch(() => undefined);
    await adapter.close().catch(() => undefined);
  }
}

/** Costs per job for skipq (history on, history off) and graphile-worker. */
export async function measureCosts(env: BenchEnv, o: Options): Promise<CostRow[]> {
  const db = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  try {
    const rows: CostRow[] = [];
    rows.push(await measure(env, db, "skipq", "skipq (history on)", o));
    rows.push(
      await measure(env, db, "skipq", "skipq (history off: completedAfter 0)", o, async (tag) => {
        // The retention setting every outcome statement reads (what the leader writes for completedAfter: 0).
        await db.query(`UPDATE "bench_skipq_${tag}".settings SET keep_completed = false`);
      }),
    );
    rows.push(await measure(env, db, "graphile-worker", "graphile-worker", o));
    return rows;
  } finally {
    await db.end();
  }
}

/** The table of interest: the record types that make most of the difference. */
export function costTable(rows: CostRow[]): { header: string[]; rows: string[][] } {
  const kinds = [
    "Heap/INSERT",
    "Heap/INSERT+INIT",
    "Heap/UPDATE",
    "Heap/HOT_UPDATE",
    "Heap/DELETE",
    "Heap/LOCK",
    "Heap2/MULTI_INSERT",
    "Btree/INSERT_LEAF",
    "Transaction/COMMIT",
  ];
  const header = ["System", "WAL bytes/job", "WAL records/job", "FPI/job", ...kinds.map((k) => `${k}/job`)];
  return {
    header,
    rows: rows.map((r) => [
      r.system,
      r.walBytes.toFixed(0),
      r.walRecords.toFixed(2),
      r.fpiBytes.toFixed(3),
      ...kinds.map((k) => (r.records ? (r.records[k] ?? 0).toFixed(2) : "n/a")),
    ]),
  };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const argv = process.argv.slice(2);
  const get = (flag: string) => {
    const i = argv.indexOf(flag);
    return i >= 0 ? argv[i + 1] : undefined;
  };
  const databaseUrl = process.env.DATABASE_URL;
  if (!databaseUrl) throw new Error("bench/cost.ts needs DATABASE_URL (the machine's PostgreSQL, for pg_waldump)");
  const waldir = get("--waldir") ?? "/var/lib/postgresql/15/main/pg_wal";
  const rows = await measureCosts(
    { databaseUrl, redisHost: "127.0.0.1", redisPort: 6379 },
    { jobs: Number(get("--jobs") ?? 50_000), waldir: existsSync(waldir) ? waldir : undefined },
  );
  const t = costTable(rows);
  console.log(t.header.join(" | "));
  for (const r of t.rows) console.log(r.join(" | "));
}
