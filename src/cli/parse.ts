/**
 * Parsers for flag values. Each turns a string typed on the command line into
 * a checked value or throws a `CliError` naming the flag and an example of a
 * good value. Durations go through the library's `toMs`, so the CLI accepts
 * exactly what the API accepts. Nothing here touches the database.
 */
import { ValidationError } from "../core/errors.js";
import { assertId, assertName, toMs } from "../core/validate.js";
import { CliError } from "./errors.js";

/** An integer flag such as `--priority 5`. */
export function parseInteger(flag: string, text: string, min: number, max: number): number {
  if (!/^[+-]?\d+$/.test(text.trim())) {
    throw new CliError(`${flag} ${JSON.stringify(text)} is not a whole number: use e.g. ${flag} ${Math.max(min, 1)}`);
  }
  const value = Number(text);
  if (value < min || value > max) throw new CliError(`${flag} must be from ${min} to ${max}, got ${text}`);
  return value;
}

/** A duration flag such as `--delay 10s`; negatives and nonsense are refused. */
export function parseDuration(flag: string, text: string, options: { allowZero?: boolean } = {}): number {
  // A bare number is milliseconds in the API; on the command line "-5" or "5" deserve the same checks.
  const value = /^[+-]?\d+(\.\d+)?$/.test(text.trim()) ? Number(text) : text;
  try {
    return toMs(flag, value, options);
  } catch (error) {
    if (error instanceof ValidationError) throw new CliError(error.message);
    throw error;
  }
}

/** A JSON flag such as `--payload '{"to":"a@b.c"}'`. */
export function parseJson(flag: string, text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new CliError(
      `${flag} is not valid JSON (${reason}): quote it for your shell, e.g. ${flag} '{"to":"ada@example.com"}'`,
    );
  }
}

/** A timestamp flag such as `--run-at 2030-01-01T09:00:00Z`. */
export function parseDate(flag: string, text: string): Date {
  const date = /^\d{4}-\d{2}-\d{2}/.test(text.trim()) ? new Date(text) : new Date(Number.NaN);
  if (Number.isNaN(date.getTime())) {
    throw new CliError(
      `${flag} ${JSON.stringify(text)} is not an ISO 8601 time: use e.g. ${flag} 2030-01-01T09:00:00Z`,
    );
  }
  return date;
}

/** A positive id such as `job 42` (what: "job id", "saga id"; hint: where such ids come from). */
export function parseId(text: string, what = "job id", hint = "list ids with `skipq jobs`"): string {
  try {
    return assertId(text.trim(), what);
  } catch {
    throw new CliError(`${what} ${JSON.stringify(text)} is not a positive whole number: ${hint}`);
  }
}

/** Repeatable `--queue a --queue b` (or `--queue a,b`). */
export function collect(value: string, previous: string[] | undefined): string[] {
  return [...(previous ?? []), ...value.split(",").filter((v) => v.length > 0)];
}

/** A queue or kind name, checked before connecting (the same rule as the library's). */
export function parseName(what: "queue" | "kind", text: string): string {
  try {
    return assertName(what, text);
  } catch (error) {
    if (error instanceof ValidationError) throw new CliError(error.message);
    throw error;
  }
}
