/** Pools skipq creates: errors on idle clients are logged, never thrown. */
import os from "node:os";
import pg from "pg";
import type { Logger } from "./logger.js";

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
  return pool;
}
