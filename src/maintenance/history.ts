/**
 * History upkeep, as the maintainer's leader (and `skipq migrate`) runs it:
 * partitions of job_history made ahead of time (never one whose range has
 * begun: outcomes may be writing into it), and — once, after an upgrade
 * from the single-table layout — finished rows moved out of the jobs table in
 * short batches while workers go on claiming.
 *
 * Invariants: every statement is short and alone in its transaction (no lock
 * held across round trips); the move is idempotent and resumable (any process
 * may run it, SKIP LOCKED); when it finds nothing left it validates
 * jobs_live_check, from which point the planner knows the jobs table holds
 * live jobs only.
 */
import { HistoryStore } from "../db/historyStore.js";
import type { Store } from "../db/store.js";

/** Partitions made ahead of now: finishes up to this far in the future land in a dated partition. */
export const PARTITIONS_AHEAD_MS = 2 * 86_400_000;

/**
 * Makes the history partitions of `widthMs` that start in the future, up to two days ahead (or two widths),
 * each in a transaction of its own. The partitions around the present were made ahead of time (or by the
 * migration, for a new schema); one that is missing stays missing, and its outcomes land in DEFAULT.
 * Returns how many it made.
 */
export async function ensurePartitions(store: Store, widthMs: number): Promise<number> {
  const history = new HistoryStore(store);
  const rows = await history.historyPlan({ widthMs, aheadMs: Math.max(PARTITIONS_AHEAD_MS, 2 * widthMs) });
  let made = 0;
  for (const r of rows) if (await history.historyMake({ parent: r.parent, lower: r.lower, upper: r.upper })) made++;
  return made;
}

export interface MoveResult {
  moved: number;
  /** True when the jobs table holds live jobs only (nothing left to move). */
  done: boolean;
}

/**
 * Moves finished rows from jobs to job_history, `batch` per statement, at most `maxBatches` statements;
 * partitions are made first for the rows younger than `keepMs` (older ones land in the DEFAULT partition,
 * which retention empties).
 */
export async function moveFinishedJobs(
  store: Store,
  o: { widthMs: number; keepMs: number; batch?: number; maxBatches?: number },
): Promise<MoveResult> {
  const history = new HistoryStore(store);
  if (await history.historyMoved()) return { moved: 0, done: true };
  const batch = o.batch ?? 5000;
  let moved = 0;
  await history.historyEnsureForMove({ widthMs: o.widthMs, keepMs: o.keepMs });
  for (let i = 0; i < (o.maxBatches ?? Number.POSITIVE_INFINITY); i++) {
    const n = await history.historyMoveFinished({ limit: batch });
    moved += n;
    if (n < batch) {
      // False: a finished row was locked (skipped) by someone else; the next pass moves it.
      return { moved, done: await history.historyFinishMove() };
    }
  }
  return { moved, done: false };
}
