/**
 * Knex adapter: a `Queryable` from a Knex instance or the `trx` of
 * `knex.transaction(async (trx) => …)` on the `pg` client. skipq's `$n`
 * placeholders become Knex's positional `?`; never imports `knex`.
 */
import type { Queryable } from "../skipq.js";
import { type QueryConfig, splitPlaceholders, textJsonCasts } from "./shared.js";

/** The part of Knex skipq uses. */
export interface KnexLike {
  raw(sql: string, bindings: readonly unknown[]): PromiseLike<unknown>;
}

/** `skipq.enqueueTx(knexQueryable(trx), …)` inside `knex.transaction(async (trx) => …)`. */
export function knexQueryable(trx: KnexLike): Queryable {
  return {
    async query(config: QueryConfig) {
      const { parts, params } = splitPlaceholders(textJsonCasts(config.text), config.values ?? []);
      // Knex expands an array binding into a list; send arrays as one PostgreSQL array literal instead.
      const bindings = params.map((value) => (Array.isArray(value) ? pgArrayLiteral(value) : value));
      const result = (await trx.raw(parts.join("?"), bindings)) as { rows: unknown[]; rowCount?: number | null };
      // biome-ignore lint/suspicious/noExplicitAny: rows are typed by each caller.
      return { rows: result.rows as any[], rowCount: result.rowCount ?? result.rows.length };
    },
  };
}

/** A one-dimensional array as PostgreSQL array text: every element quoted, NULL for null. */
function pgArrayLiteral(values: readonly unknown[]): string {
  const items = values.map((v) =>
    v === null || v === undefined ? "NULL" : `"${String(v).replace(/\\/g, "\\\\").replace(/"/g, '\\"')}"`,
  );
  return `{${items.join(",")}}`;
}
