/**
 * Worker presence: each worker upserts a row (its id, queues and kinds) into
 * the workers table on an interval and deletes it on a clean stop, so health
 * checks and the dashboard can tell which workers live and which pending
 * kinds no live worker handles. Off the claim path; a failed upsert is logged
 * by the service and retried at the next interval, never stopping the worker.
 */
import os from "node:os";
import type { Logger } from "../core/logger.js";
import type { Store } from "../db/store.js";
import { Service } from "../shared/service.js";

export interface PresenceOptions {
  store: Store;
  workerId: string;
  queues: readonly string[];
  kinds: () => string[];
  /** Time between upserts, ms; a row lives three intervals. */
  intervalMs: number;
  logger: Logger;
}

export class Presence {
  private readonly service: Service<void>;

  constructor(private readonly o: PresenceOptions) {
    this.service = new Service({
      name: "presence",
      intervalMs: o.intervalMs,
      run: () => this.upsert(),
      logger: o.logger,
    });
  }

  /** Upserts now, then on every interval. Idempotent. */
  start(): void {
    this.service.start();
  }

  /** One upsert. */
  runOnce(): Promise<void> {
    return this.service.runOnce();
  }

  /** Stops upserting and deletes this worker's row. Safe before start and twice. */
  async stop(): Promise<void> {
    const started = this.service.started;
    await this.service.stop();
    if (!started) return;
    await this.o.store.query(this.o.store.sql.ops.workerPresenceDelete, [this.o.workerId]).catch(() => undefined);
  }

  private async upsert(): Promise<void> {
    const o = this.o;
    await o.store.query(o.store.sql.ops.workerPresenceUpsert, [
      o.workerId,
      o.queues,
      o.kinds(),
      os.hostname(),
      process.pid,
      o.intervalMs * 3,
    ]);
  }
}
