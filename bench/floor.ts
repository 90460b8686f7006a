/**
 * The floor (scenario 7): PostgreSQL's own rate for skipq's claim-batch +
 * complete-batch SQL, driven by pgbench with no Node at all. The pgbench
 * script is derived from the worker's own statements (src/sql/jobs.ts), so it
 * follows them when they change; each statement commits on its own, as in the
 * worker. Invariant: when pgbench is absent the row says so, never a number.
 */
import { execFile, execFileSync } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { Skipq, silentLogger } from "../src/index.js";

export interface FloorResult {
  jobsPerSecond?: number;
  note: string;
}

/** pgbench of the server's major version when installed, else the machine's 15, else PATH; PGBENCH overrides. */
export function pgbenchPath(serverMajor: string): string | undefined {
  if (process.env.PGBENCH) return process.env.PGBENCH;
  for (const candidate of [`/usr/lib/postgresql/${serverMajor}/bin/pgbench`, "/usr/lib/postgresql/15/bin/pgbench"]) {
    if (existsSync(candidate)) return candidate;
  }
  try {
    return execFileSync("which", ["pgbench"], { encoding: "utf8" }).trim() || undefined;
  } catch {
    return undefined;
  }
}

/** Replaces $n parameters with pgbench expressions; refuses a parameter it does not know. */
function bind(text: string, values: Record<number, string>): string {
  return text.replace(/\$(\d+)/g, (_, n: string) => {
    const value = values[Number(n)];
    if (value === undefined) throw new Error(`floor: no pgbench value for parameter $${n}; update bench/floor.ts`);
    return value;
  });
}

/** The pgbench script: claim a batch (ids and leases into variables), then complete exactly those. */
export function floorScript(skipq: Skipq): string {
  const claim = skipq.store.sql.jobs.jobClaimBatch.text;
  // The claim is one statement (a call of skipq_claim_next); its rows become one row (the aggregated ids and
  // leases) for \gset.
  if (/;\s*\S/.test(claim)) throw new Error("floor: the claim is no longer one statement; update bench/floor.ts");
  const claimed = `SELECT '{' || string_agg(c.id::text, ',') || '}' AS ids, '{' || string_agg(c.lease::text, ',') || '}' AS leases
FROM (${claim}) c`;
  const claimSql = bind(claimed, { 1: "'{default}'", 2: ":batch", 3: "'pgbench'", 4: "30000" });
  const completeSql = bind(skipq.store.sql.jobs.jobCompleteMany.text, { 1: ":ids", 2: ":leases" });
  const oneLine = (sql: string) =>
    sql
      .replace(/--[^\n]*/g, "")
      .replace(/\s+/g, " ")
      .trim();
  return `${oneLine(claimSql)}\n\\gset\n${oneLine(completeSql)};\n`;
}

export async function runFloor(options: {
  databaseUrl: string;
  batch: number;
  jobs: number;
  tag: string;
  clients?: number;
  log: (message: string) => void;
}): Promise<FloorResult> {
  const clients = options.clients ?? 4;
  const admin = new pg.Pool({ connectionString: options.databaseUrl, max: 1 });
  admin.on("error", () => undefined);
  const major = String((await admin.query("SHOW server_version_num")).rows[0].server_version_num).slice(0, 2);
  const binary = pgbenchPath(major);
  if (!binary) {
    await admin.end();
    return { note: "no pgbench on this machine (set PGBENCH=/path/to/pgbench)" };
  }
  const schema = `bench_floor_${options.tag}`;
  const skipq = new Skipq({ connectionString: options.databaseUrl, schema, logger: silentLogger });
  const dir = mkdtempSync(path.join(os.tmpdir(), "skipq-floor-"));
  try {
    await skipq.migrate();
    const perClient = Math.max(1, Math.floor(options.jobs / (options.batch * clients)));
    // A spare batch per client, so no transaction ever finds the queue empty.
    const total = perClient * options.batch * clients;
    await admin.query(`INSERT INTO "${schema}".jobs (kind, payload) SELECT 'noop', '{}' FROM generate_series(1, $1)`, [
      total + options.batch * clients,
    ]);
    await admin.query(`VACUUM ANALYZE "${schema}".jobs`);
    const script = path.join(dir, "claim-complete.sql");
    writeFileSync(script, floorScript(skipq));
    const args = [
      "-n",
      "-M",
      "prepared",
      "-c",
      String(clients),
      "-j",
      String(Math.min(clients, os.cpus().length)),
      "-t",
      String(perClient),
      "-D",
      `batch=${options.batch}`,
      "-f",
      script,
      options.databaseUrl,
    ];
    const output = await new Promise<string>((resolve, reject) =>
      execFile(binary, args, { maxBuffer: 1 << 20 }, (error, stdout, stderr) =>
        error ? reject(new Error(`pgbench failed: ${stderr || error.message}`)) : resolve(stdout),
      ),
    );
    const tps = Number(/tps = ([\d.]+) \(without initial connection time\)/.exec(output)?.[1]);
    const { rows } = await admin.query(
      `SELECT count(*)::int AS n FROM "${schema}".job_history WHERE status = 'completed'`,
    );
    if (rows[0].n !== total) throw new Error(`floor: pgbench completed ${rows[0].n} jobs, expected ${total}`);
    const jobsPerSecond = tps * options.batch;
    options.log(`floor batch ${options.batch}: ${jobsPerSecond.toFixed(0)} jobs/s (${tps} tps, ${clients} clients)`);
    return {
      jobsPerSecond,
      note: `${path.basename(path.dirname(path.dirname(binary)))}/pgbench -M prepared -c ${clients}, ${total} jobs`,
    };
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    return { note: `floor failed: ${message.replace(/\s+/g, " ").slice(0, 300)}` };
  } finally {
    rmSync(dir, { recursive: true, force: true });
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => undefined);
    await skipq.close();
    await admin.end();
  }
}
