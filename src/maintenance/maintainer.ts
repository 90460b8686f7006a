/**
 * The maintainer: what keeps a schema healthy, started by every worker unless
 * told otherwise, so `skipq worker` alone reaps, prunes and schedules.
 *
 * Leader tasks run only in the process holding the leader lease (one at a
 * time across the fleet; another takes over within one lease when it dies):
 * the reaper, retention (jobs, keys, delivered outbox events, flow
 * housekeeping) and the statistics rollup the dashboard's charts read. Local services run in every process that has them: cron
 * passes for the schedules this process declares, and the saga sweeper for
 * the sagas it defines. Those need no leader — a cron tick is locked and
 * advanced in the transaction that enqueues it, and saga transitions are
 * guarded — and gating them would make the leader the one process that must
 * know every schedule and saga.
 */
import type { Logger } from "../core/logger.js";
import type { Duration } from "../core/validate.js";
import { toMs } from "../core/validate.js";
import type { Store } from "../db/store.js";
import { LeaderLease } from "./leader.js";
import { Pruner, type PrunerOptions } from "./pruner.js";
import { type ReapedJob, Reaper } from "./reaper.js";
import { Rollup } from "./rollup.js";

export interface MaintenanceOptions {
  /** Time between reaper passes. Default "5s". */
  reaperInterval?: Duration;
  /**
   * How long the leader lease lasts: a dead leader is replaced within this. Default: the worker's lockTimeout,
   * between 1 s and 15 s — a killed leader's own jobs expire no sooner, so lease recovery keeps its bound.
   */
  leaderLease?: Duration;
  /** Retention of finished jobs and delivered outbox events; false: none from this process. Default: PrunerOptions' defaults. */
  retention?: PrunerOptions | false;
  /** Per-queue statistics by the minute for the dashboard's charts (kept 7 days); false: none from this process. Default `{ interval: "20s" }`. */
  rollup?: { interval?: Duration } | false;
}

/** A background service the maintainer starts and stops with itself (cron, saga sweeper). */
export interface LocalService {
  start(): void | Promise<void>;
  stop(): Promise<void>;
}

export interface MaintainerOptions extends MaintenanceOptions {
  store: Store;
  /** The worker's id: the leader lease's holder. */
  holder: string;
  /** The worker's job lease (lockTimeout), ms: the default leader lease follows it. */
  jobLeaseMs: number;
  logger: Logger;
  onReaped?: (jobs: ReadonlyArray<ReapedJob>) => void;
  onLeader?: (leader: boolean) => void;
}

export class Maintainer {
  readonly leader: LeaderLease;
  readonly reaper: Reaper;
  readonly pruner: Pruner | undefined;
  readonly rollup: Rollup | undefined;
  private readonly local = new Set<LocalService>();
  private started = false;

  constructor(o: MaintainerOptions) {
    this.leader = new LeaderLease({
      store: o.store,
      holder: o.holder,
      leaseMs:
        o.leaderLease === undefined
          ? Math.min(15_000, Math.max(1000, o.jobLeaseMs))
          : toMs("leaderLease", o.leaderLease, { allowZero: false }),
      logger: o.logger,
      onChange: (leader) => {
        // A new leader reaps at once: the old one's jobs may be waiting.
        if (leader) void this.reaper.runOnce().catch(() => undefined);
        o.onLeader?.(leader);
      },
    });
    const isLeader = () => this.leader.isLeader;
    this.reaper = new Reaper({
      store: o.store,
      intervalMs: toMs("reaperInterval", o.reaperInterval ?? "5s", { allowZero: false }),
      logger: o.logger,
      isLeader,
      onReaped: o.onReaped,
    });
    this.pruner =
      o.retention === false ? undefined : new Pruner({ store: o.store, logger: o.logger }, o.retention ?? {}, isLeader);
    this.rollup =
      o.rollup === false
        ? undefined
        : new Rollup({
            store: o.store,
            logger: o.logger,
            isLeader,
            intervalMs: toMs("rollup.interval", o.rollup?.interval ?? "20s", { allowZero: false }),
          });
  }

  /** Adds a service started and stopped with the maintainer (started at once if the maintainer runs). */
  add(service: LocalService): void {
    this.local.add(service);
    if (this.started) void service.start();
  }

  /** Takes part in leader election and starts every task. Idempotent. */
  async start(): Promise<void> {
    if (this.started) return;
    this.started = true;
    this.leader.start();
    this.reaper.start();
    this.pruner?.start();
    this.rollup?.start();
    for (const service of this.local) await service.start();
  }

  /** Stops every task, then gives the lease up. Safe before start and twice. */
  async stop(): Promise<void> {
    this.started = false;
    await Promise.all([
      this.reaper.stop(),
      this.pruner?.stop(),
      this.rollup?.stop(),
      ...[...this.local].map((s) => s.stop()),
    ]);
    await this.leader.stop();
  }
}
