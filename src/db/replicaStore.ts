/**
 * Typed calls for the statements of sql/replicas.ts, over one `Store`: the
 * primary's WAL position (call it over the write store) and the read
 * server's state against it (over the read store). Each call takes one
 * object of named parameters and returns typed rows.
 */
import type { Store } from "./store.js";

/** replicaState's row: whether the server is a standby, its address, and its lag behind the primary. */
export interface ReplicaStateRow {
  standby: boolean;
  host: string | null;
  port: number | null;
  lag_bytes: number | null;
  lag_ms: number | null;
}

export class ReplicaStore {
  constructor(readonly store: Store) {}

  private get sql() {
    return this.store.sql.replicas;
  }

  /** The server's current WAL write position (pg_lsn as text); on the primary. */
  async primaryWalLsn(): Promise<string | undefined> {
    const { rows } = await this.store.query<{ lsn: string }>(this.sql.primaryWalLsn);
    return rows[0]?.lsn;
  }

  /** The server's state against the primary's position `primaryLsn`; on the read server. */
  async replicaState(p: { primaryLsn: string | undefined }): Promise<ReplicaStateRow | undefined> {
    const { rows } = await this.store.query<ReplicaStateRow>(this.sql.replicaState, [p.primaryLsn]);
    return rows[0];
  }
}
