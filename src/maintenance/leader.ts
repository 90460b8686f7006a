/**
 * The leader lease: which process runs the schema's leader-only maintenance
 * (reaping, retention, history partitions, outbox housekeeping). Every
 * maintainer tries to take or renew the lease every third of its length; the
 * holder renews it, others take it only once it has expired on the database
 * clock. A clean stop gives it up at once; a killed or cut-off leader loses it
 * when it runs out, so another process takes over within one lease.
 *
 * Invariants: a process counts itself leader only until two thirds of the
 * lease after its last successful renewal began (its own clock measures only
 * that interval, never a time of day); every leader task is idempotent, so the
 * rare overlap of two leaders (a renewal that took longer than a third of the
 * lease) changes nothing twice.
 */
import type { Logger } from "../core/logger.js";
import type { Store } from "../db/store.js";
import { Service } from "../shared/service.js";

export interface LeaderLeaseOptions {
  store: Store;
  /** Who asks: the worker's id. */
  holder: string;
  leaseMs: number;
  logger: Logger;
  /** Called when this process becomes leader, and when it stops being leader. */
  onChange?: (leader: boolean) => void;
}

const LEASE = "maintainer";

export class LeaderLease {
  private validUntil = 0;
  private leading = false;
  private readonly renewer: Service<boolean>;

  constructor(private readonly o: LeaderLeaseOptions) {
    this.renewer = new Service({
      name: "leader lease",
      intervalMs: o.leaseMs / 3,
      run: () => this.tryAcquire(),
      logger: o.logger,
      // A failed renewal is retried at the same pace: backing off would let the lease lapse.
      maxBackoffMs: o.leaseMs / 3,
    });
  }

  /** True while this process holds the lease (per its last renewal). */
  get isLeader(): boolean {
    const held = this.leading && performance.now() < this.validUntil;
    if (!held && this.leading) this.set(false);
    return held;
  }

  start(): void {
    this.renewer.start();
  }

  /** Stops renewing and gives the lease up if held. Safe before start and twice. */
  async stop(): Promise<void> {
    await this.renewer.stop();
    if (!this.leading) return;
    this.set(false);
    await this.o.store
      .query(this.o.store.sql.maintenance.leaderRelease, [LEASE, this.o.holder])
      .catch((error) =>
        this.o.logger.warn({ err: error }, "skipq: could not give up the leader lease; it will expire"),
      );
  }

  /** One attempt to take or renew the lease; true when held. */
  async tryAcquire(): Promise<boolean> {
    const asked = performance.now();
    let rows: unknown[];
    try {
      ({ rows } = await this.o.store.query(this.o.store.sql.maintenance.leaderAcquire, [
        LEASE,
        this.o.holder,
        this.o.leaseMs,
      ]));
    } catch (error) {
      if (this.leading && performance.now() >= this.validUntil) this.set(false);
      throw error;
    }
    if (rows.length === 1) {
      this.validUntil = asked + (2 * this.o.leaseMs) / 3;
      if (!this.leading) this.set(true);
      return true;
    }
    if (this.leading) this.set(false);
    return false;
  }

  private set(leading: boolean): void {
    this.leading = leading;
    this.o.logger.info(
      { holder: this.o.holder },
      leading ? "skipq: now the maintenance leader" : "skipq: no longer the maintenance leader",
    );
    this.o.onChange?.(leading);
  }
}
