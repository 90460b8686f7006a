/**
 * Held jobs: every job whose lease this worker holds, and the one place a held
 * job's local life changes. The fetcher, the executor, a batch, the leases and
 * the drain ask for a transition here; none of them sets a job's state itself.
 *
 *   claimed ─▶ buffered ──start──▶ running ──finish──▶ (gone: its outcome recorded)
 *                 │  │                │  │
 *                 │  └─lose─▶ lost ◀──┘  │          lost: its lease is gone, or an operator cancelled it
 *                 └─handBack─▶ handed back ◀─handBack  (shutdown, or a lease no heartbeat confirmed)
 *
 * A buffered job that is lost or handed back leaves at once: nothing ran, and a
 * handed-back one is released (fenced by its lease, its attempt not used). A
 * running one leaves when its handler ends (`finish`), whatever happened to it
 * meanwhile; only a job still running then has its outcome recorded.
 *
 * A hold is one claim: its lease. The same job can be held twice for a while —
 * its lease ran out under a running handler, the reaper returned it, and a claim
 * of this worker leased it again — and each hold then lives and ends on its own
 * (the earlier one's outcome is refused by the database's lease fence). `get(id)`
 * is the newest hold.
 *
 * Invariants: a hold is in the map exactly while this worker holds its lease;
 * `lose` and `handBack` of a job that is already detached (or gone) change
 * nothing and say so, because a heartbeat's verdict, a cancel and a shutdown
 * race each other; any other transition from the wrong state is a bug in the
 * worker, and throws. Unit-tested without PostgreSQL (test/worker/held-jobs.test.ts).
 */
import type { ClaimedRow } from "../db/jobStore.js";
import { LazyAbortController } from "../shared/lazyAbort.js";
import { ClaimedJob } from "./claimedJob.js";
import type { DetachedOutcome, HeldState, Running } from "./types.js";

/** Why a job left this worker before its handler's outcome could count. */
export type Detachment = "lease" | "cancel" | "handed-back";

const DETACHED_OUTCOME: Record<Detachment, DetachedOutcome> = {
  lease: "lease-lost",
  cancel: "cancelled",
  "handed-back": "released",
};

/** Said to a handler's ctx.completeTx that comes after its job left (LeaseLostError's reason). */
const DETACHED_REASON: Record<Detachment, string> = {
  lease: "its lease expired",
  cancel: "the job was cancelled",
  "handed-back": "it was released at shutdown",
};

export class HeldJobs {
  /** Every hold, by its lease. */
  private readonly jobs = new Map<string, HeldJob>();
  /** The newest hold of each job id (what a cancel message or a progress write names). */
  private readonly newest = new Map<string, HeldJob>();
  /** Holds beyond the first of their job (a job leased again while an earlier hold still runs): rare. */
  private extraHolds = 0;

  /** `release` hands a job back to the database (fenced by its lease; its attempt not used). */
  constructor(private readonly release: (running: Running) => void) {}

  get size(): number {
    return this.jobs.size;
  }

  has(id: string): boolean {
    return this.newest.has(id);
  }

  get(id: string): HeldJob | undefined {
    return this.newest.get(id);
  }

  values(): IterableIterator<HeldJob> {
    return this.jobs.values();
  }

  /** Jobs whose lease is this worker's to extend: not detached, and not completed by ctx.completeTx. */
  heartbeatable(): HeldJob[] {
    const live: HeldJob[] = [];
    for (const job of this.jobs.values()) if (!job.detached && job.completedTx === undefined) live.push(job);
    return live;
  }

  /** A job a claim just leased: buffered, not started. */
  claimed(row: ClaimedRow, trace: Running["trace"], claimedAt: number): HeldJob {
    const held = new HeldJob(row, trace, claimedAt);
    this.jobs.set(held.lease, held);
    if (this.newest.has(held.job.id)) this.extraHolds++;
    this.newest.set(held.job.id, held);
    return held;
  }

  /** buffered → running: its handler starts now. */
  start(running: Running): void {
    const held = this.expect(running, "start", "buffered");
    held.state = "running";
    held.started = true;
  }

  /**
   * buffered or running → lost: the lease is gone (expired and reaped) or an operator cancelled the job.
   * False, changing nothing, when the job is not this worker's any more (already detached, or finished).
   */
  lose(running: Running, why: "lease" | "cancel"): boolean {
    const held = this.mine(running);
    if (held === undefined) return false;
    held.state = "lost";
    held.detachment = why;
    return true;
  }

  /**
   * buffered or running → handed back: released now, fenced by its lease, its attempt not used (at
   * shutdown; or a buffered job no heartbeat confirmed for a whole lease). A buffered job leaves at once;
   * a running one when its handler ends, its outcome then ignored. False, changing nothing, when the job
   * is not this worker's any more.
   */
  handBack(running: Running): boolean {
    const held = this.mine(running);
    if (held === undefined) return false;
    const wasBuffered = held.state === "buffered";
    held.state = "handed-back";
    held.detachment = "handed-back";
    if (wasBuffered) this.leave(held);
    this.release(held);
    if (wasBuffered) held.settle();
    return true;
  }

  /** A buffered job lost while it waited leaves without running: nothing to record. */
  discard(running: Running): void {
    const held = this.expect(running, "discard", "lost");
    if (held.started) throw new Error(`skipq internal: discard of job ${held.job.id}, which ran`);
    this.leave(held);
    held.settle();
  }

  /**
   * Its handler ended: the job leaves. "record" when it was still running (its outcome is the handler's);
   * otherwise the outcome it already had: lease lost, cancelled, or released.
   */
  finish(running: Running): "record" | DetachedOutcome {
    const held = this.own(running, "finish");
    if (!held.started) throw new Error(`skipq internal: finish of job ${held.job.id} in state ${describe(held)}`);
    this.leave(held);
    return held.detachment === undefined ? "record" : DETACHED_OUTCOME[held.detachment];
  }

  /** This worker's record of `running`, while it is buffered or running; undefined once it is not. */
  private mine(running: Running): HeldJob | undefined {
    const held = this.jobs.get(running.lease);
    return held === running && (held.state === "buffered" || held.state === "running") ? held : undefined;
  }

  /** This worker's record of `running`; a transition on a job it does not hold is a bug. */
  private own(running: Running, transition: string): HeldJob {
    const held = this.jobs.get(running.lease);
    if (held !== running)
      throw new Error(`skipq internal: ${transition} of job ${running.job.id}, which this worker does not hold`);
    return held;
  }

  private expect(running: Running, transition: string, from: HeldState): HeldJob {
    const held = this.own(running, transition);
    if (held.state !== from)
      throw new Error(`skipq internal: ${transition} of job ${held.job.id} in state ${describe(held)}, not ${from}`);
    return held;
  }

  private leave(held: HeldJob): void {
    held.state = "finished";
    this.jobs.delete(held.lease);
    const id = held.job.id;
    // Almost always the job's only hold: no other to look for (a scan per finish would cost every job).
    let other: HeldJob | undefined;
    if (this.extraHolds > 0) {
      for (const h of this.jobs.values()) if (h.job.id === id) other = h;
      if (other) this.extraHolds--;
    }
    if (this.newest.get(id) !== held) return;
    // An earlier hold of the same job, still running, is its newest now (a cancel hint names the id).
    if (other) this.newest.set(id, other);
    else this.newest.delete(id);
  }
}

function describe(held: HeldJob): string {
  return held.detachment === undefined ? held.state : `${held.state} (${held.detachment})`;
}

/**
 * The record of one held job. Its `done` promise is made only when someone waits for it (stop, runOnce):
 * most jobs settle unobserved, and a promise per job was measurable GC.
 */
export class HeldJob implements Running {
  readonly job: ClaimedJob;
  readonly lease: string;
  /** Only HeldJobs changes it. */
  state: HeldState = "buffered";
  /** Why it left before its handler's outcome could count; undefined while it is still this worker's. */
  detachment: Detachment | undefined;
  /** Replaced by its batch's controller when it runs in a batch (one abort for the whole batch). */
  controller = new LazyAbortController();
  /** Its handler started (false while it waits in the buffer, and for one that left from there). */
  started = false;
  startedAt = 0;
  confirmedAt: number;
  progress?: string;
  progressDirty?: boolean;
  spawns?: Running["spawns"];
  attemptLines?: Running["attemptLines"];
  completedTx?: Running["completedTx"];
  private settled = false;
  private waiting: { promise: Promise<void>; resolve: () => void } | undefined;

  constructor(
    row: ClaimedRow,
    readonly trace: Running["trace"],
    claimedAt: number,
  ) {
    this.confirmedAt = claimedAt;
    this.job = new ClaimedJob(row);
    this.lease = row.lease;
  }

  /** Its outcome must not be written: lost, cancelled, or handed back. */
  get detached(): boolean {
    return this.detachment !== undefined;
  }

  /** Why it is detached, as a sentence for an error ("its lease expired"); undefined while it is not. */
  get detachedReason(): string | undefined {
    return this.detachment === undefined ? undefined : DETACHED_REASON[this.detachment];
  }

  get done(): Promise<void> {
    if (this.settled) return Promise.resolve();
    if (!this.waiting) {
      let resolve!: () => void;
      const promise = new Promise<void>((r) => {
        resolve = r;
      });
      this.waiting = { promise, resolve };
    }
    return this.waiting.promise;
  }

  settle(): void {
    this.settled = true;
    this.waiting?.resolve();
  }
}
