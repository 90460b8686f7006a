/**
 * The store: the one way skipq's code reaches the database. It pairs a
 * schema's statement catalogue (built once per schema) with a pool, and runs
 * statements as prepared or unprepared queries per the client's setting.
 * Worker, claimer, maintainer, admin, outbox, sagas and the dashboard hold a
 * store, never the `Skipq` client's internals.
 *
 * Invariant: every runtime statement comes from the catalogue, except the
 * limited claim, whose text is generated per claim from validated names
 * (sql/flow.ts) and reached through `JobStore.claimLimited`, and db/'s own
 * connection plumbing (LISTEN in listener.ts, the host checks of connect.ts,
 * COPY's clock read in copy.ts).
 */
import type pg from "pg";
import { type Catalogue, catalogue } from "./catalogue.js";
import { notMigrated } from "./migrate.js";
import type { Queryable } from "./queryable.js";
import { Schema } from "./schema.js";
import type { Statement } from "./statements.js";
import { withTransaction } from "./transaction.js";

export interface StoreOptions {
  /** Send named statements as prepared statements (off behind PgBouncer < 1.21 in transaction mode). Default true. */
  prepared?: boolean;
}

export class Store {
  readonly schema: Schema;
  readonly sql: Catalogue;
  readonly prepared: boolean;

  constructor(
    schema: Schema | string,
    readonly pool: pg.Pool,
    options: StoreOptions = {},
  ) {
    this.schema = typeof schema === "string" ? new Schema(schema) : schema;
    this.sql = catalogue(this.schema);
    this.prepared = options.prepared ?? true;
  }

  /** The same schema and settings over another pool (a worker's own, say). */
  withPool(pool: pg.Pool): Store {
    return pool === this.pool ? this : new Store(this.schema, pool, { prepared: this.prepared });
  }

  /** A statement as a pg query config: named when it is a prepared one and prepared statements are on. */
  config(statement: Statement, values: unknown[] = []): { text: string; values: unknown[]; name?: string } {
    return this.prepared && statement.name !== undefined
      ? { name: statement.name, text: statement.text, values }
      : { text: statement.text, values };
  }

  /** Runs `statement` on `db` (default: this store's pool), e.g. the caller's transaction. */
  // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
  query<R = any>(
    statement: Statement,
    values: unknown[] = [],
    db: Queryable = this.pool,
  ): Promise<{ rows: R[]; rowCount: number | null }> {
    return db.query(this.config(statement, values)).catch((error: unknown) => {
      throw notMigrated(error, this.schema.name);
    });
  }

  /** Runs `body` in one transaction on a connection of this store's pool. */
  transaction<T>(body: (tx: pg.PoolClient) => Promise<T>): Promise<T> {
    return withTransaction(this.pool, body);
  }
}
