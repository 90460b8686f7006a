/**
 * Floors: where this worker's claims stopped, per queue and priority level
 * (and per queue for the aged scan), which the claim function reads each
 * level from (src/db/sql/claimFunction.ts). A floor is the position (run_at,
 * id) of the last job claimed at that level; every job before it there was
 * claimed, locked by another claimer, or consumed — so the index entries of
 * consumed jobs, which a held snapshot keeps alive, are never stepped over
 * again.
 *
 * Invariant: a floor is only a lower bound the claim may start from; a queue is
 * swept (claimed with no floors) at the first claim, every `sweepEveryMs`, and
 * after '!ready:<queue>' (rows put behind the floors: the reaper, released
 * workflow children, a changed priority, a past run_at) or '!flow'. So a job
 * put behind a floor some other way waits at most one sweep interval. Only
 * claims of queues without limits move floors (the limited claim skips paused
 * keys' rows, which must not end up behind a floor).
 */
import type { ClaimedRow, FloorArgs } from "../db/jobStore.js";

interface Position {
  runAt: string;
  id: string;
}

export class Floors {
  private readonly levels = new Map<string, Map<number, Position>>();
  private readonly aged = new Map<string, Position>();
  private readonly sweptAt = new Map<string, number>();

  constructor(private readonly sweepEveryMs: number) {}

  /** The next claim of `queue` reads it afresh (no floors). */
  sweep(queue: string): void {
    this.sweptAt.delete(queue);
  }

  /** The next claim reads every queue afresh. */
  sweepAll(): void {
    this.sweptAt.clear();
  }

  /**
   * Whether a claim of `queue` at `now` must read it afresh (and, if so, the sweep is counted as done).
   * `everyMs`: the sweep interval (the fair claim passes Infinity: its per-key floors live in the database,
   * which sweeps each key on its own timer, so it asks only about the first claim and '!ready').
   */
  sweepDue(queue: string, now: number, everyMs = this.sweepEveryMs): boolean {
    const swept = this.sweptAt.get(queue);
    if (swept !== undefined && now - swept < everyMs) return false;
    this.sweptAt.set(queue, now);
    return true;
  }

  /** The floors to pass for a claim of `queues` at `now`; queues due a sweep get none. */
  args(queues: readonly string[], now: number): FloorArgs {
    const out: FloorArgs = { queues: [], levels: [], runAt: [], ids: [] };
    for (const queue of queues) {
      if (this.sweepDue(queue, now)) continue;
      const push = (level: number | null, p: Position) => {
        out.queues.push(queue);
        out.levels.push(level);
        out.runAt.push(p.runAt);
        out.ids.push(p.id);
      };
      for (const [level, p] of this.levels.get(queue) ?? []) push(level, p);
      const aged = this.aged.get(queue);
      if (aged) push(null, aged);
    }
    return out;
  }

  /**
   * After a claim of queues without limits: each level's floor becomes its last claimed row (rows come in
   * claim order, so within a level the last is the furthest; a claim that read from the margin may have taken
   * a row behind the old floor, and the last claimed is then the right one to keep), the aged scan's likewise.
   */
  learn(rows: readonly (ClaimedRow & { aged?: boolean })[]): void {
    for (const row of rows) {
      const p = { runAt: row.run_at, id: row.id };
      if (row.aged) {
        this.aged.set(row.queue, p);
        continue;
      }
      let levels = this.levels.get(row.queue);
      if (!levels) {
        levels = new Map();
        this.levels.set(row.queue, levels);
      }
      levels.set(row.priority, p);
    }
  }
}
