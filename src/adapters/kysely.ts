/**
 * Kysely adapter: a `Queryable` from a Kysely instance or the `trx` of
 * `db.transaction().execute(async (trx) => …)`. It hands Kysely a compiled raw
 * query (the shape `CompiledQuery.raw` builds), structurally; never imports `kysely`.
 */
import type { Queryable } from "../skipq.js";
import { type QueryConfig, textJsonCasts } from "./shared.js";

/** The part of Kysely skipq uses. */
export interface KyselyLike {
  executeQuery(query: {
    sql: string;
    parameters: readonly unknown[];
    query: { kind: "RawNode"; sqlFragments: readonly string[]; parameters: readonly never[] };
    queryId: { queryId: string };
  }): Promise<{ rows: unknown[]; numAffectedRows?: bigint }>;
}

let counter = 0;

/** `skipq.enqueueTx(kyselyQueryable(trx), …)` inside `db.transaction().execute(async (trx) => …)`. */
export function kyselyQueryable(trx: KyselyLike): Queryable {
  return {
    async query(config: QueryConfig) {
      const sql = textJsonCasts(config.text);
      const result = await trx.executeQuery({
        sql,
        parameters: config.values ?? [],
        query: { kind: "RawNode", sqlFragments: [sql], parameters: [] },
        queryId: { queryId: `skipq-${++counter}` },
      });
      // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
      const rows = result.rows as any[];
      return { rows, rowCount: result.numAffectedRows === undefined ? rows.length : Number(result.numAffectedRows) };
    },
  };
}
