/**
 * Validation at the edge of the public API: names, durations, numbers and
 * payloads. Everything here runs before any SQL, so bad input changes nothing.
 * Inside the library, values that passed these checks are trusted.
 */
import ms from "ms";
import {
  PayloadNotJsonError,
  PayloadTooLargeError,
  ResultNotJsonError,
  ResultTooLargeError,
  ValidationError,
} from "./errors.js";

/**
 * Names of queues, kinds, cron schedules, sagas and outbox topics: letters, digits and `_ . : -`,
 * starting with a letter or digit, at most 128 characters.
 */
export const NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
/** Schema names: a lowercase SQL identifier that never needs escaping, at most 50 characters (the NOTIFY channel adds a prefix). */
export const SCHEMA_PATTERN = /^[a-z_][a-z0-9_]{0,49}$/;

/** What a name names, as error messages say it. */
export type NameOf = "queue" | "kind" | "schedule" | "saga" | "topic";

export function assertName(what: NameOf, value: unknown): string {
  if (typeof value !== "string" || !NAME_PATTERN.test(value)) {
    const shown =
      typeof value === "string" ? JSON.stringify(value.length > 60 ? `${value.slice(0, 60)}…` : value) : String(value);
    throw new ValidationError(
      `${what} name ${shown} is not allowed: use 1-128 letters, digits, "_", ".", ":" or "-", starting with a letter or digit`,
    );
  }
  return value;
}

/** An optional name, checked as assertName does; null when not given (a statement's "not filtered on"). */
export function optionalName(what: NameOf, value: string | undefined): string | null {
  return value === undefined ? null : assertName(what, value);
}

/** A concurrency key (tenant, customer id): 1-256 characters, no control characters, well-formed Unicode. */
export function assertKey(value: unknown, what = "concurrencyKey"): string {
  // biome-ignore lint/suspicious/noControlCharactersInRegex: rejecting control characters is the point.
  if (typeof value !== "string" || value.length === 0 || value.length > 256 || /[\u0000-\u001f\u007f]/.test(value)) {
    throw new ValidationError(`${what} must be a string of 1-256 characters without control characters`);
  }
  assertWellFormed(what, value);
  return value;
}

export function assertSchema(value: unknown): string {
  if (typeof value !== "string" || !SCHEMA_PATTERN.test(value)) {
    throw new ValidationError(
      `schema name ${JSON.stringify(value)} is not allowed: use lowercase letters, digits and "_" (at most 50), starting with a letter or "_"`,
    );
  }
  return value;
}

/** Quotes a validated schema name as an SQL identifier. */
export function quoteIdent(name: string): string {
  return `"${name.replaceAll('"', '""')}"`;
}

export function assertInt(what: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new ValidationError(`${what} must be an integer from ${min} to ${max}, got ${String(value)}`);
  }
  return value;
}

/** The units a duration string may end with (as the `ms` package reads them, in any case). */
type DurationUnit =
  | "ms"
  | "msec"
  | "msecs"
  | "millisecond"
  | "milliseconds"
  | "s"
  | "sec"
  | "secs"
  | "second"
  | "seconds"
  | "m"
  | "min"
  | "mins"
  | "minute"
  | "minutes"
  | "h"
  | "hr"
  | "hrs"
  | "hour"
  | "hours"
  | "d"
  | "day"
  | "days"
  | "w"
  | "week"
  | "weeks"
  | "y"
  | "yr"
  | "yrs"
  | "year"
  | "years";
type AnyCase<U extends string> = U | Uppercase<U> | Capitalize<U>;

/**
 * A duration: a number of milliseconds or a string like "500ms", "10s", "5 m", "1.5h", "2 days". A
 * template-literal type, so `"ten seconds"` is a compile error (and still a ValidationError at run
 * time, for callers passing plain strings, e.g. from a config file: cast them, they are checked).
 */
export type Duration =
  | number
  | `${number}`
  | `${number}${AnyCase<DurationUnit>}`
  | `${number} ${AnyCase<DurationUnit>}`;

/** Parses a duration to milliseconds; rejects negatives, NaN, infinity, blanks and nonsense. */
export function toMs(
  what: string,
  value: Duration | string,
  { allowZero = true, max = 10 * 365 * 86_400_000 } = {},
): number {
  // A blank string is nonsense too: ms() would throw a bare Error for it, not a ValidationError.
  const parsed =
    typeof value === "number"
      ? value
      : typeof value === "string" && value.trim() !== ""
        ? ms(value.trim() as ms.StringValue)
        : Number.NaN;
  if (typeof parsed !== "number" || !Number.isFinite(parsed)) {
    throw new ValidationError(
      `${what} ${JSON.stringify(value)} is not a duration: use milliseconds or a string like "500ms", "10s", "5m", "2h", "1d"`,
    );
  }
  if (parsed < 0 || (!allowZero && parsed === 0)) {
    throw new ValidationError(
      `${what} must be ${allowZero ? "zero or more" : "more than zero"}, got ${JSON.stringify(value)}`,
    );
  }
  if (parsed > max)
    throw new ValidationError(
      `${what} ${JSON.stringify(value)} is longer than the maximum of ${ms(max, { long: true })}`,
    );
  return Math.round(parsed);
}

export function assertDate(what: string, value: unknown): Date {
  if (!(value instanceof Date) || Number.isNaN(value.getTime())) {
    throw new ValidationError(`${what} must be a valid Date`);
  }
  const year = value.getUTCFullYear();
  if (year < 1970 || year > 9000)
    throw new ValidationError(`${what} ${value.toISOString()} is outside the years 1970-9000`);
  return value;
}

/** How deep containers may nest in a payload, headers or an event: far below what `JSON.stringify` (about 4,000 levels) and PostgreSQL's jsonb parser survive. */
export const MAX_PAYLOAD_DEPTH = 1000;

/**
 * Encodes a payload as JSON, refusing anything JSON would silently change:
 * `undefined`, functions, symbols, BigInt, non-finite numbers, Dates, Maps,
 * class instances, circular references, NUL characters (PostgreSQL's jsonb
 * cannot store them), lone UTF-16 surrogates (not valid Unicode) and nesting
 * deeper than `MAX_PAYLOAD_DEPTH` (which `JSON.stringify` cannot always encode).
 * The rule: what a handler receives deep-equals what was enqueued.
 */
export function encodePayload(payload: unknown, maxBytes: number): string {
  checkJsonSafe(payload, payloadNotJson);
  const text = JSON.stringify(payload);
  const bytes = utf8Bytes(text, maxBytes);
  if (bytes > maxBytes) throw new PayloadTooLargeError(bytes, maxBytes);
  return text;
}

/** `text`'s UTF-8 size, exactly when it could exceed `maxBytes` (a string's is at most 3 bytes per UTF-16 unit). */
function utf8Bytes(text: string, maxBytes: number): number {
  return text.length * 3 <= maxBytes ? text.length : Buffer.byteLength(text, "utf8");
}

const payloadNotJson = (path: string, reason: string) => new PayloadNotJsonError(path, reason);
const resultNotJson = (path: string, reason: string) => new ResultNotJsonError(path, reason);

/**
 * Encodes a handler's return value (docs/jobs.md, "Results") by the payload rules, except that an object
 * property whose value is `undefined` is left out, as JSON.stringify does (a result is read back as data,
 * and `{ error: undefined }` means no error). Throws ResultNotJsonError or ResultTooLargeError.
 */
export function encodeResult(value: unknown, maxBytes: number): string {
  checkJsonSafe(value, resultNotJson, true);
  const text = JSON.stringify(value);
  const bytes = utf8Bytes(text, maxBytes);
  if (bytes > maxBytes) throw new ResultTooLargeError(bytes, maxBytes);
  return text;
}

/** Largest encoded progress object, in bytes: progress is a status line, not a result. */
export const MAX_PROGRESS_BYTES = 1024;

/**
 * Encodes a `ctx.progress()` value: a finite number from 0 to 100 (a percentage), or a plain JSON object of
 * at most MAX_PROGRESS_BYTES encoded (e.g. `{ done: 40, total: 120 }`). Throws ValidationError otherwise.
 */
export function encodeProgress(value: unknown): string {
  if (typeof value === "number") {
    if (!Number.isFinite(value) || value < 0 || value > 100)
      throw new ValidationError(`progress must be a number from 0 to 100 or a small JSON object, got ${value}`);
    return JSON.stringify(value);
  }
  if (typeof value !== "object" || value === null || Array.isArray(value))
    throw new ValidationError(
      `progress must be a number from 0 to 100 or a small JSON object (e.g. { done: 40, total: 120 }), got ${value === null ? "null" : Array.isArray(value) ? "an array" : typeof value}`,
    );
  checkJsonSafe(value, (path, reason) => new ValidationError(`progress${path} ${reason}`), true);
  const text = JSON.stringify(value);
  const bytes = utf8Bytes(text, MAX_PROGRESS_BYTES);
  if (bytes > MAX_PROGRESS_BYTES)
    throw new ValidationError(
      `progress is ${bytes} bytes encoded, over the limit of ${MAX_PROGRESS_BYTES}; keep it to a few counters, and return large data as the job's result`,
    );
  return text;
}

// A high surrogate not followed by a low one, or a low one not preceded by a high one.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;
// A NUL, or a lone surrogate.
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching NUL is the point.
const BAD_STRING = /\u0000|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/**
 * An idempotency key: 1-512 characters, no NUL, well-formed Unicode. node-postgres
 * sends a lone surrogate as U+FFFD, so "order-\uD800" and "order-\uDBFF" would be
 * stored as the same key and the second enqueue would silently return the first job.
 */
export function assertIdempotencyKey(value: unknown): string {
  if (typeof value !== "string" || value.length === 0 || value.length > 512)
    throw new ValidationError("idempotencyKey must be a non-empty string of at most 512 characters");
  if (value.includes("\u0000")) throw new ValidationError("idempotencyKey must not contain NUL characters");
  assertWellFormed("idempotencyKey", value);
  return value;
}

function assertWellFormed(what: string, value: string): void {
  if (LONE_SURROGATE.test(value))
    throw new ValidationError(
      `${what} contains a lone UTF-16 surrogate, which is not valid Unicode: PostgreSQL would store it as U+FFFD, so different keys would collide; encode binary keys as hex or base64`,
    );
}

type NotJson = (path: string, reason: string) => Error;

function checkString(value: string, at: () => string, fail: NotJson): void {
  if (BAD_STRING.test(value)) {
    const nul = value.includes("\u0000");
    throw fail(
      at(),
      nul
        ? "contains a NUL character (\\u0000), which PostgreSQL cannot store in jsonb"
        : "contains a lone UTF-16 surrogate, which is not valid Unicode",
    );
  }
}

/** A container being checked; `parent` and `key` rebuild its path only when an error needs it. */
interface Frame {
  value: object;
  parent: Frame | undefined;
  key: string | number;
  depth: number;
  /** Set once its children are on the stack; popping it again ends it as an ancestor. */
  open: boolean;
}

function pathOf(frame: Frame | undefined, key?: string | number): string {
  if (frame === undefined) return ""; // the root itself
  const parts: string[] = key === undefined ? [] : [typeof key === "number" ? `[${key}]` : `.${key}`];
  for (let f = frame; f?.parent !== undefined; f = f.parent)
    parts.push(typeof f.key === "number" ? `[${f.key}]` : `.${f.key}`);
  const path = parts.reverse().join("");
  return path.length > 120 ? `${path.slice(0, 60)}…${path.slice(-40)}` : path;
}

/**
 * Walks the value with an explicit stack rather than recursion, so no depth
 * can overflow the call stack: a too-deep value fails with PayloadNotJsonError
 * like any other bad payload. Only ancestors count as circular (a shared,
 * acyclic reference is fine, as JSON.stringify repeats it).
 */
function checkJsonSafe(root: unknown, fail: NotJson, omitUndefinedProperties = false): void {
  const ancestors = new Set<object>();
  const stack: Frame[] = [];
  // Checks a primitive at once; pushes a container to be walked.
  const visit = (value: unknown, parent: Frame | undefined, key: string | number): void => {
    switch (typeof value) {
      case "string":
        checkString(value, () => pathOf(parent, key), fail);
        return;
      case "boolean":
        return;
      case "number":
        if (!Number.isFinite(value)) throw fail(pathOf(parent, key), `is ${value}, which JSON cannot represent`);
        return;
      case "bigint":
        throw fail(pathOf(parent, key), "is a BigInt; convert it to a string or number first");
      case "undefined":
        throw fail(pathOf(parent, key), "is undefined; omit the field or use null");
      case "function":
      case "symbol":
        throw fail(pathOf(parent, key), `is a ${typeof value}, which JSON cannot represent`);
    }
    if (value === null) return;
    const object = value as object;
    if (ancestors.has(object)) throw fail(pathOf(parent, key), "is a circular reference");
    const depth = (parent?.depth ?? 0) + 1;
    if (depth > MAX_PAYLOAD_DEPTH)
      throw fail(
        pathOf(parent, key),
        `is nested deeper than ${MAX_PAYLOAD_DEPTH} levels, which JSON.stringify cannot always encode; flatten the structure`,
      );
    if (!Array.isArray(object)) {
      const proto = Object.getPrototypeOf(object);
      if (proto !== Object.prototype && proto !== null) {
        const name = (object as { constructor?: { name?: string } }).constructor?.name ?? "object";
        const hint = object instanceof Date ? "; pass date.toISOString() instead" : "; pass a plain object";
        throw fail(pathOf(parent, key), `is a ${name} instance, which JSON would change${hint}`);
      }
    }
    stack.push({ value: object, parent, key, depth, open: false });
  };
  visit(root, undefined, "");
  while (stack.length > 0) {
    const frame = stack.pop() as Frame;
    if (frame.open) {
      ancestors.delete(frame.value);
      continue;
    }
    frame.open = true;
    ancestors.add(frame.value);
    stack.push(frame);
    if (Array.isArray(frame.value)) {
      const array = frame.value as unknown[];
      for (let i = 0; i < array.length; i++) visit(array[i], frame, i);
    } else {
      const record = frame.value as Record<string, unknown>;
      for (const key of Object.keys(record)) {
        checkString(key, () => pathOf(frame, key), fail);
        const child = record[key];
        if (child === undefined && omitUndefinedProperties) continue;
        visit(child, frame, key);
      }
    }
  }
}

/**
 * Encodes job or event headers: an object of at most 32 string entries, names
 * of at most 128 characters and values of at most 1,024 (small metadata such
 * as a trace context, never a second payload).
 */
export function encodeHeaders(headers: Record<string, string>): string {
  if (typeof headers !== "object" || headers === null || Array.isArray(headers))
    throw new ValidationError("headers must be an object of strings");
  const entries = Object.entries(headers);
  if (entries.length > 32) throw new ValidationError(`headers may hold at most 32 entries, got ${entries.length}`);
  for (const [key, value] of entries) {
    if (typeof value !== "string" || key.length > 128 || value.length > 1024) {
      throw new ValidationError(
        `header ${JSON.stringify(key)} must be a string of at most 1024 characters, with a name of at most 128`,
      );
    }
  }
  return encodePayload(headers, 64 * 1024);
}

const MAX_BIGINT = 9223372036854775807n;

/** An id of a row skipq numbers, as a regular expression's source: 1 to 19 digits, no leading zero (routes embed it). */
export const ID_PATTERN = "[1-9][0-9]{0,18}";
const ID = new RegExp(`^${ID_PATTERN}$`);

/** Whether `text` is such an id, in a bigint's range (at most 2^63 - 1): the one test every id passes. */
export function isId(text: string): boolean {
  return ID.test(text) && BigInt(text) <= MAX_BIGINT;
}

/**
 * An id of a row skipq numbers (a job, a saga, an outbox event): a positive
 * integer that fits PostgreSQL's bigint, as a number or a decimal string.
 * Returns it as a string. `what` names it in the error ("job id", "saga id").
 */
export function assertId(value: unknown, what = "job id"): string {
  const text = typeof value === "number" && Number.isSafeInteger(value) ? String(value) : value;
  if (typeof text !== "string" || !isId(text)) {
    throw new ValidationError(`${what} ${JSON.stringify(value)} is not a positive whole number (at most 2^63 - 1)`);
  }
  return text;
}
