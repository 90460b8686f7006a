/**
 * Drizzle adapter: a `Queryable` from a Drizzle database or the `tx` of
 * `db.transaction(async (tx) => …)`, for the node-postgres and postgres.js
 * drivers. Pass Drizzle's own `sql` tag too: the statement is rebuilt from
 * `sql.raw` text and `sql.param` values, so this never imports `drizzle-orm`.
 */
import type { Queryable } from "../skipq.js";
import { type QueryConfig, splitPlaceholders, textJsonCasts } from "./shared.js";

/** The part of Drizzle's `sql` tag skipq uses. */
export interface DrizzleSqlLike {
  raw(text: string): unknown;
  param(value: unknown): unknown;
  join(chunks: unknown[]): unknown;
}

/** The part of a Drizzle database or transaction skipq uses. */
export interface DrizzleLike {
  // biome-ignore lint/suspicious/noExplicitAny: Drizzle's execute takes its own SQL type, built by the caller's `sql`.
  execute(query: any): PromiseLike<unknown>;
}

/** `skipq.enqueueTx(drizzleQueryable(tx, sql), …)` inside `db.transaction(async (tx) => …)`. */
export function drizzleQueryable(tx: DrizzleLike, sql: DrizzleSqlLike): Queryable {
  return {
    async query(config: QueryConfig) {
      const { parts, params } = splitPlaceholders(textJsonCasts(config.text), config.values ?? []);
      const chunks: unknown[] = [sql.raw(parts[0] ?? "")];
      // sql.param keeps an array one parameter (a bare array would be expanded into a list).
      for (const [i, value] of params.entries()) chunks.push(sql.param(value), sql.raw(parts[i + 1] ?? ""));
      const result = await tx.execute(sql.join(chunks));
      // node-postgres answers { rows, rowCount }; postgres.js answers an array with `count`.
      if (Array.isArray(result)) {
        // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
        const rows = Array.from(result) as any[];
        return { rows, rowCount: (result as { count?: number }).count ?? rows.length };
      }
      const { rows, rowCount } = result as { rows: unknown[]; rowCount?: number | null };
      // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
      return { rows: rows as any[], rowCount: rowCount ?? rows.length };
    },
  };
}
