/**
 * The reaper: returns jobs whose lease ran out (a crashed, killed, stalled or
 * cut-off worker) to pending, or to dead when their attempts are used up.
 *
 * It runs as a task of the maintainer's leader (one process at a time), in
 * single autocommit statements of at most 1,000 jobs, each rechecking status
 * and expiry on the locked row: so even two reapers at once (a split brain)
 * release each job once, and a job a worker completed concurrently is never
 * reverted. All comparisons use the database clock.
 */
import type { Logger } from "../core/logger.js";
import type { Store } from "../db/store.js";
import { ServiceTask } from "../shared/service.js";

export interface ReapedJob {
  id: string;
  status: string;
  locked_by: string | null;
}

export interface ReaperOptions {
  store: Store;
  /** Time between passes, ms. */
  intervalMs: number;
  logger: Logger;
  /** Reap only while this says so (the maintainer's leader lease). Default: always. */
  isLeader?: () => boolean;
  onReaped?: (jobs: ReadonlyArray<ReapedJob>) => void;
}

export interface ReapResult {
  /** False when this process was not the leader, so the pass did nothing. */
  leader: boolean;
  reaped: ReapedJob[];
}

const BATCH = 1000;

export class Reaper extends ServiceTask<ReapResult> {
  constructor(private readonly o: ReaperOptions) {
    super("reaper", o);
  }

  /** One pass: reap expired leases in batches until a batch comes back short. */
  protected async pass(): Promise<ReapResult> {
    if (this.o.isLeader && !this.o.isLeader()) return { leader: false, reaped: [] };
    const reaped: ReapedJob[] = [];
    for (;;) {
      const { rows } = await this.o.store.query<ReapedJob>(this.o.store.sql.maintenance.jobReapExpired, [BATCH]);
      reaped.push(...rows);
      if (rows.length < BATCH) break;
    }
    if (reaped.length > 0) {
      this.o.logger.info({ count: reaped.length }, "skipq: reaped jobs whose lease expired");
      this.o.onReaped?.(reaped);
    }
    return { leader: true, reaped };
  }
}
