/**
 * The scheduler: periodic (cron) jobs declared in code, enqueued exactly once
 * per tick across any number of schedulers.
 *
 * Invariants: every tick is decided on the database clock (or an injected
 * "now" in tests); a tick is enqueued at most once (schedule row locked and
 * advanced in the enqueue's transaction, plus an idempotency key per tick);
 * after downtime at most `backfill` missed ticks are enqueued, never an
 * unbounded burst; an invalid expression or time zone is rejected by add(),
 * before anything runs. It never runs jobs itself: a worker does.
 */
import { Cron } from "croner";
import { ValidationError } from "../core/errors.js";
import type { PayloadOf } from "../core/job.js";
import { childLogger, type Logger } from "../core/logger.js";
import { assertInt, assertName, type Duration, encodePayload, toMs } from "../core/validate.js";
import { CronStore } from "../db/cronStore.js";
import type { Store } from "../db/store.js";
import { Service } from "../shared/service.js";
import type { BulkItem, EnqueueOptions, JobRef, Skipq } from "../skipq.js";

/** Longest a cron pass's transaction may sit idle (it holds its schedules' row locks). */
const PASS_IDLE_BOUND_MS = 5000;

export interface CronOptions
  extends Omit<EnqueueOptions, "runAt" | "delay" | "idempotencyKey" | "unique" | "debounce"> {
  /** Names the schedule across all processes (letters, digits, `_ . : -`). Default: the job's kind. */
  name?: string;
  /** IANA time zone the expression is read in, e.g. "Europe/Paris" (DST handled by croner). Default "UTC". */
  timezone?: string;
  /**
   * Missed ticks (while every scheduler was down) to enqueue besides the latest
   * due one, oldest first. 0 enqueues only the latest missed tick. Default 0, at most 1000.
   */
  backfill?: number;
}

export interface SchedulerOptions {
  /** Longest sleep between passes, even when no tick is due (covers clock steps). Default "1m". */
  maxInterval?: Duration;
}

export interface CronTickResult {
  name: string;
  /** Ticks enqueued by this pass (another scheduler may have taken the others). */
  ticks: Date[];
  jobIds: string[];
}

interface Schedule {
  name: string;
  expression: string;
  timezone: string;
  cron: Cron;
  job: JobRef<unknown>;
  kind: string;
  queue: string;
  payload: unknown;
  options: EnqueueOptions;
  backfill: number;
}

/** Parses a cron expression, or throws a ValidationError saying what is wrong. */
export function parseCron(expression: string, timezone = "UTC"): Cron {
  if (typeof expression !== "string" || expression.trim() === "")
    throw new ValidationError('cron expression must be a non-empty string such as "0 * * * *"');
  try {
    new Intl.DateTimeFormat("en-US", { timeZone: timezone });
  } catch {
    throw new ValidationError(
      `time zone ${JSON.stringify(timezone)} is not a valid IANA time zone (e.g. "UTC", "Europe/Paris", "America/New_York")`,
    );
  }
  try {
    return new Cron(expression, { paused: true, timezone, mode: "5-or-6-parts" });
  } catch (error) {
    throw new ValidationError(
      `cron expression ${JSON.stringify(expression)} is invalid: ${(error as Error).message}; use 5 fields (minute hour day month weekday) or 6 with seconds first`,
    );
  }
}

export class Scheduler {
  private readonly schedules = new Map<string, Schedule>();
  private readonly store: Store;
  private readonly cronStore: CronStore;
  private readonly logger: Logger;
  private readonly service: Service<CronTickResult[]>;
  private registered = false;
  /** Database clock minus local clock, from the last pass: sleeps are aimed at database-time ticks. */
  private offsetMs = 0;

  constructor(
    private readonly client: Pick<Skipq, "store" | "logger" | "maxPayloadBytes" | "enqueueManyTx">,
    options: SchedulerOptions = {},
  ) {
    this.store = client.store;
    this.cronStore = new CronStore(client.store);
    this.logger = childLogger(client.logger, { role: "scheduler" });
    const maxIntervalMs = toMs("maxInterval", options.maxInterval ?? "1m", { allowZero: false });
    this.service = new Service({
      name: "cron",
      intervalMs: maxIntervalMs,
      run: () => this.runOnce(),
      logger: this.logger,
      // Sleep until the next tick on the database clock (a little after it), bounded by maxInterval.
      next: () => {
        const dbNow = new Date(Date.now() + this.offsetMs);
        let wait = maxIntervalMs;
        for (const s of this.schedules.values()) {
          const next = s.cron.nextRun(dbNow);
          if (next) wait = Math.min(wait, next.getTime() - dbNow.getTime() + 20);
        }
        return Math.max(wait, 20);
      },
    });
  }

  /**
   * Declares a periodic job: `expression` (5 fields, or 6 with seconds first)
   * read in `options.timezone`. Throws a ValidationError for an invalid
   * expression, time zone, name or payload. Returns this, for chaining.
   */
  add<J extends JobRef<unknown>>(expression: string, job: J, payload: PayloadOf<J>, options: CronOptions = {}): this {
    const kind = assertName("kind", typeof job === "string" ? job : (job as { kind?: unknown })?.kind);
    const name = assertName("schedule", options.name ?? kind);
    if (this.schedules.has(name))
      throw new ValidationError(`a cron schedule named "${name}" is already declared; give one a distinct name`);
    const timezone = options.timezone ?? "UTC";
    const cron = parseCron(expression, timezone);
    const queue = assertName(
      "queue",
      options.queue ?? (typeof job === "string" ? undefined : (job as { queue?: string }).queue) ?? "default",
    );
    encodePayload(payload, this.client.maxPayloadBytes);
    const backfill = assertInt("backfill", options.backfill ?? 0, 0, 1000);
    // A tick is already enqueued once (its own key); unique and debounce would be refused at every tick.
    if ("unique" in options || "debounce" in options)
      throw new ValidationError("cron schedules take no unique or debounce option: each tick is enqueued once already");
    const { name: _n, timezone: _t, backfill: _b, ...enqueue } = options;
    this.schedules.set(name, {
      name,
      expression,
      timezone,
      cron,
      job,
      kind,
      queue,
      payload,
      options: enqueue,
      backfill,
    });
    this.registered = false;
    return this;
  }

  /** Declared schedules with their next tick (after `from`, default now on this machine's clock). */
  list(from = new Date()): Array<{ name: string; expression: string; timezone: string; next: Date | null }> {
    return [...this.schedules.values()].map((s) => ({
      name: s.name,
      expression: s.expression,
      timezone: s.timezone,
      next: s.cron.nextRun(from),
    }));
  }

  /** Runs a pass now, then one at every tick. Idempotent. */
  async start(): Promise<void> {
    if (this.service.started) return;
    this.service.start();
    await this.service.runOnce().catch(() => undefined);
  }

  /** Stops passes and waits for one in progress. Safe before start and twice. */
  stop(): Promise<void> {
    return this.service.stop();
  }

  /**
   * One pass: enqueues every schedule's due ticks (the latest due tick, plus up
   * to `backfill` missed ones) that no scheduler enqueued yet. `now` replaces
   * the database clock (tests).
   */
  async runOnce(options: { now?: Date } = {}): Promise<CronTickResult[]> {
    if (this.schedules.size === 0) return [];
    const nowParam = options.now ? options.now.toISOString() : null;
    if (!this.registered) await this.register(nowParam);
    const cron = this.cronStore;
    const results = await this.store.transaction(async (tx) => {
      const passed: CronTickResult[] = [];
      await cron.cronBound({ idleMs: PASS_IDLE_BOUND_MS }, tx);
      const rows = await cron.cronLock({ names: [...this.schedules.keys()], now: nowParam }, tx);
      for (const row of rows) {
        const schedule = this.schedules.get(row.name) as Schedule;
        this.offsetMs = options.now ? 0 : row.now.getTime() - Date.now();
        // Most recent first, at or before now (croner's reference is exclusive, hence +1 ms and the
        // filter); keep those after the last tick enqueued.
        const now = row.now.getTime();
        const due = schedule.cron
          .previousRuns(schedule.backfill + 1, new Date(now + 1))
          .filter((tick) => tick.getTime() <= now && tick.getTime() > row.last_tick.getTime())
          .reverse();
        if (row.run_requested_at !== null) {
          // A run requested by an operator (the dashboard): one job now, paused or not.
          const requested = row.run_requested_at.toISOString();
          const [manual] = await this.client.enqueueManyTx(tx, [
            {
              ...schedule.options,
              job: schedule.job,
              payload: schedule.payload,
              queue: schedule.queue,
              idempotencyKey: `cron:${schedule.name}:manual:${requested}`,
              headers: { ...schedule.options.headers, "skipq-cron": `${schedule.name}@manual:${requested}` },
            },
          ]);
          await cron.cronRunDone(
            { name: schedule.name, requestedAt: row.run_requested_at, jobId: manual?.id ?? null },
            tx,
          );
          passed.push({ name: schedule.name, ticks: [], jobIds: manual?.created ? [manual.id] : [] });
        }
        if (due.length === 0) continue;
        if (row.paused_at !== null) {
          await cron.cronSkip({ name: schedule.name, lastTick: due[due.length - 1] as Date }, tx);
          continue;
        }
        const items: BulkItem[] = due.map((tick) => ({
          ...schedule.options,
          job: schedule.job,
          payload: schedule.payload,
          queue: schedule.queue,
          idempotencyKey: `cron:${schedule.name}:${tick.toISOString()}`,
          headers: { ...schedule.options.headers, "skipq-cron": `${schedule.name}@${tick.toISOString()}` },
        }));
        const enqueued = await this.client.enqueueManyTx(tx, items);
        const last = due[due.length - 1] as Date;
        await cron.cronAdvance(
          { name: schedule.name, lastTick: last, lastJobId: enqueued[enqueued.length - 1]?.id ?? null },
          tx,
        );
        passed.push({ name: schedule.name, ticks: due, jobIds: enqueued.filter((e) => e.created).map((e) => e.id) });
      }
      return passed;
    });
    for (const r of results)
      this.logger.info({ schedule: r.name, ticks: r.ticks.map((t) => t.toISOString()) }, "skipq: cron ticks enqueued");
    return results;
  }

  private async register(nowParam: string | null): Promise<void> {
    await this.cronStore.cronRegister({ schedules: [...this.schedules.values()], now: nowParam });
    this.registered = true;
  }
}
