/**
 * Worker presence: each worker upserts a row (its id, queues and kinds) into
 * the workers table on an interval and deletes it on a clean stop, so health
 * checks can tell which pending kinds no live worker handles.
 * Runs on its own timer, never on the claim path; a failed upsert is logged
 * and retried at the next interval and never stops the worker.
 */
import os from "node:os";
import type pg from "pg";
import type { Logger } from "../core/logger.js";
import { opsStatements } from "../db/sql/ops.js";

export interface PresenceOptions {
  pool: pg.Pool;
  schemaSql: string;
  workerId: string;
  queues: readonly string[];
  kinds: () => string[];
  /** Time between upserts, ms; a row lives three intervals. */
  intervalMs: number;
  logger: Logger;
}

export class Presence {
  private readonly sql;
  private timer: NodeJS.Timeout | undefined;
  private current: Promise<void> | undefined;
  private failures = 0;

  constructor(private readonly options: PresenceOptions) {
    this.sql = opsStatements(options.schemaSql);
  }

  /** Upserts now, then on every interval. Idempotent. */
  start(): void {
    if (this.timer) return;
    this.timer = setInterval(() => void this.runOnce(), this.options.intervalMs);
    this.timer.unref();
    void this.runOnce();
  }

  /** One upsert; never throws. */
  runOnce(): Promise<void> {
    if (this.current) return this.current;
    const o = this.options;
    this.current = o.pool
      .query(this.sql.workerPresenceUpsert, [
        o.workerId,
        o.queues,
        o.kinds(),
        os.hostname(),
        process.pid,
        o.intervalMs * 3,
      ])
      .then(
        () => {
          this.failures = 0;
        },
        (error) => {
          this.failures++;
          if (this.failures === 1 || this.failures % 20 === 0)
            o.logger.warn(
              { err: error, failures: this.failures },
              "skipq: recording worker presence failed; will retry",
            );
        },
      )
      .finally(() => {
        this.current = undefined;
      });
    return this.current;
  }

  /** Stops the timer and deletes this worker's row. Safe before start and twice. */
  async stop(): Promise<void> {
    const started = this.timer !== undefined;
    clearInterval(this.timer);
    this.timer = undefined;
    if (!started) return;
    await this.current;
    await this.options.pool.query(this.sql.workerPresenceDelete, [this.options.workerId]).catch(() => undefined);
  }
}
