/**
 * Health checks for the things that silently hurt a PostgreSQL queue: a long
 * or idle-in-transaction session (or a prepared transaction, or a replication
 * slot) holding back the xmin horizon so vacuum removes nothing; dead tuples
 * piling up on the jobs table; claims reading many index pages per scan (the
 * effect of that horizon on the claim index, measured between two checks);
 * runnable jobs of a kind no live worker handles.
 * Read-only: it only reads statistics views and the live-row indexes.
 */
import { type Duration, toMs } from "../core/validate.js";
import type { OpsStore } from "../db/opsStore.js";

export type HealthCheck =
  | "long-transaction"
  | "idle-in-transaction"
  | "xmin-holder"
  | "dead-tuples"
  | "claim-index-pages"
  | "unhandled-kind";

export const HEALTH_CHECKS: readonly HealthCheck[] = [
  "long-transaction",
  "idle-in-transaction",
  "xmin-holder",
  "dead-tuples",
  "claim-index-pages",
  "unhandled-kind",
];

/** What holds the xmin horizon back the longest: a session, a prepared transaction or a replication slot. */
export interface XminHolder {
  /** "session 1234 (app)", "prepared transaction gid", "replication slot name". */
  holder: string;
  /** Age of its xmin in transactions. */
  ageTransactions: number;
  /** How long it has held it, s (a session's transaction, a prepared transaction); null for a slot. */
  seconds: number | null;
  /** A session's pid, transaction start and current query's start. */
  pid?: number;
  transactionStart?: Date;
  queryStart?: Date | null;
}

export interface HealthWarning {
  check: HealthCheck;
  /** One sentence saying what is wrong and what to do. */
  message: string;
  detail: Record<string, unknown>;
}

export interface HealthReport {
  warnings: HealthWarning[];
  /** Age in transactions of the oldest snapshot in this database held by another session; null when none. */
  oldestXminAge: number | null;
  /** The oldest xmin holder in this database (another session, a prepared transaction, a slot); null when none. */
  oldestXmin: XminHolder | null;
  /** The jobs table's dead and live tuples as last reported by the statistics collector. */
  jobsTable: { live: number; dead: number; lastAutovacuum: Date | null } | null;
  /**
   * Index pages per scan of jobs_pending_claim since this process's previous health check (null on the first,
   * or with no scan between): a handful when claims skip what they consumed, many when they step over dead
   * entries a held snapshot keeps.
   */
  claimIndexPagesPerScan: number | null;
}

export interface HealthOptions {
  /** A transaction open longer than this is reported. Default "5m". */
  longTransaction?: Duration;
  /** A session idle in a transaction longer than this is reported. Default "1m". */
  idleInTransaction?: Duration;
  /** A replication slot or prepared transaction whose xmin is older than this many transactions is reported. Default 1,000,000. */
  xminAge?: number;
  /** Fewest dead tuples on the jobs table worth reporting. Default 10,000. */
  minDeadTuples?: number;
  /** Dead tuples are reported only when they are at least this fraction of the live ones. Default 0.2. */
  deadTupleRatio?: number;
  /** Pending jobs are reported as unhandled once runnable for this long. Default "1m". */
  unhandledAfter?: Duration;
  /** Index pages per claim-index scan worth reporting. Default 20. */
  claimIndexPages?: number;
}

/** The previous read of the claim index's counters, per schema (this process's health checks). */
const lastClaimCounters = new Map<string, { scans: number; pages: number }>();

const seconds = (v: unknown): number => Math.round(Number(v ?? 0));

export async function checkHealth(store: OpsStore, options: HealthOptions = {}): Promise<HealthReport> {
  const schema = store.store.schema.name;
  const longMs = toMs("longTransaction", options.longTransaction ?? "5m");
  const idleMs = toMs("idleInTransaction", options.idleInTransaction ?? "1m");
  const unhandledMs = toMs("unhandledAfter", options.unhandledAfter ?? "1m");
  const xminAge = options.xminAge ?? 1_000_000;
  const minDead = options.minDeadTuples ?? 10_000;
  const ratio = options.deadTupleRatio ?? 0.2;

  const claimPages = options.claimIndexPages ?? 20;
  const [holders, others, t, unhandled, now] = await Promise.all([
    store.xminHolders(),
    store.xminOthers(),
    store.jobsTableTuples(),
    store.unhandledKinds({ runnableForMs: unhandledMs }),
    store.claimIndexCounters(),
  ]);
  const warnings: HealthWarning[] = [];
  for (const s of holders) {
    const detail = {
      pid: s.pid,
      user: s.usename,
      application: s.application_name,
      state: s.state,
      xminAge: s.xmin_age,
      transactionSeconds: seconds(s.xact_seconds),
      query: s.query,
    };
    if (String(s.state).startsWith("idle in transaction") && Number(s.state_seconds) * 1000 >= idleMs) {
      warnings.push({
        check: "idle-in-transaction",
        message: `session ${s.pid} (${s.application_name || s.usename}) has been idle in a transaction for ${seconds(s.state_seconds)} s, so vacuum cannot remove dead jobs; fix the client that leaves transactions open, or set idle_in_transaction_session_timeout`,
        detail,
      });
    } else if (Number(s.xact_seconds) * 1000 >= longMs) {
      warnings.push({
        check: "long-transaction",
        message: `session ${s.pid} (${s.application_name || s.usename}) has had a transaction open for ${seconds(s.xact_seconds)} s, so vacuum cannot remove dead jobs until it ends; shorten it or move it to a replica`,
        detail,
      });
    }
  }
  for (const o of others) {
    const old = o.seconds === null ? o.xmin_age >= xminAge : Number(o.seconds) * 1000 >= longMs;
    if (old) {
      warnings.push({
        check: "xmin-holder",
        message: `${o.holder} holds the xmin horizon back by ${o.xmin_age} transactions; commit or roll it back, or drop the slot if nothing consumes it`,
        detail: { holder: o.holder, xminAge: o.xmin_age },
      });
    }
  }
  const jobsTable = t ? { live: Number(t.live), dead: Number(t.dead), lastAutovacuum: t.last_autovacuum } : null;
  if (jobsTable && jobsTable.dead >= minDead && jobsTable.dead >= ratio * jobsTable.live) {
    warnings.push({
      check: "dead-tuples",
      message: `the jobs table has ${jobsTable.dead} dead tuples against ${jobsTable.live} live; claims slow down as they step over them. Look for a session holding the xmin horizon, then VACUUM ${schema}.jobs`,
      detail: { ...jobsTable },
    });
  }
  for (const u of unhandled) {
    warnings.push({
      check: "unhandled-kind",
      message: `${u.pending} pending "${u.kind}" job(s) in queue "${u.queue}" have no live worker with a handler (oldest enqueued ${seconds(u.oldest_s)} s ago); start a worker that registers "${u.kind}" for that queue`,
      detail: { queue: u.queue, kind: u.kind, pending: u.pending, oldestSeconds: seconds(u.oldest_s) },
    });
  }
  const before = lastClaimCounters.get(schema);
  let claimIndexPagesPerScan: number | null = null;
  if (now) {
    lastClaimCounters.set(schema, { scans: now.scans, pages: now.pages });
    if (before && now.scans > before.scans && now.pages >= before.pages)
      claimIndexPagesPerScan = (now.pages - before.pages) / (now.scans - before.scans);
  }
  if (claimIndexPagesPerScan !== null && claimIndexPagesPerScan >= claimPages) {
    warnings.push({
      check: "claim-index-pages",
      message: `each scan of the claim index read ${claimIndexPagesPerScan.toFixed(1)} pages since the last check (a claim that skips what it consumed reads a few): it is stepping over dead entries. Look for the xmin holder reported here, end it, then VACUUM ${schema}.jobs; skipq workers read from their floors, so this is most often an SQL-protocol worker or another client claiming without them`,
      detail: { pagesPerScan: claimIndexPagesPerScan },
    });
  }
  const candidates: XminHolder[] = [
    ...holders.map((r) => ({
      holder: `session ${r.pid} (${r.application_name || r.usename})`,
      ageTransactions: Number(r.xmin_age),
      seconds: r.xact_seconds === null ? null : seconds(r.xact_seconds),
      pid: r.pid,
      transactionStart: r.xact_start,
      queryStart: r.query_start,
    })),
    ...others.map((o) => ({
      holder: String(o.holder),
      ageTransactions: Number(o.xmin_age),
      seconds: o.seconds === null ? null : seconds(o.seconds),
    })),
  ];
  const oldestXmin = candidates.reduce<XminHolder | null>(
    (a, c) => (a === null || c.ageTransactions > a.ageTransactions ? c : a),
    null,
  );
  const ages = holders.map((r) => Number(r.xmin_age));
  return {
    warnings,
    oldestXminAge: ages.length > 0 ? Math.max(...ages) : null,
    oldestXmin,
    jobsTable,
    claimIndexPagesPerScan,
  };
}
