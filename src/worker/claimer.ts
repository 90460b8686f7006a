/**
 * The claimer: chooses and runs a worker's claim statement.
 *
 * When none of the worker's queues has limits or paused keys (the common
 * case) it runs the plain claim (skipq_claim_next: one index range per queue
 * and level, SKIP LOCKED), from this worker's floors (floors.ts), with or
 * without priority aging. Otherwise it runs the limited claim (db/sql/flow.ts):
 * claim locks of the limited queues, then a claim that counts running jobs and
 * recent starts. Fair queues (limits with `fairness`) are claimed through
 * skipq_claim_fair (db/sql/fairFunction.ts: round robin across keys, within
 * the limits); a worker that also takes other queues claims those in a second
 * round trip, for what the fair claim left of the batch. Which queues are limited is cached and refreshed on a timer
 * and on a '!flow' notification; a stale cache is safe, because the plain
 * claim itself skips limited queues (read in the database at every claim).
 */
import type { Logger } from "../core/logger.js";
import type { PauseTarget } from "../core/pause.js";
import type { ClaimedRow, JobStore } from "../db/jobStore.js";
import { Service } from "../shared/service.js";
import { claimTypes } from "./claimedJob.js";
import { Floors } from "./floors.js";

export interface ClaimerOptions {
  jobs: JobStore;
  queues: readonly string[];
  workerId: string;
  leaseMs: number;
  /** Priority aging threshold in ms; undefined for none. */
  agingMs: number | undefined;
  /** How often the set of limited queues is re-read, ms. */
  refreshMs: number;
  /** How often each queue is claimed with no floors (a sweep), ms (see floors.ts). */
  sweepEveryMs: number;
  logger: Logger;
}

export class Claimer {
  /** Queues (of this worker's) that have limits or a paused key, as of the last refresh. */
  limited: ReadonlySet<string> = new Set();
  /** Of `limited`, the fair queues (claimed through skipq_claim_fair). */
  fair: ReadonlySet<string> = new Set();
  /** Where this worker's plain claims stopped, per queue and level. */
  readonly floors: Floors;
  private refreshed = false;
  private readonly refresher: Service<void>;

  constructor(private readonly o: ClaimerOptions) {
    this.floors = new Floors(o.sweepEveryMs);
    this.refresher = new Service({
      name: "limits refresh",
      intervalMs: o.refreshMs,
      run: () => this.refresh(),
      logger: o.logger,
      firstPass: "spread",
    });
  }

  /** Reads the limited queues, then re-reads them every refreshMs. Idempotent; never throws. */
  async start(): Promise<void> {
    if (this.refresher.started) return;
    this.refresher.start();
    await this.refresh().catch((error) =>
      this.o.logger.warn({ err: error }, "skipq: could not read queue limits; will retry"),
    );
  }

  /** Safe before start and twice. */
  stop(): Promise<void> {
    return this.refresher.stop();
  }

  /** Re-reads which of this worker's queues are limited. A failure keeps the old set (safe either way). */
  async refresh(): Promise<void> {
    const { limited, fair } = await this.o.jobs.flowQueues(this.o.queues);
    this.limited = limited;
    this.fair = fair;
    this.refreshed = true;
  }

  /** Claims up to `limit` jobs in one round trip. */
  async claim(limit: number): Promise<ClaimedRow[]> {
    const o = this.o;
    if (!this.refreshed) await this.refresh(); // e.g. worker.runOnce() without start()
    if (this.fair.size === 0) return this.claimOthers(o.queues, limit);
    const fair = o.queues.filter((q) => this.fair.has(q));
    const now = Date.now();
    const rows = await o.jobs.claimFair(
      {
        queues: fair,
        limit,
        workerId: o.workerId,
        leaseMs: o.leaseMs,
        // Keys' floors live in the database (swept there every FAIR_SWEEP_MS); a '!ready' sweeps them now.
        sweep: fair.map((q) => this.floors.sweepDue(q, now, Number.POSITIVE_INFINITY)).some(Boolean),
      },
      claimTypes,
    );
    const others = o.queues.filter((q) => !this.fair.has(q));
    if (others.length === 0 || rows.length >= limit) return rows;
    return [...rows, ...(await this.claimOthers(others, limit - rows.length))];
  }

  /** The plain or the limited claim, of queues that are not fair. */
  private async claimOthers(queues: readonly string[], limit: number): Promise<ClaimedRow[]> {
    const o = this.o;
    if (!queues.some((q) => this.limited.has(q))) {
      const rows = await o.jobs.claimFrom(
        {
          queues,
          limit,
          workerId: o.workerId,
          leaseMs: o.leaseMs,
          agingMs: o.agingMs,
          floors: this.floors.args(queues, Date.now()),
        },
        claimTypes,
      );
      this.floors.learn(rows);
      return rows;
    }
    return o.jobs.claimLimited(
      {
        freeQueues: queues.filter((q) => !this.limited.has(q)),
        limitedQueues: queues.filter((q) => this.limited.has(q)),
        limit,
        workerId: o.workerId,
        leaseMs: o.leaseMs,
        agingMs: o.agingMs ?? null,
        lookahead: Math.min(5000, Math.max(100, limit * 10)),
      },
      claimTypes,
    );
  }

  /** Pauses `key` of `queue` (null: the whole queue); the queue takes the limited claim from now on. */
  async pauseKey(queue: string, key: string | null, until: PauseTarget): Promise<Date> {
    const end = await this.o.jobs.pauseKey(queue, key, until);
    this.limited = new Set([...this.limited, queue]);
    return end;
  }
}
