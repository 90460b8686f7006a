/**
 * The statement catalogue's building block: SQL texts of one area, named per
 * schema. A named statement is prepared once per connection (when the client's
 * `preparedStatements` is on); an unnamed one is planned per call, which suits
 * statements whose best plan depends on their optional filters.
 * Invariant: a statement's name is unique per (schema, area, key), so
 * prepared-statement caches never mix two schemas' texts.
 */
import type { Schema } from "./schema.js";

export interface Statement {
  /** Prepared-statement name; undefined for statements planned on every call. */
  readonly name: string | undefined;
  readonly text: string;
}

export interface AreaOptions {
  /** Name (prepare) the statements: for the hot path and other fixed-shape statements. */
  prepare: boolean;
}

/** Turns `{ key: sqlText }` into `{ key: Statement }`, named `skipq_<schema>_<key>` when prepared. */
export function statements<K extends string>(
  schema: Schema,
  options: AreaOptions,
  texts: Record<K, string>,
): Record<K, Statement> {
  const out = {} as Record<K, Statement>;
  for (const key of Object.keys(texts) as K[]) {
    out[key] = { name: options.prepare ? `skipq_${schema.name}_${key}` : undefined, text: texts[key] };
  }
  return out;
}
