/**
 * Completion inside the handler's transaction (`ctx.completeTx`, docs/jobs.md):
 * the job's completion — its result, its attempt log, its ctx.spawn children —
 * written on the caller's connection, in the caller's transaction, fenced by
 * the attempt's lease; and, after the handler returns, how that transaction
 * ended, so the worker records the handler's own outcome only if it rolled back.
 *
 * Invariants: nothing is written without the lease (a refused completion throws
 * before the caller can commit, having changed nothing); an attempt completes
 * at most once (a second call is refused unless the first one's transaction
 * rolled back); the worker never writes a second outcome over a committed
 * completion. It never commits or rolls back the caller's transaction, and a
 * job that uses none of it costs nothing here.
 */
import { AlreadyCompletedError, LeaseLostError, ValidationError } from "../core/errors.js";
import { encodeResult } from "../core/validate.js";
import type { JobFeatureStore } from "../db/jobFeatureStore.js";
import type { JobStore } from "../db/jobStore.js";
import type { Queryable } from "../db/queryable.js";
import { type EnqueuerOf, insertSpawned, spawnedRows } from "../workflow/spawning.js";
import { attemptEntry } from "./attemptLog.js";
import type { Running, WorkerStats } from "./types.js";

export interface CompleteTxParts {
  jobs: JobStore;
  features: JobFeatureStore;
  /** For ctx.spawn children completed with the job. */
  enqueuer: EnqueuerOf;
  maxResultBytes: number;
  workerId: string;
  stats: WorkerStats;
  /** Writes the job's last unwritten ctx.progress() value (before the completion moves the job to history). */
  settleProgress: (running: Running) => Promise<void>;
}

/** How a completeTx caller's transaction ended, as the worker reads it after the handler returned. */
export type CompletedTx = "committed" | "rolled-back" | "lost";

/** ctx.completeTx: writes `running`'s completion in the transaction `client` is in. */
export async function completeInTx(
  p: CompleteTxParts,
  running: Running,
  client: Queryable,
  result: unknown,
): Promise<void> {
  assertTransactionClient(client);
  const { job } = running;
  // Checked before anything is written: a result that cannot be stored fails like a returned one would.
  const encoded = result === undefined ? undefined : encodeResult(result, p.maxResultBytes);
  if (running.detached) throw new LeaseLostError(job.id, running.detachedReason ?? "its lease expired");
  if (running.completedTx) {
    // Refused without touching the row: the earlier completion's transaction may still hold its lock (or
    // that completion is still being written: a call not awaited).
    const earlier = running.completedTx.xid;
    if (earlier === undefined || (await p.features.txStatus(earlier)) !== "aborted")
      throw new AlreadyCompletedError(job.id);
    running.completedTx = undefined;
  }
  if (running.progressDirty) await p.settleProgress(running);
  // From here on heartbeats leave the row alone (one would wait on the caller's lock once the completion is
  // written); cleared again if nothing was completed.
  const marker: { xid: string | undefined } = { xid: undefined };
  running.completedTx = marker;
  try {
    marker.xid = await writeCompletion(p, running, client, encoded);
  } catch (error) {
    if (running.completedTx === marker) running.completedTx = undefined;
    throw error;
  }
}

/** The completion's statements on the caller's connection; returns its transaction id. */
async function writeCompletion(
  p: CompleteTxParts,
  running: Running,
  client: Queryable,
  encoded: string | undefined,
): Promise<string> {
  const { job, lease } = running;
  const lines = running.attemptLines;
  if (lines && (lines.lines.length > 0 || lines.dropped > 0)) {
    // Kept on the running job: if this transaction rolls back, the handler's own outcome stores them.
    const entry = attemptEntry(lines, { attempt: job.attempt, worker: p.workerId, outcome: "completed", error: null });
    await p.features.appendAttemptLogs([{ id: job.id, lease, entry }], client);
  }
  const accepted =
    encoded === undefined
      ? await p.jobs.completeMany([job.id], [lease], client)
      : await p.features.completeManyWithResults([job.id], [lease], [encoded], client);
  if (accepted.length === 0) throw new LeaseLostError(job.id);
  if (running.spawns) await insertSpawned(p.enqueuer, client, spawnedRows(running.spawns));
  return p.features.currentTx(client);
}

/**
 * After the handler of a job completed by ctx.completeTx returned: waits for the caller's transaction if it
 * is still open (its completion holds the job's row), then reads how it ended. "rolled-back": the job is
 * still held under this lease, and the handler's own outcome is to be recorded; "committed": the job was
 * completed then, nothing more to write; "lost": neither (the lease moved on meanwhile).
 */
export async function settleCompletedTx(p: CompleteTxParts, running: Running): Promise<CompletedTx> {
  const done = running.completedTx;
  if (!done) return "rolled-back";
  // Still held under this lease once no transaction holds the row: rolled back (or to a savepoint).
  if (await p.features.waitTx(running.job.id, running.lease)) {
    running.completedTx = undefined;
    return "rolled-back";
  }
  // No id: the handler returned without awaiting its completeTx; the job is gone, but how is unknown.
  if (done.xid === undefined || (await p.features.txStatus(done.xid)) !== "committed") return "lost";
  p.stats.completed++;
  return "committed";
}

/** Refuses what cannot hold a transaction: no `query`, or a pg.Pool (each statement its own transaction). */
function assertTransactionClient(client: Queryable): void {
  const c = client as unknown as Record<string, unknown> | null;
  if (c === null || typeof c !== "object" || typeof c.query !== "function")
    throw new ValidationError(
      "ctx.completeTx(client, result?) needs the client your transaction runs on: a pg PoolClient or Client after BEGIN, or an adapter (postgresJsQueryable(tx), kyselyQueryable(trx), drizzleQueryable(tx, sql), knexQueryable(trx), prismaQueryable(tx))",
    );
  if (typeof c.connect === "function" && typeof c.totalCount === "number")
    throw new ValidationError(
      "ctx.completeTx was given a pg.Pool, which runs each statement in a transaction of its own: pass the client of your transaction (const client = await pool.connect(); await client.query('BEGIN'); …)",
    );
}
