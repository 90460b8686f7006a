/**
 * The fetcher: claims jobs and hands them to the slots (slots.ts) in claim
 * order. Claimed jobs wait in a small local buffer so a claim is in flight
 * while handlers run; the buffer holds about two claim round trips' worth of
 * work at the measured handler speed (at most `prefetch`).
 *
 * Invariants: at most `concurrency × largest batch size + prefetch` leases are
 * held; no claim starts while the completer's backlog is full; a notification
 * that arrives during a claim is never lost (the loop claims again instead of
 * idling, whatever another claim in flight answered); after a failed claim no
 * claim starts until its backoff is over; nothing is claimed once the worker
 * is stopping.
 */
import { retryWaitMs } from "../core/backoff.js";
import type { Logger } from "../core/logger.js";
import type { ClaimedRow } from "../db/jobStore.js";
import { claimSpan } from "../shared/telemetry.js";
import { Wakeup } from "../shared/wakeup.js";
import { parseTimestamptz } from "./claimedJob.js";
import type { Claimer } from "./claimer.js";
import type { Completer } from "./completer.js";
import type { Executor } from "./executor.js";
import type { Handlers } from "./handlers.js";
import type { HeldJobs } from "./heldJobs.js";
import { Slots } from "./slots.js";
import type { ClaimInfo, Job, Running, WorkerHooks, WorkerStats } from "./types.js";

export interface FetcherOptions {
  claimer: Pick<Claimer, "claim">;
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
  /** Its `saturated`: true while unwritten outcomes are at their cap. */
  completer: Pick<Completer, "saturated">;
  /** Batch kinds (registerBatch); the largest batch size (1 when none): a slot may hold that many leases. */
  handlers: Pick<Handlers, "batchOf" | "largestBatch">;
  executor: Pick<Executor, "execute" | "executeBatch">;
  onClaimed: (jobs: ReadonlyArray<Job>, info: ClaimInfo) => void;
  onIdle: () => void;
  onWarning: (error: unknown) => void;
}

export class Fetcher {
  /** Wakes the loop: a notification, a freed slot, a stop. */
  readonly wakeup = new Wakeup();
  /** The prefetch buffer and the slots its jobs start in. */
  readonly slots: Slots;
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

  constructor(private readonly o: FetcherOptions) {
    this.slots = new Slots({ ...o, onFree: () => this.wakeup.wake() });
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
      const starving = this.slots.starving && this.claimsInFlight === 0;
      if (
        this.claimsInFlight >= o.maxClaims ||
        room <= 0 ||
        (!starving && room < Math.ceil(fullClaim / 2)) ||
        o.completer.saturated
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
            this.slots.startBuffered();
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
    return Math.max(this.o.batchSize, this.o.handlers.largestBatch);
  }

  /** Leases the running slots may hold: `concurrency`, times the largest batch size when batches run. */
  private slotLeases(): number {
    return this.o.concurrency * this.o.handlers.largestBatch;
  }

  private prefetchTarget(): number {
    return prefetchTarget({ ...this.o, handlerMs: this.handlerMs, claimMs: this.claimMs });
  }

  /** One claim of up to `limit` jobs, leased and buffered (not started). */
  async claim(limit: number): Promise<Running[]> {
    const startedAt = performance.now();
    const rows = await this.o.claimer.claim(limit);
    const durationMs = performance.now() - startedAt;
    this.claimMs = 0.8 * this.claimMs + 0.2 * durationMs;
    if (rows.length === 0) return [];
    const trace = claimSpan(startedAt, this.o.queues, rows.length);
    this.o.stats.claimed += rows.length;
    const claimed: Running[] = rows.map((row) => this.o.held.claimed(row, trace, startedAt));
    const jobs = claimed.map((r) => r.job);
    this.o.onClaimed(jobs, { durationMs, claimedAt: parseTimestamptz((rows[0] as ClaimedRow).locked_at) });
    await this.o.hooks?.afterClaimCommit?.(jobs);
    this.slots.add(claimed);
    return claimed;
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
