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
 *
 * One per client: every worker has a `Maintainer`, but the workers of one
 * `Skipq` client (a saga runner's step worker beside the application's, say)
 * share one set of leader tasks — the first started runs its own, the others
 * join it, and when the one running them stops while others still run, the
 * next started takes over (its own tasks, on its own pool). Each worker's
 * local services run with that worker, whichever runs the leader tasks.
 */
import type { Logger } from "../core/logger.js";
import type { Duration } from "../core/validate.js";
import { toMs } from "../core/validate.js";
import type { Schema } from "../db/schema.js";
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

/** The leader tasks of one maintainer: the lease, the reaper, retention, the rollup. */
class LeaderTasks {
  readonly leader: LeaderLease;
  readonly reaper: Reaper;
  readonly pruner: Pruner | undefined;
  readonly rollup: Rollup | undefined;
  /** What a worker asked of its maintainer (the given intervals and retention), to tell a joining worker's apart. */
  readonly given: string;

  constructor(o: MaintainerOptions) {
    this.given = JSON.stringify({
      reaperInterval: o.reaperInterval,
      leaderLease: o.leaderLease,
      retention: o.retention,
      rollup: o.rollup,
    });
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

  /** Takes part in leader election and starts every task. */
  start(): void {
    this.leader.start();
    this.reaper.start();
    this.pruner?.start();
    this.rollup?.start();
  }

  /** Stops every task, then gives the lease up. */
  async stop(): Promise<void> {
    await Promise.all([this.reaper.stop(), this.pruner?.stop(), this.rollup?.stop()]);
    await this.leader.stop();
  }
}

/**
 * The started maintainers of one client, which share one set of leader tasks: the first started runs its
 * own; when it stops, the next (in start order) runs its own. Changes are made one at a time.
 */
class ClientMaintainers {
  /** Keyed by the client's Schema object, which every store of the client shares (Store.withPool keeps it). */
  private static readonly byClient = new WeakMap<Schema, ClientMaintainers>();

  static of(store: Store): ClientMaintainers {
    let group = ClientMaintainers.byClient.get(store.schema);
    if (!group) {
      group = new ClientMaintainers();
      ClientMaintainers.byClient.set(store.schema, group);
    }
    return group;
  }

  /** The tasks running for the client, when any member is started. */
  running: LeaderTasks | undefined;
  private readonly members: Array<{ tasks: LeaderTasks; logger: Logger }> = [];
  private changes: Promise<void> = Promise.resolve();

  /** A started member: runs its tasks if none run yet, else shares the running ones. */
  join(tasks: LeaderTasks, logger: Logger): Promise<void> {
    return this.change(async () => {
      this.members.push({ tasks, logger });
      if (!this.running) {
        this.running = tasks;
        tasks.start();
      } else if (this.running.given !== tasks.given) {
        logger.warn(
          { running: this.running.given, given: tasks.given },
          "skipq: this worker shares its client's maintainer, already running with other maintenance options (the first started worker's); its own are unused while that one runs",
        );
      }
    });
  }

  /** A stopped member: when its tasks were the running ones, they stop and the next member's start. */
  leave(tasks: LeaderTasks): Promise<void> {
    return this.change(async () => {
      const at = this.members.findIndex((m) => m.tasks === tasks);
      if (at < 0) return;
      this.members.splice(at, 1);
      if (this.running !== tasks) return;
      this.running = undefined;
      await tasks.stop();
      const next = this.members[0]?.tasks;
      if (next) {
        this.running = next;
        next.start();
      }
    });
  }

  private change(body: () => Promise<void>): Promise<void> {
    const done = this.changes.then(body);
    this.changes = done.catch(() => undefined);
    return done;
  }
}

/**
 * A worker's maintainer: its own leader tasks (which run while it is the first started worker of its
 * client) and its local services (which run while it runs). `leader`, `reaper`, `pruner` and `rollup` are
 * the tasks running for the client while this maintainer is started, its own otherwise.
 */
export class Maintainer {
  private readonly own: LeaderTasks;
  private readonly group: ClientMaintainers;
  private readonly logger: Logger;
  private readonly local = new Set<LocalService>();
  private started = false;
  private closed = false;

  constructor(o: MaintainerOptions) {
    this.own = new LeaderTasks(o);
    this.group = ClientMaintainers.of(o.store);
    this.logger = o.logger;
  }

  private get tasks(): LeaderTasks {
    return (this.started && this.group.running) || this.own;
  }

  get leader(): LeaderLease {
    return this.tasks.leader;
  }

  get reaper(): Reaper {
    return this.tasks.reaper;
  }

  get pruner(): Pruner | undefined {
    return this.tasks.pruner;
  }

  get rollup(): Rollup | undefined {
    return this.tasks.rollup;
  }

  /** Whether this maintainer's own leader tasks are the ones running for its client. */
  get runsLeaderTasks(): boolean {
    return this.started && this.group.running === this.own;
  }

  /** Adds a service started and stopped with the maintainer (started at once if the maintainer runs). */
  add(service: LocalService): void {
    this.local.add(service);
    if (this.started) void service.start();
  }

  /** Joins its client's leader tasks (running its own when none run yet) and starts its local services. Idempotent. */
  async start(): Promise<void> {
    // Stopped once, never again: a start racing its worker's stop must not join the client's leader tasks.
    if (this.started || this.closed) return;
    this.started = true;
    await this.group.join(this.own, this.logger);
    for (const service of this.local) await service.start();
  }

  /**
   * Stops its local services and leaves its client's leader tasks (stopping them, and giving the lease up,
   * when they were its own; another started worker's then run). Safe before start and twice.
   */
  async stop(): Promise<void> {
    const was = this.started;
    this.started = false;
    this.closed = true;
    await Promise.all([...this.local].map((s) => s.stop()));
    if (was) await this.group.leave(this.own);
    // Never started: its own tasks never ran, but its lease may have been taken by hand (tests do): given up.
    else await this.own.stop();
  }
}
