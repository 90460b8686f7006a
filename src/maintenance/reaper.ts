/**
 * The reaper: returns jobs whose lease ran out (a crashed, killed or stalled
 * worker) to pending, or to dead when their attempts are used up.
 *
 * Every worker runs one, but a pass only does work while holding the schema's
 * maintenance advisory lock, so exactly one pass runs at a time across all
 * processes. All comparisons use the database clock.
 */
import type pg from "pg";
import type { Logger } from "../core/logger.js";
import { maintenanceStatements } from "../db/sql/maintenance.js";

export interface ReaperOptions {
  pool: pg.Pool;
  schema: string;
  schemaSql: string;
  /** Time between passes, ms. Default 5000. */
  intervalMs: number;
  logger: Logger;
  onReaped?: (jobs: ReadonlyArray<{ id: string; status: string; locked_by: string | null }>) => void;
}

export interface ReapResult {
  /** False when another process held the maintenance lock, so this pass did nothing. */
  leader: boolean;
  reaped: Array<{ id: string; status: string; locked_by: string | null }>;
}

const BATCH = 1000;

export class Reaper {
  private timer: NodeJS.Timeout | undefined;
  private running = false;
  private pass: Promise<unknown> | undefined;
  private readonly sql;

  constructor(private readonly options: ReaperOptions) {
    this.sql = maintenanceStatements(options.schemaSql, options.schema);
  }

  /** Starts periodic passes. Idempotent. */
  start(): void {
    if (this.running) return;
    this.running = true;
    this.schedule(Math.random() * this.options.intervalMs);
  }

  /** Stops passes and waits for one in progress. Safe before start and twice. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.timer);
    await this.pass?.catch(() => undefined);
  }

  /** One pass: take the maintenance lock if free, reap expired leases in batches, commit. */
  async runOnce(): Promise<ReapResult> {
    const client = await this.options.pool.connect();
    const reaped: ReapResult["reaped"] = [];
    let failure: Error | undefined;
    // The pool may be the caller's: guard this checkout against 'error' events (a server
    // restart between two statements), which would otherwise crash the process.
    const onError = (error: Error) => {
      failure ??= error;
    };
    client.on("error", onError);
    try {
      await client.query("BEGIN");
      const { rows } = await client.query<{ acquired: boolean }>(this.sql.leaderTryAcquire.text, [this.options.schema]);
      if (!rows[0]?.acquired) {
        await client.query("COMMIT");
        return { leader: false, reaped };
      }
      for (;;) {
        const result = await client.query<{ id: string; status: string; locked_by: string | null }>(
          this.sql.jobReapExpired.text,
          [BATCH],
        );
        reaped.push(...result.rows);
        if (result.rows.length < BATCH) break;
      }
      await client.query("COMMIT");
    } catch (error) {
      failure = error as Error;
      await client.query("ROLLBACK").catch(() => undefined);
      throw error;
    } finally {
      client.removeListener("error", onError);
      // A connection that failed mid-transaction is discarded, not reused.
      client.release(failure);
    }
    if (reaped.length > 0) {
      this.options.logger.info({ count: reaped.length }, "skipq: reaped jobs whose lease expired");
      this.options.onReaped?.(reaped);
    }
    return { leader: true, reaped };
  }

  private schedule(delay: number): void {
    if (!this.running) return;
    this.timer = setTimeout(() => {
      this.pass = this.runOnce()
        .catch((error) => this.options.logger.warn({ err: error }, "skipq: reaper pass failed; will retry"))
        .finally(() => this.schedule(this.options.intervalMs));
    }, delay);
    this.timer.unref();
  }
}
