/**
 * The completer: records outcomes in batched, lease-fenced statements. One
 * queue holds every recorded outcome (core/outcome.ts's words) in the order
 * it came; a flush takes the oldest and sorts them: successes into one
 * `completeMany` (those with a result into their own), every other outcome
 * into one `settleMany` (settlements first, so a job that failed before
 * another completed is recorded before it). One flush at a time; a failed flush is
 * retried with backoff until the jobs' leases would have expired anyway, then
 * given up (the reaper returns those jobs). A batch the database refuses for
 * one row's data is split until that row is alone: one job's outcome never
 * costs the others theirs.
 *
 * Invariants: an outcome is written only under the lease it was claimed with,
 * and a rejected one is counted as stale, never retried; the backlog of
 * unwritten outcomes is bounded — at `maxBacklog` the fetcher stops claiming
 * (see `saturated`) instead of letting memory grow while the database cannot
 * take outcomes.
 */
import type { BackoffOptions } from "../core/backoff.js";
import { backoffMs, retryWaitMs } from "../core/backoff.js";
import { errorFingerprint, formatError } from "../core/errorFormat.js";
import { FailPermanently, type RetryIn, UnknownKindError, ValidationError } from "../core/errors.js";
import type { Logger } from "../core/logger.js";
import type { SettledOutcome } from "../core/outcome.js";
import type { ErrorRedactor } from "../core/secrets.js";
import type { JobFeatureStore } from "../db/jobFeatureStore.js";
import type { InsertRow, JobStore, Settlement } from "../db/jobStore.js";
import { refused } from "../shared/instance.js";
import { sleep } from "../shared/wakeup.js";
import { spawnedRows } from "../workflow/spawning.js";
import { attemptEntry } from "./attemptLog.js";
import type { Outcome, Running, WorkerStats } from "./types.js";

export interface CompleterOptions {
  jobs: JobStore;
  /** Statements for jobs that use results (and the other features of docs/jobs.md). */
  features: JobFeatureStore;
  logger: Logger;
  stats: WorkerStats;
  backoff: BackoffOptions;
  outcomeBatchSize: number;
  lockTimeoutMs: number;
  /** True once the worker stopped: a failing flush gives up at once. */
  stopped: () => boolean;
  onStale: (ids: string[]) => void;
  onWarning: (error: unknown) => void;
  /** After each flush that wrote something (a limited queue's slot is free only now). */
  onFlushed: () => void;
  /** A retry or snooze was written: the job falls due again in `delayMs` (the fetcher wakes then). */
  onDue: (delayMs: number) => void;
  /** Applied to every error text before it is stored. */
  redactError: ErrorRedactor;
  /** This worker's id, named in attempt logs. */
  workerId: string;
  /**
   * Workflows: records one success together with the rows its handler spawned, in one transaction; false
   * when the lease no longer matched (nothing was written).
   */
  completeSpawning: (id: string, lease: string, result: string | null, rows: InsertRow[]) => Promise<boolean>;
}

/**
 * One outcome recorded and not written yet. The queue holds them in the order they were recorded; a flush
 * takes the oldest and sorts them into its statements.
 */
interface Recorded {
  running: Running;
  /** Every outcome but success: what the settle statement writes (with its attempt's log entry). */
  settlement?: Settlement;
  /** A success's result as JSON text, when its handler returned one (written by a statement of its own). */
  result?: string;
  /** Workflows: the rows a successful handler spawned, written with its completion in one transaction. */
  spawned?: InsertRow[];
  /** A success whose handler logged: its attempt_logs entry, appended before its outcome. */
  entry?: string;
}

/** Workflows: a success whose handler spawned jobs; written alone, in its own transaction. */
interface Spawning {
  running: Running;
  rows: InsertRow[];
  result: string | null;
}

export class Completer {
  /** Unwritten outcomes at which the worker stops claiming. */
  readonly maxBacklog: number;
  /** Outcomes recorded and not written yet, oldest first. */
  private queue: Recorded[] = [];
  /** Outcomes taken by the flush in progress. */
  private inFlight = 0;
  private flushing: Promise<void> | undefined;
  private flushScheduled = false;

  constructor(private readonly o: CompleterOptions) {
    this.maxBacklog = 2 * o.outcomeBatchSize;
  }

  /** Outcomes recorded here but not yet written. */
  get backlog(): number {
    return this.queue.length + this.inFlight;
  }

  /** True while the backlog is at its cap: claim nothing more until it drains. */
  get saturated(): boolean {
    return this.backlog >= this.maxBacklog;
  }

  /**
   * Queues a job's outcome; it is written in the next flush (this tick's outcomes share one). `result`: a
   * completed job's result as JSON text, when its handler returned one.
   */
  record(running: Running, outcome: Outcome, error: unknown, result?: string): void {
    const { job, lease } = running;
    const recorded: Recorded = { running };
    const settle = (outcome: SettledOutcome, fields: Partial<Settlement> = {}) => {
      recorded.settlement = { id: job.id, lease, outcome, error: null, delayMs: 0, fingerprint: null, ...fields };
    };
    const lines = running.attemptLines;
    switch (outcome) {
      case "completed":
        if (running.spawns) recorded.spawned = spawnedRows(running.spawns);
        if (result !== undefined) recorded.result = result;
        break;
      case "snoozed":
        // A kind this worker has no handler for says so on the job (its last error); a RetryIn leaves it as it was.
        settle("snoozed", {
          delayMs: (error as RetryIn | UnknownKindError).delayMs,
          error: error instanceof UnknownKindError ? this.errorText(error, job) : null,
        });
        break;
      case "dead":
        // A thrown error on the last attempt is a failed attempt too (FailPermanently is a decision, not one).
        if (!(error instanceof FailPermanently)) this.o.stats.failed++;
        settle("dead", { error: this.errorText(error, job), fingerprint: errorFingerprint(job.kind, error) });
        break;
      case "cancelled":
        settle("cancelled", { error: this.errorText(error, job) });
        break;
      case "released":
        this.o.stats.released++;
        settle("released");
        break;
      default:
        this.o.stats.failed++;
        settle("retry", {
          error: this.errorText(error, job),
          delayMs: backoffMs(job.attempt, this.o.backoff),
          fingerprint: errorFingerprint(job.kind, error),
        });
    }
    const { settlement } = recorded;
    const logged = lines !== undefined && (lines.lines.length > 0 || lines.dropped > 0);
    // Every attempt that did not simply succeed is recorded (docs/jobs.md, "Attempts"), in its settlement's
    // own statement; a success only when its handler logged (the job page shows a plain success from the row).
    // A job handed back from the prefetch buffer never ran: no attempt.
    if (settlement !== undefined ? running.started : logged) {
      running.attemptLines = undefined;
      // An attempt that threw is "failed" in its log, the last one too (docs/jobs.md); "dead" is FailPermanently.
      const shown = outcome === "dead" && !(error instanceof FailPermanently) ? "retry" : outcome;
      const entry = attemptEntry(lines ?? { startedAt: this.startedAt(running), lines: [], dropped: 0 }, {
        attempt: job.attempt,
        worker: this.o.workerId,
        outcome: shown,
        error: settlement?.error ?? null,
      });
      if (settlement !== undefined) settlement.entry = entry;
      else recorded.entry = entry;
    }
    this.queue.push(recorded);
    this.scheduleFlush();
  }

  /** When the attempt's handler started, as an ISO time (running.startedAt is on the performance clock). */
  private startedAt(running: Running): string {
    return new Date(Date.now() - (performance.now() - running.startedAt)).toISOString();
  }

  /** What last_error stores: the error's text, with the job's secrets redacted. */
  private errorText(error: unknown, job: Running["job"]): string {
    return this.o.redactError(formatError(error), job);
  }

  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    // Let the outcomes of this tick gather into one statement.
    setImmediate(() => {
      this.flushScheduled = false;
      void this.flush();
    });
  }

  /** Writes every queued outcome; resolves when none is left (or they were given up). */
  async flush(): Promise<void> {
    while (this.flushing) await this.flushing;
    if (!this.unflushed) return;
    this.flushing = this.flushNow().finally(() => {
      this.flushing = undefined;
    });
    await this.flushing;
    this.o.onFlushed();
    if (this.unflushed) await this.flush();
  }

  private get unflushed(): boolean {
    return this.queue.length > 0;
  }

  private async flushNow(): Promise<void> {
    // The oldest outcomes, sorted into their statements; a job's log goes with its outcome.
    const completions: Array<{ id: string; lease: string }> = [];
    const withResults: Array<{ id: string; lease: string; result: string }> = [];
    const settlements: Settlement[] = [];
    const spawning: Spawning[] = [];
    const logs: Array<{ id: string; lease: string; entry: string }> = [];
    for (const r of this.queue.splice(0, this.o.outcomeBatchSize)) {
      const { id } = r.running.job;
      const { lease } = r.running;
      if (r.entry !== undefined) logs.push({ id, lease, entry: r.entry });
      if (r.settlement !== undefined) settlements.push(r.settlement);
      else if (r.spawned !== undefined)
        spawning.push({ running: r.running, rows: r.spawned, result: r.result ?? null });
      else if (r.result !== undefined) withResults.push({ id, lease, result: r.result });
      else completions.push({ id, lease });
    }
    this.inFlight = completions.length + withResults.length + settlements.length + spawning.length;
    let firstFailureAt: number | undefined;
    try {
      for (let attempt = 1; ; attempt++) {
        try {
          // Before the outcomes: they move finished jobs to history, and the logs go with them.
          if (logs.length > 0) {
            await this.o.features.appendAttemptLogs(logs);
            logs.length = 0;
          }
          await this.isolating(settlements, async (part) => {
            const accepted = (await this.o.jobs.settleMany(part)).map((r) => r.id);
            this.noteStale(
              part.map((x) => x.id),
              accepted,
            );
            this.noteDue(part, accepted);
          });
          await this.isolating(completions, async (part) => {
            const sent = part.map((c) => c.id);
            const accepted = await this.o.jobs.completeMany(
              sent,
              part.map((c) => c.lease),
            );
            this.o.stats.completed += accepted.length;
            this.noteStale(sent, accepted);
          });
          await this.isolating(withResults, async (part) => {
            const sent = part.map((c) => c.id);
            const accepted = await this.o.features.completeManyWithResults(
              sent,
              part.map((c) => c.lease),
              part.map((c) => c.result),
            );
            this.o.stats.completed += accepted.length;
            this.noteStale(sent, accepted);
          });
          while (spawning.length > 0) {
            await this.completeSpawning(spawning[0] as Spawning);
            spawning.shift();
          }
          return;
        } catch (error) {
          this.o.onWarning(error);
          // Outcomes are retried until their leases would have expired anyway (one lease since the first
          // failure: the backoff below grows to 2 s, so counting attempts kept a 30 s lease's outcomes retrying
          // for minutes after a failover); then the reaper takes over.
          firstFailureAt ??= performance.now();
          if (performance.now() - firstFailureAt > this.o.lockTimeoutMs || this.o.stopped()) {
            this.o.logger.error(
              { err: error, jobs: completions.length + withResults.length + settlements.length + spawning.length },
              "skipq: could not record outcomes; their leases will expire and the jobs run again",
            );
            return;
          }
          if (attempt === 1) this.o.logger.warn({ err: error }, "skipq: recording outcomes failed; retrying");
          await sleep(retryWaitMs(attempt + 1, 50, 2000, false));
        }
      }
    } finally {
      this.inFlight = 0;
    }
  }

  /**
   * Runs `write` over `items`, one outcome statement's batch, and empties `items` as parts are written. A
   * batch refused for one row's data (SQLSTATE class 22, 23 or P0: a bad value, a constraint, a raise) is
   * split in halves until that row is alone, so one job's outcome never costs the others theirs: a row
   * refused alone, while other parts of the batch were written, is logged and given up (its lease expires and
   * the reaper returns the job). When no part could be written, the refusal is the batch's, not a row's (every
   * outcome refused): it is thrown like anything else (a lost connection, a deadlock, a serialization
   * failure), with `items` holding every part not yet written, for the flush to retry.
   */
  private async isolating<T extends { id: string }>(items: T[], write: (part: T[]) => Promise<void>): Promise<void> {
    const parts = items.length > 0 ? [items.slice()] : [];
    const refused: Array<{ item: T; error: unknown }> = [];
    let written = 0;
    while (parts.length > 0) {
      const part = parts[0] as T[];
      try {
        await write(part);
        written += part.length;
      } catch (error) {
        if (!refusedForItsData(error)) {
          items.splice(0, items.length, ...refused.map((r) => r.item), ...parts.flat());
          throw error;
        }
        if (part.length > 1) {
          const half = Math.ceil(part.length / 2);
          parts.splice(0, 1, part.slice(0, half), part.slice(half));
          continue;
        }
        refused.push({ item: part[0] as T, error });
        parts.shift();
        // Eight rows refused alone and none written: every outcome is being refused; stop splitting.
        if (written === 0 && refused.length >= 8) break;
        continue;
      }
      parts.shift();
    }
    if (refused.length > 0 && written === 0) {
      items.splice(0, items.length, ...refused.map((r) => r.item), ...parts.flat());
      throw refused[0]?.error;
    }
    for (const { item, error } of refused) {
      this.o.onWarning(error);
      this.o.logger.error(
        { err: error, job: item.id },
        "skipq: the database refused this job's outcome; its lease will expire and the job run again",
      );
    }
    items.length = 0;
  }

  /** Workflows: one success with its spawned rows; rows that can never be enqueued fail the job instead. */
  private async completeSpawning({ running, rows, result }: Spawning): Promise<void> {
    const { job, lease } = running;
    try {
      const accepted = await this.o.completeSpawning(job.id, lease, result, rows);
      if (accepted) this.o.stats.completed++;
      this.noteStale([job.id], accepted ? [job.id] : []);
    } catch (error) {
      if (!(error instanceof ValidationError)) throw error;
      this.o.stats.failed++;
      const settled = await this.o.jobs.settleMany([
        {
          id: job.id,
          lease,
          outcome: "retry",
          error: this.errorText(error, job),
          delayMs: backoffMs(job.attempt, this.o.backoff),
          fingerprint: errorFingerprint(job.kind, error),
        },
      ]);
      this.noteStale(
        [job.id],
        settled.map((r) => r.id),
      );
    }
  }

  /** The earliest run_at among the retries and snoozes just written, as a delay from now (for the fetcher). */
  private noteDue(settlements: readonly Settlement[], accepted: readonly string[]): void {
    const written = new Set(accepted);
    let soonest = Number.POSITIVE_INFINITY;
    for (const x of settlements) {
      if ((x.outcome === "retry" || x.outcome === "snoozed") && written.has(x.id))
        soonest = Math.min(soonest, x.delayMs);
    }
    if (soonest < Number.POSITIVE_INFINITY) this.o.onDue(soonest);
  }

  private noteStale(sent: readonly string[], accepted: readonly string[]): void {
    const stale = refused(sent, accepted);
    if (stale.length === 0) return;
    this.o.stats.staleOutcomes += stale.length;
    this.o.logger.warn(
      { jobs: stale },
      "skipq: outcomes rejected because the jobs' leases had moved on (expired and reclaimed, or cancelled)",
    );
    this.o.onStale(stale);
  }
}

/** True for an error that one row's data caused (SQLSTATE class 22, 23 or P0), which splitting the batch isolates. */
function refusedForItsData(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === "string" && /^(22|23|P0)/.test(code);
}
