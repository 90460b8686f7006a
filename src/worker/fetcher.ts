/**
 * The fetcher: claims jobs and hands them to the executor in claim order.
 * Claimed jobs wait in a small local buffer so a claim is in flight while
 * handlers run; the buffer holds about two claim round trips' worth of work at
 * the measured handler speed (at most `prefetch`).
 *
 * Jobs of a batch kind (registerBatch) start together, up to its `size` per
 * handler call, in one slot; a partial batch may wait up to its `waitMs`.
 *
 * Invariants: at most `concurrency` handlers (or batches) run at once; at
 * most `concurrency × largest batch size + prefetch` leases are held; no claim starts while the
 * completer's backlog is full; a notification that arrives during a claim is
 * never lost (the loop claims again instead of idling, whatever another claim
 * in flight answered); after a failed claim
 * no claim starts until its backoff is over; nothing is claimed or started
 * once the worker is stopping.
 */
import { retryWaitMs } from "../core/backoff.js";
import type { Logger } from "../core/logger.js";
import type { ClaimedRow } from "../db/jobStore.js";
import { claimSpan } from "../shared/telemetry.js";
import { Wakeup } from "../shared/wakeup.js";
import { parseTimestamptz } from "./claimedJob.js";
import type { HeldJobs } from "./heldJobs.js";
import type { ClaimInfo, Job, Running, WorkerHooks, WorkerStats } from "./types.js";

export interface FetcherOptions {
  claim: (limit: number) => Promise<ClaimedRow[]>;
  queues: readonly string[];
  concurrency: number;
  prefetch: number;
  /** The job lease, ms: bounds the prefetch target, and how long a buffered job may wait unconfirmed. */
  leaseMs: number;
  batchSize: number;
  maxClaims: number;
  pollMs: number;
  /** Milliseconds until the next job of these queues that is not due yet falls due; null when none. */
  nextDue: () => Promise<number | null>;
  /** Every job this worker holds, and their transitions (buffered → running, handed back, discarded). */
  held: HeldJobs;
  stats: WorkerStats;
  logger: Logger;
  hooks: WorkerHooks | undefined;
  /** False once the worker is stopping: claim nothing, start nothing. */
  running: () => boolean;
  /** True while unwritten outcomes are at their cap. */
  saturated: () => boolean;
  execute: (running: Running) => Promise<void>;
  /** Batch kinds (registerBatch): their size and hold; undefined for a kind run one job per call. */
  batchOf: (kind: string) => { size: number; waitMs: number } | undefined;
  /** The largest registered batch size (1 when none): a slot may hold that many leases. */
  largestBatch: () => number;
  /** Runs jobs of one batch kind in one handler call, in one slot. */
  executeBatch: (members: readonly Running[]) => Promise<void>;
  onClaimed: (jobs: ReadonlyArray<Job>, info: ClaimInfo) => void;
  onIdle: () => void;
  onWarning: (error: unknown) => void;
}

export class Fetcher {
  /** Wakes the loop: a notification, a freed slot, a stop. */
  readonly wakeup = new Wakeup();
  /** Claimed jobs not started yet, in claim order. */
  private readonly buffer: Running[] = [];
  private active = 0;
  private readonly claiming = new Set<Promise<void>>();
  private claimsInFlight = 0;
  /** Jobs asked for by the claims in flight. */
  private requested = 0;
  private claimFailures = 0;
  /** Set by reachableAgain since the last claim started: ends a claim backoff early. */
  private reachable = false;
  /**
   * The earliest time (performance.now()) at which a job of these queues is known to fall due: from this
   * worker's own retries and snoozes, or the next-due query after a short claim. An idle wait ends then.
   */
  private dueAt: number | undefined;
  private sawEmpty = false;
  /** Notifications received; a claim that came back short idles only if none arrived while it ran. */
  private notifications = 0;
  /** Moving averages of handler duration and claim round trip (ms), for the prefetch target. */
  private handlerMs: number | undefined;
  private claimMs = 1;
  /** Buffered jobs handed back since the last log line because their lease went unconfirmed for a whole lease. */
  private unconfirmed = 0;
  /** Batch kinds holding a partial batch for their `waitMs`: its timer, and whether it fired (the wait is over). */
  private readonly holding = new Map<string, { due: boolean; timer: NodeJS.Timeout }>();

  constructor(private readonly o: FetcherOptions) {}

  /** Handlers running now. */
  get activeCount(): number {
    return this.active;
  }

  /** Claimed jobs waiting in the buffer. */
  get bufferedCount(): number {
    return this.buffer.length;
  }

  /** A job for one of this worker's queues was announced. */
  notified(): void {
    this.notifications++;
    this.wakeup.wake();
  }

  /** The database answers again (the listener reconnected): a claim backoff in progress ends now. */
  reachableAgain(): void {
    this.reachable = true;
    this.wakeup.wake();
  }

  /**
   * Waits out the backoff after `claimFailures` failed claims. Only a stop or a sign that the database is
   * back (reachableAgain) ends it early: the wake-ups of a freed slot, a flush or the failed claim's own
   * settling do not — each would cut the backoff to nothing, and a worker cut off from its database would
   * spin through claims (issue 25: 40,140 failures and 4,000 log lines in a 3 s outage).
   */
  private async waitOutBackoff(): Promise<void> {
    const end = performance.now() + retryWaitMs(this.claimFailures + 1, 50, 5000);
    for (let left = end - performance.now(); left > 0; left = end - performance.now()) {
      if (!this.o.running() || this.reachable) return;
      await this.wakeup.wait(left);
    }
  }

  /** A job of these queues falls due in `delayMs` (a retry or snooze this worker just wrote). */
  noteDue(delayMs: number): void {
    const at = performance.now() + Math.max(0, delayMs);
    if (this.dueAt === undefined || at < this.dueAt) this.dueAt = at;
  }

  /**
   * How long to idle after a claim came back short: until the next poll, or sooner when a job is known to
   * fall due before it. Unless one already is, one cheap query asks the database (a delayed job, another
   * worker's retry); a failed query just leaves the poll.
   */
  private async idleWaitMs(): Promise<number> {
    const poll = this.o.pollMs;
    if (this.dueAt !== undefined && this.dueAt <= performance.now()) this.dueAt = undefined;
    if (this.dueAt === undefined) {
      const dueMs = await this.o.nextDue().catch(() => null);
      if (dueMs !== null && dueMs < poll) this.noteDue(dueMs);
    }
    return this.dueAt === undefined ? poll : Math.min(poll, Math.max(0, this.dueAt - performance.now()));
  }

  /** A handler took `ms`: feeds the prefetch target. */
  noteHandlerMs(ms: number): void {
    this.handlerMs = this.handlerMs === undefined ? ms : 0.8 * this.handlerMs + 0.2 * ms;
  }

  /**
   * Keeps up to `maxClaims` claims in flight while there is room for half a claim's worth of jobs:
   * with handlers that finish fast, a claim (one commit) is always on the way while the last batch runs.
   * Resolves once stopping and every claim in flight has returned.
   */
  async loop(): Promise<void> {
    const o = this.o;
    while (o.running()) {
      const cap = this.slotLeases() + this.prefetchTarget();
      const claimSize = this.claimSize;
      const fullClaim = Math.min(claimSize, cap);
      if (this.claimFailures > 0) {
        // After a failed claim no other claim starts until the backoff is over: the one still in flight
        // returns first (its settling wakes this loop), then the loop waits the backoff out.
        if (this.claimsInFlight > 0) {
          await this.wakeup.wait(o.pollMs);
          continue;
        }
        await this.waitOutBackoff();
        if (!o.running()) break;
      } else if (this.sawEmpty && this.claimsInFlight === 0) {
        this.sawEmpty = false;
        if (o.held.size === 0) o.onIdle();
        await this.wakeup.wait(await this.idleWaitMs());
        continue;
      }
      if (!o.running()) break;
      const room = Math.min(claimSize, cap - o.held.size - this.requested);
      // Slots idle with nothing buffered or coming: claim whatever fits now. Otherwise wait until half a
      // claim's worth of room is free, so slots freeing one by one never turn into one-job claims.
      // A partial batch held for its waitMs starves too: any job claimed now may fill it.
      const starving =
        (this.buffer.length === 0 || this.holding.size > 0) && this.active < o.concurrency && this.claimsInFlight === 0;
      if (
        this.claimsInFlight >= o.maxClaims ||
        room <= 0 ||
        (!starving && room < Math.ceil(fullClaim / 2)) ||
        o.saturated()
      ) {
        await this.wakeup.wait(o.pollMs);
        continue;
      }
      this.claimsInFlight++;
      this.requested += room;
      this.reachable = false;
      const notificationsBefore = this.notifications;
      const claiming: Promise<void> = this.claim(room)
        .then(
          (claimed) => {
            this.claimFailures = 0;
            // A notification during the claim may announce a job its snapshot missed: claim again, don't idle
            // — and forget an empty verdict another claim gave meanwhile, which is as stale (with two claims
            // in flight, the one that came back short first would otherwise idle the loop past the job).
            if (this.notifications !== notificationsBefore) this.sawEmpty = false;
            else if (claimed.length < room) this.sawEmpty = true;
            this.startBuffered();
          },
          (error) => {
            this.claimFailures++;
            o.onWarning(error);
            if (this.claimFailures === 1 || this.claimFailures % 20 === 0) {
              o.logger.warn({ err: error, failures: this.claimFailures }, "skipq: claim failed; retrying with backoff");
            }
          },
        )
        .finally(() => {
          this.claimsInFlight--;
          this.requested -= room;
          this.claiming.delete(claiming);
          this.wakeup.wake();
        });
      this.claiming.add(claiming);
    }
    await Promise.all([...this.claiming]);
  }

  /**
   * Jobs per claim: the worker's batchSize, or the largest batch size when that is more (a batch is claimed
   * by one claim).
   */
  get claimSize(): number {
    return Math.max(this.o.batchSize, this.o.largestBatch());
  }

  /** Leases the running slots may hold: `concurrency`, times the largest batch size when batches run. */
  private slotLeases(): number {
    return this.o.concurrency * this.o.largestBatch();
  }

  private prefetchTarget(): number {
    return prefetchTarget({ ...this.o, handlerMs: this.handlerMs, claimMs: this.claimMs });
  }

  /** One claim of up to `limit` jobs, leased and buffered (not started). */
  async claim(limit: number): Promise<Running[]> {
    const startedAt = performance.now();
    const rows = await this.o.claim(limit);
    const durationMs = performance.now() - startedAt;
    this.claimMs = 0.8 * this.claimMs + 0.2 * durationMs;
    if (rows.length === 0) return [];
    const trace = claimSpan(startedAt, this.o.queues, rows.length);
    this.o.stats.claimed += rows.length;
    const claimed: Running[] = rows.map((row) => this.o.held.claimed(row, trace, startedAt));
    const jobs = claimed.map((r) => r.job);
    this.o.onClaimed(jobs, { durationMs, claimedAt: parseTimestamptz((rows[0] as ClaimedRow).locked_at) });
    await this.o.hooks?.afterClaimCommit?.(jobs);
    this.buffer.push(...claimed);
    return claimed;
  }

  /** Starts buffered jobs, in claim order, while slots are free; none once stopping (shutdown releases them). */
  startBuffered(): void {
    this.startReady();
    if (this.unconfirmed > 0) {
      this.o.logger.warn(
        { count: this.unconfirmed, leaseMs: this.o.leaseMs },
        "skipq: handed back buffered jobs whose lease no heartbeat confirmed for a whole lease (cut off from the database, or it is overloaded): released at once if their lease is still live, else the reaper returns them",
      );
      this.unconfirmed = 0;
    }
  }

  private startReady(): void {
    let i = 0;
    /** Batch kinds seen holding in this pass: their other jobs stay buffered too. */
    let held: Set<string> | undefined;
    while (this.active < this.o.concurrency && i < this.buffer.length) {
      if (!this.o.running()) return;
      const running = this.buffer[i] as Running;
      if (!this.usable(running)) {
        this.buffer.splice(i, 1);
        continue;
      }
      const kind = running.job.kind;
      const batch = this.o.batchOf(kind);
      if (batch === undefined) {
        this.buffer.splice(i, 1);
        this.runOne(running);
        continue;
      }
      if (held?.has(kind)) {
        i++;
        continue;
      }
      const members = this.takeBatch(i, kind, batch);
      if (members === undefined) {
        held ??= new Set();
        held.add(kind);
        i++;
      } else if (members.length > 0) {
        this.runBatch(members);
      }
    }
  }

  /**
   * False (and the job dealt with) for a buffered job that must not start: its lease was lost while it
   * waited (nothing ran, nothing to record), or no heartbeat confirmed it for a whole lease — a partition or
   * a stalled database; the reaper may have returned it and another worker may run it, so running it here
   * would only add a duplicate. Handed back fenced by its lease: it returns to the queue at once (no attempt
   * used) if the lease was still live after all, and nothing changes if it was not.
   */
  private usable(running: Running): boolean {
    if (running.detached) {
      this.o.held.discard(running);
      return false;
    }
    if (performance.now() - running.confirmedAt >= this.o.leaseMs) {
      this.o.held.handBack(running);
      this.unconfirmed++;
      return false;
    }
    return true;
  }

  /**
   * Takes up to `size` buffered jobs of a batch kind, from index `from` on, out of the buffer (the unusable
   * ones dealt with). Undefined, taking nothing, while a partial batch may still wait for more (`waitMs`):
   * a timer starts it when the wait is over.
   */
  private takeBatch(from: number, kind: string, batch: { size: number; waitMs: number }): Running[] | undefined {
    let count = 0;
    for (let j = from; j < this.buffer.length && count < batch.size; j++) {
      if ((this.buffer[j] as Running).job.kind === kind) count++;
    }
    if (count < batch.size && batch.waitMs > 0) {
      const hold = this.holding.get(kind);
      if (hold === undefined) {
        // Its firing is what ends the wait (not a clock comparison, which a timer firing a hair early would fail).
        const held = {
          due: false,
          timer: setTimeout(() => {
            held.due = true;
            this.startBuffered();
          }, batch.waitMs),
        };
        held.timer.unref?.();
        this.holding.set(kind, held);
        return undefined;
      }
      if (!hold.due) return undefined;
    }
    const hold = this.holding.get(kind);
    if (hold) {
      clearTimeout(hold.timer);
      this.holding.delete(kind);
    }
    const members: Running[] = [];
    for (let j = from; j < this.buffer.length && members.length < batch.size; ) {
      const running = this.buffer[j] as Running;
      if (running.job.kind !== kind) {
        j++;
        continue;
      }
      this.buffer.splice(j, 1);
      if (this.usable(running)) members.push(running);
    }
    return members;
  }

  /** Starts one job in a slot (no array per job: the single-job path is the hot one). */
  private runOne(running: Running): void {
    this.o.held.start(running);
    this.active++;
    void this.o.execute(running).finally(() => {
      this.active--;
      running.settle();
      this.startBuffered();
      this.wakeup.wake();
    });
  }

  /** Starts one batch in one slot; its jobs settle when the batch ends. */
  private runBatch(members: Running[]): void {
    for (const running of members) this.o.held.start(running);
    this.active++;
    void this.o.executeBatch(members).finally(() => {
      this.active--;
      for (const running of members) running.settle();
      this.startBuffered();
      this.wakeup.wake();
    });
  }

  /** Empties the buffer (at stop): the jobs that never started (partial batches held for more, too). */
  drainBuffer(): Running[] {
    for (const hold of this.holding.values()) clearTimeout(hold.timer);
    this.holding.clear();
    return this.buffer.splice(0);
  }
}

/**
 * Jobs to hold beyond the slots: enough for the handlers to stay busy for two claim round trips (at the
 * measured speeds), at most `prefetch`, and never more than the handlers can start within a quarter of the
 * lease — a buffered job waits well inside its lease, and a partition costs at most that much work run
 * twice. Before any handler has finished (`handlerMs` undefined): `concurrency`.
 */
export function prefetchTarget(o: {
  prefetch: number;
  concurrency: number;
  leaseMs: number;
  handlerMs: number | undefined;
  claimMs: number;
}): number {
  if (o.prefetch === 0) return 0;
  if (o.handlerMs === undefined) return Math.min(o.prefetch, o.concurrency);
  const perJobMs = Math.max(o.handlerMs, 0.01);
  const inQuarterLease = Math.floor((o.concurrency * o.leaseMs) / 4 / perJobMs);
  return Math.min(o.prefetch, inQuarterLease, Math.ceil((2 * o.claimMs * o.concurrency) / perJobMs));
}
