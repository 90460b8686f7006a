/**
 * What every driver adapter shares: turning skipq's `$n` statements into what
 * a driver accepts, and driver results into `{ rows, rowCount }`.
 * Invariants: skipq passes JSON as encoded text with an explicit `::jsonb`
 * cast; adapters make that cast `::text::jsonb` so a driver that serialises
 * json-typed parameters itself (postgres.js) cannot encode the text twice.
 * Nothing here imports a driver: adapters take driver objects structurally.
 */

/** The shape `Queryable.query` receives. */
export interface QueryConfig {
  text: string;
  values?: unknown[];
  name?: string;
}

const jsonCasts = new Map<string, string>();

/** `$3::jsonb` → `$3::text::jsonb` (cached per statement text). */
export function textJsonCasts(text: string): string {
  let out = jsonCasts.get(text);
  if (out === undefined) {
    out = text.replace(/(\$\d+)::(jsonb?)\b/g, "$1::text::$2");
    if (jsonCasts.size < 1000) jsonCasts.set(text, out);
  }
  return out;
}

/**
 * Splits a `$n` statement into the text between placeholders and the values in
 * order of appearance (a `$n` used twice yields its value twice), for drivers
 * with positional `?` or template-tag parameters. skipq's runtime statements
 * hold no `$` or `?` inside string literals, which this relies on.
 */
export function splitPlaceholders(text: string, values: readonly unknown[]): { parts: string[]; params: unknown[] } {
  const parts: string[] = [];
  const params: unknown[] = [];
  let last = 0;
  for (const match of text.matchAll(/\$(\d+)/g)) {
    const index = Number(match[1]) - 1;
    if (index < 0 || index >= values.length) {
      throw new RangeError(`statement uses $${index + 1} but only ${values.length} values were given`);
    }
    parts.push(text.slice(last, match.index));
    params.push(values[index]);
    last = (match.index ?? 0) + match[0].length;
  }
  parts.push(text.slice(last));
  return { parts, params };
}

/** bigint → string in result rows (Prisma returns int8 as bigint; skipq ids are strings). */
export function bigintsToStrings(rows: Array<Record<string, unknown>>): Array<Record<string, unknown>> {
  for (const row of rows) {
    for (const key of Object.keys(row)) if (typeof row[key] === "bigint") row[key] = String(row[key]);
  }
  return rows;
}
