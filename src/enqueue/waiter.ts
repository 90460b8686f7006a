/**
 * Waiting for jobs: `skipq.waitFor(id)` and `enqueueAndWait` (docs/jobs.md,
 * "Waiting for a job"). One waiter per client: a LISTEN connection on the
 * schema's done channel, and one entry per job waited for, however many
 * callers wait for it.
 *
 * How a finish is never missed: the waiter LISTENs first, then marks the live
 * job (notify_on_finish); the trigger of migration 0012 announces a marked
 * job's id when it leaves the live table, at the commit that finishes it. A job
 * that is not live when marked has already finished, and is read from history
 * at once. Notifications are only a shortcut: every entry is also read every
 * `pollMs`, and all of them at once after the LISTEN connection comes back
 * (a notification sent while it was down is lost).
 *
 * A job gone from both tables completed with completed history off — or was
 * deleted, or never existed. The waiter tells them apart by what it saw: a
 * job never seen live (and not created by enqueueAndWait) does not exist for
 * it; a bulk delete announces '!deleted:<id>' before the trigger's '<id>'; any
 * other job that vanished after it was seen live completed.
 *
 * Invariants: a caller's promise settles exactly once (result, timeout, abort
 * or close); an entry lives while it has callers; marking changes nothing about
 * the job but that its finish is announced (and its queue's workers woken
 * again, since the mark's row lock made any claim meanwhile skip it).
 */

import { SkipqError, WaitTimeoutError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import type { FinishedStatus } from "../core/outcome.js";
import { assertId, type Duration, toMs } from "../core/validate.js";
import type { JobFeatureStore } from "../db/jobFeatureStore.js";
import { Listener } from "../db/listener.js";

export type { FinishedStatus };

/** How a job ended, as `waitFor` and `enqueueAndWait` resolve. */
export interface WaitResult<R = unknown> {
  status: FinishedStatus;
  /** What the handler returned; undefined when it returned nothing (or the job did not complete). */
  result: R | undefined;
  /** The job's last error (redacted as stored); null when it has none. */
  error: string | null;
}

export interface WaitOptions {
  /** Give up after this long with WaitTimeoutError (the job is not touched). Default: wait until it finishes. */
  timeout?: Duration;
  /** Give up when this aborts, rejecting with its reason. */
  signal?: AbortSignal;
}

interface Caller {
  resolve: (result: WaitResult) => void;
  reject: (error: unknown) => void;
  timer: NodeJS.Timeout | undefined;
  signal: AbortSignal | undefined;
  onAbort: (() => void) | undefined;
}

interface Entry {
  callers: Set<Caller>;
  /** The status last seen (for the timeout's message). */
  status: string | undefined;
  /** The live job carries the mark (its finish will be announced); false again once its exit was announced. */
  marked: boolean;
  /** Our mark statement is in flight: a read that finds the job gone waits for it to say whether it was live. */
  marking: boolean;
  /** Seen live (by the mark or a read), or created by enqueueAndWait: gone without a trace, it completed. */
  existed: boolean;
  /** Its exit was announced (a done notification), or may have been unheard (the LISTEN connection was down). */
  announced: boolean;
  /** Announced as deleted ('!deleted:<id>'). */
  deleted: boolean;
  /** A read of this job is in flight; another is wanted after it (a notification arrived meanwhile). */
  reading: boolean;
  again: boolean;
}

export interface WaiterOptions {
  /** The marks and reads of waited-for jobs, over the client's store. */
  features: JobFeatureStore;
  /** For the LISTEN connection; without one, finishes are found by polling alone. */
  connectionString: string | undefined;
  logger: Logger;
  /** Time between reads of every waited-for job. */
  pollMs: number;
  /** Wakes the workers of a queue (the client's coalescing notifier), after a mark held one of its jobs. */
  wake: (queue: string) => void;
}

const FINISHED = new Set<string>(["completed", "dead", "cancelled"]);

/** How long, and for how many jobs, a deletion announced before anyone waited for the job is remembered. */
const DELETED_MEMORY_MS = 60_000;
const DELETED_MEMORY_MAX = 10_000;

export class Waiter {
  private readonly entries = new Map<string, Entry>();
  private readonly listener: Listener | undefined;
  private listening: Promise<void> | undefined;
  private pollTimer: NodeJS.Timeout | undefined;
  private polling = false;
  private closed = false;
  /**
   * Deletions announced for jobs nobody here waited for yet, with when: enqueueAndWait's job may be deleted
   * between its enqueue and its entry. Oldest first (a Map keeps insertion order).
   */
  private readonly deletedEarly = new Map<string, number>();

  constructor(private readonly o: WaiterOptions) {
    if (o.connectionString) {
      this.listener = new Listener({
        connectionString: o.connectionString,
        channel: `${o.features.store.schema.channel}:done`,
        logger: o.logger,
        onNotify: (id) => this.notified(id),
        // Back after a loss: whatever finished meanwhile was announced to nobody.
        onConnectionChange: (connected) => {
          if (!connected) return;
          for (const [id, entry] of this.entries) {
            entry.announced = true;
            this.read(id);
          }
        },
      });
    }
  }

  /** The LISTEN connection's server process id, while connected (tests terminate it). */
  get listenerPid(): number | undefined {
    return this.listener?.backendPid;
  }

  /** Opens the LISTEN connection (once; resolves after the first attempt, connected or not). */
  listen(): Promise<void> {
    this.listening ??= this.listener?.start() ?? Promise.resolve();
    return this.listening;
  }

  /**
   * Resolves once job `id` is completed, dead or cancelled. `existed`: the caller knows the job was
   * committed (enqueueAndWait created it), so with completed history off a job already gone completed.
   */
  async wait<R = unknown>(id: string | number, options: WaitOptions = {}, existed = false): Promise<WaitResult<R>> {
    const jobId = assertId(id);
    const timeoutMs = options.timeout === undefined ? undefined : toMs("timeout", options.timeout);
    if (options.signal?.aborted) throw options.signal.reason;
    if (this.closed) throw closedError();
    // Listening before the job is marked: its finish can then only be announced to us.
    await this.listen();
    if (options.signal?.aborted) throw options.signal.reason;
    if (this.closed) throw closedError();
    return new Promise<WaitResult<R>>((resolve, reject) => {
      const caller: Caller = {
        resolve: resolve as (result: WaitResult) => void,
        reject,
        timer: undefined,
        signal: options.signal,
        onAbort: undefined,
      };
      let entry = this.entries.get(jobId);
      const fresh = entry === undefined;
      if (!entry) {
        entry = {
          callers: new Set(),
          status: undefined,
          marked: false,
          marking: false,
          existed: false,
          announced: false,
          deleted: this.deletedEarly.delete(jobId),
          reading: false,
          again: false,
        };
        this.entries.set(jobId, entry);
      }
      if (existed) entry.existed = true;
      entry.callers.add(caller);
      if (timeoutMs !== undefined) {
        caller.timer = setTimeout(
          () => this.settle(jobId, caller, new WaitTimeoutError(jobId, timeoutMs, this.entries.get(jobId)?.status)),
          timeoutMs,
        );
      }
      if (options.signal) {
        caller.onAbort = () => this.settle(jobId, caller, options.signal?.reason);
        options.signal.addEventListener("abort", caller.onAbort, { once: true });
      }
      this.schedulePoll();
      if (fresh) void this.markAndRead(jobId);
    });
  }

  /** Stops listening and polling; every wait still open rejects. */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.pollTimer);
    for (const [id, entry] of this.entries) for (const caller of entry.callers) this.settle(id, caller, closedError());
    await this.listener?.stop();
  }

  /** A done-channel message: '<id>' (a marked job left the live table) or '!deleted:<id>' (a bulk delete took it). */
  private notified(message: string): void {
    const deleted = message.startsWith("!deleted:");
    const id = deleted ? message.slice("!deleted:".length) : message;
    const entry = this.entries.get(id);
    if (!entry) {
      if (deleted) this.rememberDeleted(id);
      return;
    }
    if (deleted) entry.deleted = true;
    entry.announced = true;
    // The marked row is gone: a row back in the live table (an operator's retry) needs a mark of its own.
    entry.marked = false;
    this.read(id);
  }

  private rememberDeleted(id: string): void {
    const now = Date.now();
    this.deletedEarly.delete(id);
    this.deletedEarly.set(id, now);
    for (const [old, at] of this.deletedEarly) {
      if (this.deletedEarly.size <= DELETED_MEMORY_MAX && at > now - DELETED_MEMORY_MS) break;
      this.deletedEarly.delete(old);
    }
  }

  /** Marks a job just waited for, then reads it if it was not live (it finished before the mark). */
  private async markAndRead(id: string): Promise<void> {
    const before = this.entries.get(id);
    if (!before || before.marking) return;
    before.marking = true;
    try {
      const mark = await this.o.features.jobWaitMark({ jobId: id });
      // The mark's row lock made any claim meanwhile skip the job: wake its workers again, now it is gone.
      if (mark?.held) this.o.wake(mark.queue);
      const entry = this.entries.get(id);
      if (!entry) return;
      entry.marking = false;
      if (mark) {
        entry.status = mark.status;
        entry.existed = true;
        // Its exit was announced while the mark was in flight (the read then left the verdict to us): read
        // again, and leave it unmarked — the row may be gone, and a read that finds it live marks it again.
        if (entry.announced) this.read(id);
        else entry.marked = true;
      } else {
        this.read(id);
      }
    } catch (error) {
      before.marking = false;
      // The poll reads it anyway; only a mark that never lands leaves it to polling alone.
      this.o.logger.warn({ err: error, jobId: id }, "skipq: could not mark a job as waited for; polling it");
    }
  }

  /** Reads one job now (coalesced: one read in flight per job, one more queued at most). */
  private read(id: string): void {
    const entry = this.entries.get(id);
    if (!entry) return;
    if (entry.reading) {
      entry.again = true;
      return;
    }
    entry.reading = true;
    void this.readMany([id]).finally(() => {
      entry.reading = false;
      if (entry.again) {
        entry.again = false;
        this.read(id);
      }
    });
  }

  private schedulePoll(): void {
    if (this.pollTimer || this.closed) return;
    this.pollTimer = setTimeout(() => {
      this.pollTimer = undefined;
      void this.poll();
    }, this.o.pollMs);
    this.pollTimer.unref();
  }

  private async poll(): Promise<void> {
    if (this.polling || this.entries.size === 0) return;
    this.polling = true;
    try {
      await this.readMany([...this.entries.keys()]);
    } finally {
      this.polling = false;
      if (this.entries.size > 0) this.schedulePoll();
    }
  }

  /**
   * Reads jobs and settles the callers of those that finished. A job that is live again (an operator
   * retried it) is marked again. One gone without a trace is judged by `vanished`.
   */
  private async readMany(ids: string[]): Promise<void> {
    try {
      const rows = await this.o.features.jobWaitRead({ ids });
      const seen = new Set<string>();
      for (const row of rows) {
        seen.add(row.id);
        const entry = this.entries.get(row.id);
        if (!entry) continue;
        entry.status = row.status;
        if (!FINISHED.has(row.status)) {
          entry.existed = true;
          entry.announced = false;
          // Live again after it finished (an operator retried it): its new row needs the mark.
          if (!entry.marked) void this.markAndRead(row.id);
          continue;
        }
        const result: WaitResult = {
          status: row.status as FinishedStatus,
          result: row.no_result ? undefined : row.result,
          error: row.last_error,
        };
        for (const caller of entry.callers) this.settle(row.id, caller, undefined, result);
      }
      const missing = ids.filter((id) => !seen.has(id) && this.entries.has(id));
      if (missing.length === 0) return;
      const historyOff = (await this.o.features.settingsKeepCompletedRead()) === false;
      for (const id of missing) {
        const entry = this.entries.get(id);
        if (!entry) continue;
        const outcome = this.vanished(id, entry, historyOff);
        if (outcome === undefined) continue;
        for (const caller of entry.callers) this.settle(id, caller, outcome.error, outcome.result);
      }
    } catch (error) {
      this.o.logger.warn(
        { err: error, jobs: ids.length },
        "skipq: reading waited-for jobs failed; retrying at the next poll",
      );
    }
  }

  /**
   * What a job found in neither table means for its callers; undefined: not decided yet. With history kept,
   * and for a deletion announced, the job is not found. With completed history off, a job gone after it
   * existed completed — unless the verdict must wait: for the mark in flight (was it live?), or, when a read
   * raced the commit that removed a marked job, for that commit's announcement (which says "deleted" first
   * when it was a deletion). The announcement comes on the LISTEN connection, or was lost while it was down,
   * and then the reconnect's read decides.
   */
  private vanished(
    id: string,
    entry: Entry,
    historyOff: boolean,
  ): { error: SkipqError; result?: undefined } | { error?: undefined; result: WaitResult } | undefined {
    const notFound = (why: string) => ({ error: new SkipqError("SKIPQ_NOT_FOUND", `job ${id} ${why}`) });
    if (entry.deleted) return notFound("was deleted while it was waited for");
    if (!historyOff) {
      return notFound(
        entry.status === undefined
          ? "does not exist (never enqueued, its transaction not committed yet, or pruned)"
          : "vanished while it was waited for (deleted or pruned)",
      );
    }
    if (entry.marking) return undefined;
    if (!entry.existed) {
      return notFound(
        "does not exist (never enqueued, its transaction not committed yet, deleted, or it completed before this wait with completed history off)",
      );
    }
    if (entry.marked && !entry.announced && this.listener?.connected) return undefined;
    return { result: { status: "completed", result: undefined, error: null } };
  }

  private settle(id: string, caller: Caller, error: unknown, result?: WaitResult): void {
    const entry = this.entries.get(id);
    if (!entry?.callers.delete(caller)) return;
    clearTimeout(caller.timer);
    if (caller.onAbort) caller.signal?.removeEventListener("abort", caller.onAbort);
    if (entry.callers.size === 0) this.entries.delete(id);
    if (result) caller.resolve(result);
    else caller.reject(error);
  }
}

function closedError(): SkipqError {
  return new SkipqError("SKIPQ_SHUTDOWN", "the skipq client was closed while waiting for a job");
}
