/**
 * Leases: keeps every held job's lease alive (one batched heartbeat per
 * interval, buffered jobs included), notices a lost lease (expired and reaped,
 * or cancelled by an operator) and aborts that job's handler, whose outcome
 * will then not be written.
 *
 * A cancel message on the schema's channel is a hint, never an authority:
 * anyone who can connect to the database can send one. On a hint the job's
 * lease is checked in the database (a heartbeat of that one job); only a lease
 * the database no longer honours aborts the handler. A handler that finishes
 * meanwhile records its outcome as usual, fenced by the lease. Whichever sees
 * a lease gone first (a heartbeat or a hint), the job's history says why: a
 * cancelled job ends "cancelled", any other loss "lease-lost".
 *
 * Progress (`ctx.progress()`, docs/jobs.md) rides on heartbeats: a call only
 * notes the value; the next heartbeat writes it, and a held job with progress
 * not yet written brings that heartbeat forward to at most `progressMs` after
 * the call. However often handlers call it, progress costs at most one
 * statement per `progressMs`, plus one when a job ends with a value unwritten.
 *
 * A job whose handler called ctx.completeTx is left alone from that call on:
 * the caller's transaction holds its row, so a heartbeat would wait on it, and
 * a job gone because that transaction committed is not a lost lease.
 */
import { SkipqError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import type { JobFeatureStore } from "../db/jobFeatureStore.js";
import type { JobStore } from "../db/jobStore.js";
import { FailureLog } from "../shared/failureLog.js";
import type { HeldJobs } from "./heldJobs.js";
import type { Running, WorkerStats } from "./types.js";

export interface LeasesOptions {
  jobs: JobStore;
  features: JobFeatureStore;
  /** Longest time a progress value waits to be written. */
  progressMs: number;
  /** Every job whose lease this worker holds; a lost one is marked there (lose). */
  held: HeldJobs;
  leaseMs: number;
  heartbeatMs: number;
  logger: Logger;
  stats: WorkerStats;
  onLost: (running: Running) => void;
  onWarning: (error: unknown) => void;
}

export class Leases {
  /**
   * The batched heartbeat, every `heartbeatMs`, on a plain interval rather than a Service: a heartbeat that
   * hangs (a dropped connection, a row another transaction holds) must not delay the next one, which goes
   * out on another connection — a Service's passes never overlap, and one hung pass would let every held
   * lease run out.
   */
  private timer: NodeJS.Timeout | undefined;
  /** Failed heartbeats, logged throttled (the first, every 20th, one line when they work again). */
  private readonly failures: FailureLog;
  private progressTimer: NodeJS.Timeout | undefined;
  /** Statements in flight that carry progress values (a job's end waits for them). */
  private readonly progressWrites = new Set<Promise<unknown>>();
  private progressSoon: Promise<void> | undefined;

  constructor(private readonly o: LeasesOptions) {
    this.failures = new FailureLog(o.logger, "skipq: heartbeat", "will retry at the next interval");
  }

  /** Heartbeats every interval until stop(). Idempotent. No backoff after a failure: a lease not extended expires. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => {
      this.heartbeatAll().then(
        () => this.failures.succeeded(),
        (error) => {
          this.o.onWarning(error);
          this.failures.failed(error);
        },
      );
    }, this.o.heartbeatMs);
    this.timer.unref();
  }

  /**
   * Stops heartbeating. Safe before start and twice. A heartbeat in flight is not waited for: against a
   * database that does not answer it could hold the worker's stop for as long as the connection hangs.
   */
  stop(): void {
    clearInterval(this.timer);
    this.timer = undefined;
    clearTimeout(this.progressTimer);
    this.progressTimer = undefined;
  }

  /** One heartbeat for every held job; those the database no longer honours are lost. Throws when it failed. */
  async heartbeatAll(): Promise<void> {
    // A job completed by ctx.completeTx is not touched: the caller's transaction may hold its row.
    const held = this.o.held.heartbeatable();
    if (held.length === 0) return;
    const asked = performance.now();
    const alive = held.some((r) => r.progressDirty)
      ? await this.sendProgress(held)
      : await this.o.jobs.heartbeatMany(
          held.map((r) => ({ id: r.job.id, lease: r.lease })),
          this.o.leaseMs,
        );
    await this.loseMissing(held, alive, asked);
  }

  /**
   * Jobs sent at `asked` whose leases came back keep them (confirmedAt); the others are lost. A lease
   * gone because an operator cancelled the job (the heartbeat can see it before the cancel message arrives)
   * ends as cancelled, not as a lost lease.
   */
  private async loseMissing(sent: readonly Running[], aliveLeases: readonly string[], asked: number): Promise<void> {
    if (aliveLeases.length === sent.length) {
      for (const running of sent) running.confirmedAt = asked;
      return;
    }
    // By lease, not id: two holds of one job (its lease ran out under a running handler and this worker leased
    // it again) share an id, and only one of their leases is honoured.
    const kept = new Set(aliveLeases);
    const lost: Running[] = [];
    for (const running of sent) {
      if (kept.has(running.lease)) running.confirmedAt = asked;
      // A heartbeat sent just before ctx.completeTx wrote: the job is gone because its caller committed.
      else if (!running.completedTx) lost.push(running);
    }
    if (lost.length === 0) return;
    let cancelled = new Set<string>();
    try {
      cancelled = await this.o.jobs.cancelledAmong(lost.map((r) => r.job.id));
    } catch (error) {
      // The lease is gone either way; only the reason is unknown.
      this.o.onWarning(error);
    }
    for (const running of lost) this.lose(running, cancelled.has(running.job.id) ? "cancel" : "lease");
  }

  /** A handler called ctx.progress(): keep the value; it is written within `progressMs`. */
  noteProgress(running: Running, encoded: string): void {
    if (running.detached) return;
    running.progress = encoded;
    running.progressDirty = true;
    if (this.progressTimer) return;
    this.progressTimer = setTimeout(() => {
      this.progressTimer = undefined;
      void this.writeProgress();
    }, this.o.progressMs);
    this.progressTimer.unref();
  }

  /**
   * A job's handler ended: make sure its last progress value is written before its outcome (which moves the
   * row). Waits for writes in flight, then writes what is left, together with other jobs ending now.
   */
  async settleProgress(running: Running): Promise<void> {
    for (let round = 0; round < 3 && !running.detached; round++) {
      if (this.progressWrites.size > 0) await Promise.allSettled([...this.progressWrites]);
      if (!running.progressDirty) return;
      this.progressSoon ??= new Promise<void>((resolve) => setImmediate(resolve))
        .then(() => this.writeProgress())
        .finally(() => {
          this.progressSoon = undefined;
        });
      await this.progressSoon;
    }
  }

  /** Writes the progress of the held jobs that have some unwritten (a heartbeat for them). */
  private async writeProgress(): Promise<void> {
    const dirty = [...this.o.held.values()].filter((r) => r.progressDirty && !r.detached && !r.completedTx);
    if (dirty.length === 0) return;
    try {
      const asked = performance.now();
      await this.loseMissing(dirty, await this.sendProgress(dirty), asked);
    } catch (error) {
      this.o.onWarning(error);
      this.o.logger.warn({ err: error }, "skipq: writing progress failed; will retry at the next heartbeat");
    }
  }

  /** One heartbeat of `held` carrying the unwritten progress values; a failed one leaves them unwritten. */
  private async sendProgress(held: readonly Running[]): Promise<string[]> {
    const sent = held.map((r) => {
      const progress = r.progressDirty ? r.progress : undefined;
      r.progressDirty = false;
      return { id: r.job.id, lease: r.lease, progress };
    });
    const write = this.o.features.heartbeatWithProgress(sent, this.o.leaseMs);
    this.progressWrites.add(write);
    try {
      return await write;
    } catch (error) {
      for (const [i, r] of held.entries()) if (sent[i]?.progress !== undefined) r.progressDirty = true;
      throw error;
    } finally {
      this.progressWrites.delete(write);
    }
  }

  /** Extends one job's lease now; false (and the handler aborted) when it is lost. */
  async heartbeatOne(running: Running): Promise<boolean> {
    if (running.detached) return false;
    // Completed by ctx.completeTx (its caller's transaction may hold the row): nothing to extend.
    if (running.completedTx) return true;
    const asked = performance.now();
    const alive = await this.o.jobs.heartbeatMany([{ id: running.job.id, lease: running.lease }], this.o.leaseMs);
    await this.loseMissing([running], alive, asked);
    return alive.length === 1;
  }

  /** Extends the leases of a batch's jobs now, in one statement; false (and the batch aborted) when all are lost. */
  async heartbeatSome(runnings: readonly Running[]): Promise<boolean> {
    const live = runnings.filter((r) => !r.detached);
    if (live.length === 0) return false;
    const asked = performance.now();
    const alive = await this.o.jobs.heartbeatMany(
      live.map((r) => ({ id: r.job.id, lease: r.lease })),
      this.o.leaseMs,
    );
    await this.loseMissing(live, alive, asked);
    return alive.length > 0;
  }

  /** A "!cancel:<id>" message arrived: abort the job's handler if the database confirms its lease is gone. */
  async cancelHint(id: string): Promise<void> {
    const running = this.o.held.get(id);
    if (!running || running.detached || running.completedTx) return;
    try {
      if (await this.heartbeatOne(running)) {
        this.o.logger.warn(
          { jobId: id },
          "skipq: ignored a cancel message for a job whose lease the database still honours (not cancelled there)",
        );
      }
    } catch (error) {
      // Unverifiable now: the next heartbeat checks the lease anyway.
      this.o.onWarning(error);
    }
  }

  private lose(running: Running, reason: "lease" | "cancel"): void {
    if (!this.o.held.lose(running, reason)) return;
    const id = running.job.id;
    if (reason === "cancel") {
      this.o.logger.info({ jobId: id }, "skipq: job cancelled by an operator; aborting its handler");
      running.controller.abort(new SkipqError("SKIPQ_CANCEL", `job ${id} was cancelled`));
      return;
    }
    this.o.stats.leasesLost++;
    this.o.logger.warn(
      { jobId: id },
      "skipq: lease lost (expired and reaped, or cancelled); aborting the handler, its outcome will not be recorded",
    );
    running.controller.abort(new SkipqError("SKIPQ_LEASE_LOST", `the lease on job ${id} was lost`));
    this.o.onLost(running);
  }
}
