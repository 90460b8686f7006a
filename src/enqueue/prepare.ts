/**
 * A call turned into a row: validates one enqueue's job, payload and options
 * and encodes them as the `InsertRow` the job store inserts — the payload
 * checked against its definition's schema and its size limit, every option's
 * range, the trace context carried in the headers, and the uniqueness and
 * debounce keys (a default uniqueness key hashes kind, queue and payload).
 *
 * Invariant: everything is checked here, before any SQL is sent; a bad input
 * throws ValidationError or TypeError and nothing is written.
 */
import { createHash } from "node:crypto";
import { ValidationError } from "../core/errors.js";
import { type JobDefinition, validatePayload } from "../core/job.js";
import {
  assertDate,
  assertIdempotencyKey,
  assertInt,
  assertKey,
  assertName,
  encodeHeaders,
  encodePayload,
  toMs,
} from "../core/validate.js";
import type { InsertRow } from "../db/jobStore.js";
import { type TraceHeaders, withTraceContext } from "../shared/telemetry.js";
import { parentRefs } from "../workflow/graph.js";
import type { BulkItem, EnqueueOptions, JobRef } from "./options.js";

/**
 * Item `i` of an enqueueMany call (an array: see assertItems), validated and encoded. The COPY path calls
 * this as it streams, so validation overlaps the database's work; a bad item aborts the copy's transaction.
 */
export function prepareBulkItem(
  items: ReadonlyArray<BulkItem>,
  i: number,
  traceHeaders: TraceHeaders,
  maxPayloadBytes: number,
): Promise<InsertRow> {
  const item = items[i] as BulkItem;
  if (item?.unique !== undefined || item?.debounce !== undefined)
    throw new ValidationError(
      `item ${i}: unique and debounce are for enqueue and enqueueTx (each needs its own statement), not enqueueMany`,
    );
  return prepareRow(item.job, item.payload, item, i, traceHeaders, maxPayloadBytes, items.length);
}

/**
 * Validates one call and encodes it as a row; throws before any SQL on bad input. `items`: the size of the
 * call this row is part of (enqueueMany), so dependsOn may name its other items.
 */
export async function prepareRow(
  job: JobRef<unknown>,
  payload: unknown,
  options: EnqueueOptions,
  i: number,
  traceHeaders: TraceHeaders,
  maxPayloadBytes: number,
  items?: number,
): Promise<InsertRow> {
  const definition = typeof job === "string" ? { kind: assertName("kind", job) } : job;
  if (typeof definition !== "object" || definition === null || typeof definition.kind !== "string") {
    throw new TypeError("job must be a kind string or a definition from defineJob()");
  }
  const def = definition as Partial<JobDefinition<unknown>> & { kind: string };
  const value = def.schema ? await validatePayload(def, payload) : payload;
  const queue = assertName("queue", options.queue ?? def.queue ?? "default");
  const priority = assertInt("priority", options.priority ?? def.priority ?? 0, -32768, 32767);
  const maxAttempts = assertInt("maxAttempts", options.maxAttempts ?? def.maxAttempts ?? 10, 1, 1_000_000);
  if (options.runAt !== undefined && options.delay !== undefined) {
    throw new ValidationError("pass either runAt or delay, not both");
  }
  const runAt = options.runAt === undefined ? null : assertDate("runAt", options.runAt).toISOString();
  const delayMs = options.delay === undefined ? 0 : toMs("delay", options.delay);
  const key = options.idempotencyKey === undefined ? null : assertIdempotencyKey(options.idempotencyKey);
  const own = options.headers === undefined ? null : encodeHeaders(options.headers);
  // The enqueue span's trace context rides along so the execution span can link to it.
  const traced = withTraceContext(options.headers, traceHeaders);
  const headers = traced === options.headers || traced === undefined ? own : encodeHeaders(traced);
  const concurrencyKey = options.concurrencyKey === undefined ? null : assertKey(options.concurrencyKey);
  const row: InsertRow = {
    i,
    queue,
    kind: def.kind,
    payload: encodePayload(value, maxPayloadBytes),
    priority,
    maxAttempts,
    runAt,
    delayMs,
    key,
    headers,
    concurrencyKey,
    parents: parentRefs(options, i, items),
  };
  if (options.unique !== undefined || options.debounce !== undefined) addKeyedOptions(row, options, value);
  return row;
}

/** enqueueMany's input must be an array (of `{ job, payload, ...options }`). */
export function assertItems(items: unknown): asserts items is ReadonlyArray<BulkItem> {
  if (!Array.isArray(items)) throw new TypeError("enqueueMany expects an array of { job, payload, ...options }");
}

/** Validates `unique` or `debounce` (docs/jobs.md) and adds it to `row`. */
function addKeyedOptions(row: InsertRow, options: EnqueueOptions, payload: unknown): void {
  const { unique, debounce } = options;
  if (unique !== undefined && debounce !== undefined)
    throw new ValidationError("pass either unique or debounce, not both");
  if (row.key !== null)
    throw new ValidationError(
      `pass either idempotencyKey or ${unique !== undefined ? "unique" : "debounce"}, not both (they keep different keys: docs/jobs.md)`,
    );
  if (options.dependsOn !== undefined)
    throw new ValidationError(
      `${unique !== undefined ? "unique" : "debounce"} cannot be combined with dependsOn: a waiting job is released by its parents, not by its key`,
    );
  if (unique !== undefined) {
    if (typeof unique !== "object" || unique === null)
      throw new ValidationError('unique must be an object like { period: "1h" } or { key: "report-42", period: "1h" }');
    const states = unique.states ?? "all";
    if (states !== "all" && states !== "live")
      throw new ValidationError(`unique.states must be "all" or "live", got ${JSON.stringify(unique.states)}`);
    row.unique = {
      key:
        unique.key === undefined ? defaultUniqueKey(row.kind, row.queue, payload) : assertKey(unique.key, "unique.key"),
      periodMs: toMs("unique.period", unique.period, { allowZero: false }),
      live: states === "live",
    };
    return;
  }
  if (typeof debounce !== "object" || debounce === null)
    throw new ValidationError('debounce must be an object like { delay: "2s" } or { key: "user-7", delay: "2s" }');
  if (options.runAt !== undefined || options.delay !== undefined)
    throw new ValidationError("debounce sets when the job runs (delay after the last enqueue): pass no runAt or delay");
  row.debounce = {
    key: debounce.key === undefined ? row.kind : assertKey(debounce.key, "debounce.key"),
    delayMs: toMs("debounce.delay", debounce.delay),
  };
}

/**
 * A uniqueness key from kind, queue and payload: SHA-256 of the three, the payload as JSON with object keys
 * sorted, so `{ a, b }` and `{ b, a }` are the same job. Hex, prefixed, well within a key's 256 characters.
 */
export function defaultUniqueKey(kind: string, queue: string, payload: unknown): string {
  const hash = createHash("sha256")
    .update(`${kind}\n${queue}\n${canonicalJson(payload)}`)
    .digest("hex");
  return `sha256:${hash}`;
}

/** JSON with every object's keys in sorted order (the value already passed the payload rules). */
function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson(record[k])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value);
}
