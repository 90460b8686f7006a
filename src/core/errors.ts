/**
 * Typed library errors. Every error skipq throws on purpose is a `SkipqError`
 * with a stable `code`, and its message says what to do. Callers branch on
 * `code` (or `instanceof`), never on message text.
 */

export type SkipqErrorCode =
  | "SKIPQ_INVALID_ARGUMENT"
  | "SKIPQ_PAYLOAD_TOO_LARGE"
  | "SKIPQ_PAYLOAD_NOT_JSON"
  | "SKIPQ_PAYLOAD_INVALID"
  | "SKIPQ_POOL_TOO_SMALL"
  | "SKIPQ_UNKNOWN_KIND"
  | "SKIPQ_SCHEMA_TOO_NEW"
  | "SKIPQ_SCHEMA_NOT_MIGRATED"
  | "SKIPQ_MIGRATION_FAILED"
  | "SKIPQ_RETRY_IN"
  | "SKIPQ_FAIL_PERMANENTLY"
  | "SKIPQ_CANCEL"
  | "SKIPQ_LEASE_LOST"
  | "SKIPQ_SHUTDOWN"
  | "SKIPQ_JOB_TIMEOUT"
  | "SKIPQ_NOT_FOUND"
  | "SKIPQ_RESULT_TOO_LARGE"
  | "SKIPQ_RESULT_NOT_JSON"
  | "SKIPQ_WAIT_TIMEOUT"
  | "SKIPQ_ALREADY_COMPLETED"
  | "SKIPQ_RETENTION_FAILED";

export class SkipqError extends Error {
  readonly code: SkipqErrorCode;
  constructor(code: SkipqErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}

/** A public API argument is out of range or malformed; nothing was written. */
export class ValidationError extends SkipqError {
  constructor(message: string) {
    super("SKIPQ_INVALID_ARGUMENT", message);
  }
}

/** The encoded payload is larger than `maxPayloadBytes`; nothing was written. */
export class PayloadTooLargeError extends SkipqError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      "SKIPQ_PAYLOAD_TOO_LARGE",
      `payload is ${bytes} bytes, over the limit of ${limit} bytes; store large data elsewhere and enqueue a reference to it, or raise maxPayloadBytes`,
    );
  }
}

/** The payload cannot be stored as JSON without changing it; nothing was written. */
export class PayloadNotJsonError extends SkipqError {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super("SKIPQ_PAYLOAD_NOT_JSON", `payload${path} ${reason}`);
  }
}

/** A handler returned a result larger than the worker's `maxResultBytes`: the attempt fails (and is retried). */
export class ResultTooLargeError extends SkipqError {
  constructor(
    readonly bytes: number,
    readonly limit: number,
  ) {
    super(
      "SKIPQ_RESULT_TOO_LARGE",
      `the handler's result is ${bytes} bytes, over the worker's maxResultBytes of ${limit}; store large results elsewhere and return a reference to them, or raise maxResultBytes`,
    );
  }
}

/** A handler returned something JSON cannot store unchanged: the attempt fails (and is retried). */
export class ResultNotJsonError extends SkipqError {
  constructor(
    readonly path: string,
    reason: string,
  ) {
    super(
      "SKIPQ_RESULT_NOT_JSON",
      `the handler's result${path} ${reason}; return plain JSON (objects, arrays, strings, finite numbers, booleans, null)`,
    );
  }
}

/** `waitFor` / `enqueueAndWait`: the job did not finish within `timeout`. The job itself is untouched. */
export class WaitTimeoutError extends SkipqError {
  constructor(
    readonly jobId: string,
    readonly timeoutMs: number,
    /** The job's status when the wait gave up. */
    readonly lastStatus: string | undefined,
  ) {
    super(
      "SKIPQ_WAIT_TIMEOUT",
      `job ${jobId} did not finish within ${timeoutMs} ms${lastStatus ? ` (it is ${lastStatus})` : ""}; it keeps running: wait again, or read it later with Admin.getJob`,
    );
  }
}

/**
 * `ctx.completeTx`: this job's lease is no longer this attempt's (it expired and was reaped or claimed
 * again, or the job was cancelled). Nothing was written in the caller's transaction: roll it back.
 */
export class LeaseLostError extends SkipqError {
  constructor(
    readonly jobId: string,
    reason = "its lease expired or the job was cancelled",
  ) {
    super(
      "SKIPQ_LEASE_LOST",
      `job ${jobId} is no longer held by this attempt (${reason}); nothing was written: roll your transaction back (another attempt runs the job, or it was cancelled)`,
    );
  }
}

/**
 * `ctx.completeTx`: this attempt was already completed by an earlier `ctx.completeTx` (committed, or in a
 * transaction still open). Nothing more was written; an attempt completes once.
 */
export class AlreadyCompletedError extends SkipqError {
  constructor(readonly jobId: string) {
    super(
      "SKIPQ_ALREADY_COMPLETED",
      `job ${jobId} was already completed by this attempt's ctx.completeTx (committed, or in a transaction still open); call completeTx once per attempt, or again only after that transaction rolled back`,
    );
  }
}

/** A Standard Schema validator rejected the payload. */
export class PayloadInvalidError extends SkipqError {
  constructor(
    readonly kind: string,
    readonly issues: ReadonlyArray<{ message: string; path?: ReadonlyArray<unknown> }>,
  ) {
    const detail = issues
      .slice(0, 5)
      .map((issue) => {
        const where = issue.path?.length
          ? issue.path
              .map((p) => String(typeof p === "object" && p && "key" in p ? (p as { key: unknown }).key : p))
              .join(".")
          : "";
        return where ? `${where}: ${issue.message}` : issue.message;
      })
      .join("; ");
    super("SKIPQ_PAYLOAD_INVALID", `payload for job kind "${kind}" is invalid: ${detail}`);
  }
}

/** The pool cannot hold the connections the worker needs. */
export class PoolTooSmallError extends SkipqError {
  constructor(
    readonly needed: number,
    readonly actual: number,
    detail: string,
  ) {
    super(
      "SKIPQ_POOL_TOO_SMALL",
      `the pool allows ${actual} connections but this worker needs ${needed} (${detail}); raise the pool's max to at least ${needed}, lower concurrency, or let skipq create its own pool by passing connectionString`,
    );
  }
}

/**
 * How long a worker hands back a job of a kind it has no handler for (without using an attempt): another
 * process that handles it — the new version in a rolling deploy, the other service of a shared queue — runs
 * it meanwhile, and this worker looks at it again after this long.
 */
export const UNKNOWN_KIND_WAIT_MS = 30_000;

/**
 * A claimed job has a kind no handler is registered for. Recorded on the job (its last error), never thrown
 * to the caller; the job is handed back for `delayMs` without using an attempt, so it never dies of it.
 */
export class UnknownKindError extends SkipqError {
  readonly delayMs = UNKNOWN_KIND_WAIT_MS;

  constructor(
    readonly kind: string,
    known: readonly string[],
  ) {
    const hint = closest(kind, known);
    super(
      "SKIPQ_UNKNOWN_KIND",
      `no handler is registered for job kind "${kind}"${hint ? ` (did you mean "${hint}"?)` : ""}; this worker handles: ${known.length ? known.join(", ") : "nothing"}; handed back for ${UNKNOWN_KIND_WAIT_MS / 1000} s without using an attempt`,
    );
  }
}

export class SchemaTooNewError extends SkipqError {
  constructor(
    readonly databaseVersion: number,
    readonly codeVersion: number,
    schema: string,
  ) {
    super(
      "SKIPQ_SCHEMA_TOO_NEW",
      `schema "${schema}" is at migration ${databaseVersion} but this skipq knows only up to ${codeVersion}; upgrade skipq in this service (a newer version already migrated the database)`,
    );
  }
}

export class SchemaNotMigratedError extends SkipqError {
  constructor(
    /** The schema's migration version; null when a statement found its tables missing (not read then). */
    readonly databaseVersion: number | null,
    readonly codeVersion: number,
    schema: string,
    cause?: unknown,
  ) {
    super(
      "SKIPQ_SCHEMA_NOT_MIGRATED",
      databaseVersion === null
        ? `schema "${schema}" has no skipq tables (${(cause as Error | undefined)?.message ?? "not migrated"}); run \`skipq migrate\` or call migrate() first, or pass the schema you migrated`
        : `schema "${schema}" is at migration ${databaseVersion} but this skipq needs ${codeVersion}; run \`skipq migrate\` or call migrate() first`,
      cause === undefined ? undefined : { cause },
    );
  }
}

export class MigrationError extends SkipqError {
  constructor(
    readonly version: number,
    readonly sqlState: string | undefined,
    message: string,
    cause: unknown,
  ) {
    super("SKIPQ_MIGRATION_FAILED", message, { cause });
  }
}

/** Thrown by a handler: put the job back and run it again after `delayMs`, without consuming an attempt. */
export class RetryIn extends SkipqError {
  constructor(
    readonly delayMs: number,
    reason = "handler asked to retry later",
  ) {
    super("SKIPQ_RETRY_IN", reason);
  }
}

/** Thrown by a handler: the job is dead at once, whatever attempts remain. */
export class FailPermanently extends SkipqError {
  constructor(reason: string, options?: { cause?: unknown }) {
    super("SKIPQ_FAIL_PERMANENTLY", reason, options);
  }
}

/** Thrown by a handler: the job ends `cancelled` and is never retried. */
export class CancelJob extends SkipqError {
  constructor(reason = "cancelled by its handler") {
    super("SKIPQ_CANCEL", reason);
  }
}

/** Levenshtein distance, small and bounded: used for "did you mean" hints. */
export function closest(name: string, candidates: readonly string[]): string | undefined {
  let best: string | undefined;
  let bestDistance = Math.max(2, Math.floor(name.length / 3)) + 1;
  for (const candidate of candidates) {
    const d = distance(name, candidate);
    if (d < bestDistance) {
      bestDistance = d;
      best = candidate;
    }
  }
  return best;
}

function distance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, i) => i);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j] ?? 0;
      row[j] = Math.min((row[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, previous + (a[i - 1] === b[j - 1] ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length] ?? 0;
}
