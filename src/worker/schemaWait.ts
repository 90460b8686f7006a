/**
 * A worker's first step: the schema is current. A database that is down or
 * still starting is waited for with a capped backoff rather than crashing the
 * worker — an orchestrator restarting workers that die at start only makes a
 * crash loop. Any other error (an old schema, a missing one) is thrown at once.
 */
import type pg from "pg";
import { retryWaitMs } from "../core/backoff.js";
import type { Logger } from "../core/logger.js";
import { isUnavailable } from "../db/connectionErrors.js";
import { assertSchemaCurrent } from "../db/migrate.js";
import type { Wakeup } from "../shared/wakeup.js";

export interface SchemaWait {
  pool: pg.Pool;
  schema: string;
  logger: Logger;
  /** Woken by stop(): ends a wait early. */
  wakeup: Wakeup;
  /** False once stop() was called. */
  running: () => boolean;
  onWarning: (error: unknown) => void;
}

/** True once the schema is current; false when the worker was stopped while it waited. */
export async function waitForSchema(w: SchemaWait): Promise<boolean> {
  for (let failures = 1; ; failures++) {
    try {
      await assertSchemaCurrent(w.pool, w.schema);
      return true;
    } catch (error) {
      if (!isUnavailable(error)) throw error;
      w.onWarning(error);
      if (failures === 1 || failures % 20 === 0) {
        w.logger.warn({ err: error, failures }, "skipq: database unavailable at start; retrying with backoff");
      }
      await w.wakeup.wait(retryWaitMs(failures + 1, 100, 5000));
      if (!w.running()) return false;
    }
  }
}
