/**
 * Timestamps read from the database, as text that never throws. PostgreSQL
 * accepts what a JavaScript Date cannot hold, and a plain-SQL enqueue can
 * store it: node-postgres reads 'infinity' and '-infinity' as the numbers
 * ±Infinity and a year past +275760 as an Invalid Date, on which
 * `toISOString()` throws "Invalid time value". Every place that shows a
 * timestamp from the database (CLI, dashboard) formats it through here.
 */

/** The latest instant a Date holds; an Invalid Date from PostgreSQL lies beyond it (PostgreSQL's earliest, 4713 BC, is well within range). */
const LATEST = new Date(8_640_000_000_000_000).toISOString();

/** A database timestamp as text: ISO 8601 (UTC), `infinity`, `-infinity`, or `after +275760-09-13T00:00:00.000Z`; null for null. */
export function timestampText(value: Date | number | string | null | undefined): string | null {
  if (value === null || value === undefined) return null;
  if (value === Number.POSITIVE_INFINITY) return "infinity";
  if (value === Number.NEGATIVE_INFINITY) return "-infinity";
  const date = value instanceof Date ? value : new Date(value);
  if (!Number.isNaN(date.getTime())) return date.toISOString();
  return typeof value === "string" ? value : `after ${LATEST}`;
}

/** The Date behind a database timestamp, or undefined when no Date can hold it. */
export function finiteDate(value: Date | number | string | null | undefined): Date | undefined {
  if (value === null || value === undefined) return undefined;
  const date = value instanceof Date ? value : new Date(value);
  return Number.isNaN(date.getTime()) ? undefined : date;
}
