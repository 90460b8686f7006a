/**
 * postgres.js adapter: a `Queryable` from a `sql` instance or the `tx` that
 * `sql.begin(async (tx) => …)` hands you, so skipq writes join that
 * transaction. Takes the object structurally; never imports `postgres`.
 */
import type { Queryable } from "../skipq.js";
import { type QueryConfig, textJsonCasts } from "./shared.js";

/** The part of postgres.js skipq uses. */
export interface PostgresJsLike {
  unsafe(query: string, parameters?: unknown[]): PromiseLike<ArrayLike<unknown> & { count?: number | null }>;
}

/** `skipq.enqueueTx(postgresJsQueryable(tx), …)` inside `sql.begin(async (tx) => …)`. */
export function postgresJsQueryable(tx: PostgresJsLike): Queryable {
  return {
    async query(config: QueryConfig) {
      const result = await tx.unsafe(textJsonCasts(config.text), config.values ?? []);
      // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
      const rows = Array.from(result) as any[];
      return { rows, rowCount: result.count ?? rows.length };
    },
  };
}
