/**
 * The execution ledger and its reconciler. Worker processes append one JSON
 * line per event to a file of their own (start, end, outcome, stale, kill,
 * signal); the reconciler joins those lines with the database's final state.
 *
 * Invariants it checks for every chaos test: lost = 0 (every committed job is
 * terminal, or pending, or running under a live lease, and no job is marked
 * completed without an execution holding that claim), and every duplicate
 * execution has a named reason. It never trusts a worker's own opinion of
 * success: outcomes count only when the database accepted them.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import type pg from "pg";

/** What a chaos job does, carried in its payload. */
export interface JobSpec {
  /** Handler duration, ms (aborted early by the job's signal unless ignoreAbort). */
  ms?: number;
  /** Keep running after the signal aborts (P5). */
  ignoreAbort?: boolean;
  /** Probability of throwing after the work. */
  failP?: number;
  /** Write a side effect keyed by the job id (the effects table counts applications in `n`). */
  effect?: boolean;
  /** Fail with this shape (P7): error, string, null, undefined, object, number, reject, late, floating. */
  throws?: string;
  /** Never resolve (P8). */
  never?: boolean;
  /** Run until this file exists (polled every 50 ms): the test decides when the handler ends (fleet N6-N9). */
  untilFile?: string;
}

/** Configuration of one worker-child process. */
export interface ChildConfig {
  url: string;
  schema: string;
  ledger: string;
  worker: Record<string, unknown>;
  preparedStatements?: boolean;
  /** The client's sessionSettings (the fleet suite scales the TCP timeouts to its short leases). */
  sessionSettings?: Record<string, number | null> | false;
  /** Run a cron scheduler in the worker: kind "tick" every `expression` (seconds field first), with `backfill`. */
  cron?: { expression: string; backfill: number };
  killAt?: "afterClaimCommit" | "afterHandlerBeforeOutcome";
  /** With killAt afterHandlerBeforeOutcome: die after this many handlers finished. Default 1. */
  killAfter?: number;
  skewMs?: number;
  effects?: boolean;
  /** Cap on every handler's duration, ms (a replacement worker need not sit out a 120 s job). */
  maxMs?: number;
  /** P9: every handler first blocks the event loop this long (a synchronous CPU loop). */
  blockMs?: number;
  /** P10: the handler started after this many others allocates until the heap limit kills the process. */
  oomAfterStarts?: number;
  /**
   * The wall-clock skew libfaketime gives this process, ms: removed from the ledger's timestamps so
   * they stay comparable with the other processes' (the skewed clock is still logged at "ready").
   */
  fakeClockOffsetMs?: number;
}

export interface LedgerEntry {
  e:
    | "tick"
    | "starting"
    | "ready"
    | "start"
    | "end"
    | "outcome"
    | "stale"
    | "kill"
    | "signal"
    | "stopped"
    | "claimed"
    | "reaped"
    | "listener";
  pid: number;
  t: number;
  id?: string;
  ids?: string[];
  attempt?: number;
  lease?: string;
  ok?: boolean;
  outcome?: string;
  point?: string;
  n?: number;
  stats?: Record<string, number>;
  /** Database errors the worker survived so far, by context (claim, heartbeat, outcome, start). */
  warnings?: Record<string, number>;
  /** The child's own (possibly skewed) Date.now() at "ready". */
  clock?: number;
}

export function readLedger(dir: string): LedgerEntry[] {
  if (!existsSync(dir)) return [];
  const entries: LedgerEntry[] = [];
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".jsonl"))) {
    for (const line of readFileSync(path.join(dir, file), "utf8").split("\n")) {
      // A SIGKILL can cut the last line short; a partial line holds no complete event.
      if (!line) continue;
      try {
        entries.push(JSON.parse(line) as LedgerEntry);
      } catch {
        /* torn final line */
      }
    }
  }
  return entries.sort((a, b) => a.t - b.t);
}

export interface Execution {
  id: string;
  attempt: number;
  lease: string;
  pid: number;
  start: number;
  end?: number;
  ok?: boolean;
  outcome?: string;
  stale: boolean;
}

/** A fault the test injected: when, and which worker process (if one) it hit. */
export interface Fault {
  t: number;
  pid?: number;
  what: string;
}

export interface Reconciliation {
  enqueued: number;
  executions: number;
  distinctJobs: number;
  byStatus: Record<string, number>;
  /** Committed jobs neither terminal, nor pending, nor running under a live lease; plus completions no execution holds. */
  lost: number;
  lostIds: string[];
  /** Jobs still running or pending at the deadline (legitimately: not lost, but not drained). */
  notDrained: number;
  /** Re-executions that are not policy retries, by reason. */
  duplicates: number;
  duplicatesByReason: Record<string, number>;
  /** Re-executions after a handler failure (the retry policy, not a duplicate). */
  policyRetries: number;
  staleOutcomesRejected: number;
  /** For each fault that stranded jobs: ms from the fault to the first re-execution of an affected job. */
  recoveryMs: number[];
  /** Jobs whose attempts exceed max_attempts. */
  attemptsOverMax: number;
}

export async function reconcile(
  db: pg.Pool,
  schema: string,
  ledgerDir: string,
  faults: Fault[] = [],
): Promise<Reconciliation> {
  const entries = readLedger(ledgerDir);
  const executions = new Map<string, Execution>();
  const stale = new Set<string>();
  const killedPids = new Map<number, number>();
  const stoppedPids = new Set<number>();
  for (const f of faults) if (f.pid !== undefined) killedPids.set(f.pid, f.t);
  // A failover with asynchronous replication: outcomes the old primary acknowledged may be missing on the new one.
  const failoverAt = faults.find((f) => f.what === "failover")?.t;
  for (const entry of entries) {
    if (entry.e === "stopped") stoppedPids.add(entry.pid);
    if (entry.e === "kill") killedPids.set(entry.pid, entry.t);
    // A lease is the claiming transaction's id, shared by a batch: (job, lease) names one execution in
    // one process. The pid too: after a failover with a lost tail the new primary hands out the same
    // transaction ids again, so two processes can hold one job under one lease (D7).
    const key = `${entry.id}:${entry.lease}:${entry.pid}`;
    if (entry.e === "start" && entry.lease && entry.id) {
      executions.set(key, {
        id: entry.id,
        attempt: entry.attempt ?? 0,
        lease: entry.lease,
        pid: entry.pid,
        start: entry.t,
        stale: false,
      });
    }
    const run = executions.get(key);
    if (entry.e === "end" && run) {
      run.end = entry.t;
      run.ok = entry.ok ?? false;
    }
    if (entry.e === "outcome" && run) run.outcome = entry.outcome ?? "?";
    if (entry.e === "stale") for (const id of entry.ids ?? []) stale.add(`${entry.pid}:${id}`);
  }
  for (const run of executions.values()) if (stale.has(`${run.pid}:${run.id}`)) run.stale = true;

  const { rows } = await db.query<{
    id: string;
    status: string;
    lease: string | null;
    live: boolean;
    attempts: number;
    max_attempts: number;
    done_lease: string | null;
  }>(
    `SELECT id::text, status, lease::text, attempts, max_attempts,
            (status = 'running' AND lease_expires_at > now()) AS live
       FROM "${schema}".all_jobs WHERE kind = 'chaos'`,
  );
  const byJob = new Map<string, Execution[]>();
  for (const run of executions.values()) {
    const list = byJob.get(run.id) ?? [];
    list.push(run);
    byJob.set(run.id, list);
  }
  const byStatus: Record<string, number> = {};
  const lostIds: string[] = [];
  let notDrained = 0;
  let attemptsOverMax = 0;
  for (const row of rows) {
    byStatus[row.status] = (byStatus[row.status] ?? 0) + 1;
    if (row.attempts > row.max_attempts) attemptsOverMax++;
    if (row.status === "pending" || (row.status === "running" && row.live)) notDrained++;
    else if (row.status === "running")
      lostIds.push(row.id); // running without a live lease and never reaped
    else if (row.status === "completed" && !(byJob.get(row.id) ?? []).some((r) => r.ok)) lostIds.push(row.id);
  }

  const duplicatesByReason: Record<string, number> = {};
  let policyRetries = 0;
  const recoveryMs: number[] = [];
  for (const list of byJob.values()) {
    list.sort((a, b) => a.start - b.start);
    for (let i = 0; i < list.length - 1; i++) {
      const run = list[i] as Execution;
      const next = list[i + 1] as Execution;
      let reason: string;
      if (run.outcome === "retry" || run.outcome === "snoozed") {
        policyRetries++;
        continue;
      } else if (next.lease === run.lease) reason = "lease_token_reused";
      else if (run.stale) reason = "stale_outcome_rejected";
      // A handler still running when its worker stopped gracefully: the hard stop released its job.
      else if (run.outcome === "released" || (stoppedPids.has(run.pid) && run.outcome === undefined))
        reason = "released_at_shutdown";
      else if (run.outcome === "lease-lost") reason = "lease_lost";
      else if (killedPids.has(run.pid) && run.end === undefined) reason = "lease_expired:killed_mid_handler";
      // Ended (its outcome maybe buffered for the next batched write) but killed before the write committed.
      else if (killedPids.has(run.pid)) reason = "lease_expired:killed_before_outcome";
      else if (failoverAt !== undefined && run.outcome === "completed" && run.start < failoverAt)
        reason = "failover:outcome_lost_with_async_tail";
      else if (run.outcome === "completed") reason = "lease_expired:outcome_write_failed";
      else reason = "unexplained";
      duplicatesByReason[reason] = (duplicatesByReason[reason] ?? 0) + 1;
      const killedAt = killedPids.get(run.pid);
      if (killedAt !== undefined) recoveryMs.push(next.start - killedAt);
    }
  }
  // Kills that stranded claimed-but-unstarted jobs (afterClaimCommit): recovery is their first execution anywhere.
  for (const entry of entries) {
    if (entry.e !== "kill" || entry.point !== "afterClaimCommit") continue;
    const firsts = (entry.ids ?? []).map((id) => (byJob.get(id) ?? [])[0]?.start).filter((t) => t !== undefined);
    if (firsts.length > 0) recoveryMs.push(Math.max(...(firsts as number[])) - entry.t);
  }
  const duplicates = Object.values(duplicatesByReason).reduce((a, b) => a + b, 0);
  return {
    enqueued: rows.length,
    executions: executions.size,
    distinctJobs: byJob.size,
    byStatus,
    lost: lostIds.length,
    lostIds: lostIds.slice(0, 20),
    notDrained,
    duplicates,
    duplicatesByReason,
    policyRetries,
    staleOutcomesRejected: stale.size,
    recoveryMs,
    attemptsOverMax,
  };
}
