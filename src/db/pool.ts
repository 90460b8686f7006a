/** Pools skipq creates: connection errors are logged or surface on the next query, never thrown as events. */
import os from "node:os";
import pg from "pg";
import type { Logger } from "../core/logger.js";

/** A pool whose idle-client errors (a terminated backend, a restarted server) are logged, never thrown. */
export function createPool(connectionString: string, max: number, logger: Logger, name: string): pg.Pool {
  const pool = new pg.Pool({
    connectionString,
    max,
    application_name: `${name}:${os.hostname()}:${process.pid}`.slice(0, 63),
    connectionTimeoutMillis: 10_000,
    keepAlive: true,
  });
  pool.on("error", (error) =>
    logger.warn({ err: error }, "skipq: an idle database connection failed; the pool will open a new one"),
  );
  // A checked-out client (reaper pass, migration, bulk enqueue) whose server goes away between
  // two queries emits 'error' with no listener, which kills the process (chaos D6: a PostgreSQL
  // restart crashed every worker). The next query on it fails instead, and release() drops it.
  pool.on("connect", (client) => client.on("error", () => undefined));
  return pool;
}
