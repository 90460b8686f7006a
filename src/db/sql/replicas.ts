/**
 * Read replicas (readConnectionString): how far the server the reads go to
 * is behind the primary. Two statements, one per server, in this order: the
 * primary's WAL position first, then the replica compares its replay position
 * with it, so a replica that has replayed at least that much is caught up
 * whatever the clocks say. Every function used is executable by any role (no
 * pg_monitor needed), and neither touches a skipq table.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function replicaStatements(names: Schema) {
  return statements(
    names,
    { prepare: false },
    {
      /** The primary's current WAL write position. */
      primaryWalLsn: "SELECT pg_current_wal_lsn()::text AS lsn",

      /**
       * The read server's side, given the primary's position $1: whether it is a standby, its address, and
       * how far behind it is — in bytes of WAL not replayed yet, and in time since the last replayed commit
       * was made (0 once it replayed $1: an idle primary writes no commits, and "time since the last
       * commit" would grow for nothing). On a primary (prefer-standby fell back to one) both are 0.
       */
      replicaState: `SELECT pg_is_in_recovery() AS standby,
              host(inet_server_addr()) AS host, inet_server_port() AS port,
              CASE WHEN NOT pg_is_in_recovery() THEN 0::float8
                   ELSE greatest(0, pg_wal_lsn_diff($1::pg_lsn, pg_last_wal_replay_lsn()))::float8 END AS lag_bytes,
              CASE WHEN NOT pg_is_in_recovery() OR pg_last_wal_replay_lsn() >= $1::pg_lsn THEN 0::float8
                   ELSE greatest(0, extract(epoch FROM now() - pg_last_xact_replay_timestamp()) * 1000)::float8
              END AS lag_ms`,
    },
  );
}
