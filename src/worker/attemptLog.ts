/**
 * Per-attempt logs (docs/jobs.md, "Attempt logs"): `ctx.log` writes to the
 * worker's logger as before and also keeps the attempt's lines (info and
 * above), which are stored with the job at its outcome, under the attempt's
 * worker, start, end, outcome and error.
 *
 * Invariants: at most `maxLines` lines per attempt are kept (the rest are
 * counted as dropped) and each is at most MAX_LINE_CHARS of JSON; every string
 * in a line passes the worker's error redactor and values under secret-looking
 * keys are hidden, so a line never stores what last_error would not; a line
 * is cut before it is redacted (a huge string costs what a short one does, and
 * a secret across the cut goes whole); logging never throws into the handler.
 */
import { childLogger, type Logger } from "../core/logger.js";
import { type ErrorRedactor, REDACTED, redactPrefix, SECRET_KEY_PATTERN } from "../core/secrets.js";
import type { AttemptLines, Job } from "./types.js";

/** Longest line kept, as JSON; a longer one keeps its level and the start of its message. */
export const MAX_LINE_CHARS = 2000;

const KEPT_LEVELS = new Set(["info", "warn", "error"]);

/**
 * The `ctx.log` of one attempt: forwards to `base` (the worker's logger, bound to the job) and keeps its
 * lines in `record` while `maxLines` allows.
 */
export function attemptLogger(
  base: Logger,
  job: Job,
  record: AttemptLines,
  maxLines: number,
  redact: ErrorRedactor,
): Logger {
  const child = childLogger(base, { jobId: job.id, kind: job.kind, attempt: job.attempt });
  const keep = (level: string, obj: Record<string, unknown>, msg: string | undefined) => {
    if (!KEPT_LEVELS.has(level)) return;
    if (record.lines.length >= maxLines) {
      record.dropped++;
      return;
    }
    try {
      record.lines.push(line(level, obj, msg, job, redact));
    } catch {
      record.dropped++; // a value that cannot be serialized: the line is still in the worker's own log
    }
  };
  const method =
    (level: "debug" | "info" | "warn" | "error") =>
    (obj: Record<string, unknown> | string, msg?: string): void => {
      // pino also takes a message alone: log.info("text").
      const fields = typeof obj === "string" ? {} : (obj ?? {});
      const text = typeof obj === "string" ? obj : msg;
      keep(level, fields, text);
      child[level](fields, text);
    };
  return { debug: method("debug"), info: method("info"), warn: method("warn"), error: method("error") };
}

/** Thrown from the serializer once a line is certain to exceed MAX_LINE_CHARS: nothing more is redacted. */
const TOO_LONG = new Error("line too long");

function line(
  level: string,
  obj: Record<string, unknown>,
  msg: string | undefined,
  job: Job,
  redact: ErrorRedactor,
): Record<string, unknown> {
  // What the line's JSON will hold at least: keys and raw strings. Past MAX_LINE_CHARS the line is cut to
  // its message, so no string is redacted (and no huge one scanned) once the budget is spent.
  let budget = MAX_LINE_CHARS;
  const hidden = (key: string, value: unknown): unknown => {
    budget -= key.length;
    if (budget < 0) throw TOO_LONG;
    if (key !== "" && SECRET_KEY_PATTERN.test(key)) return REDACTED;
    if (value instanceof Error) return { message: value.message, name: value.name };
    if (typeof value === "string") {
      budget -= value.length;
      if (budget < 0) throw TOO_LONG;
      return redact(value, job);
    }
    if (typeof value === "bigint") return value.toString();
    return value;
  };
  const fixed = { at: new Date().toISOString(), level, msg: msg === undefined ? "" : msg };
  try {
    // at, level and msg first, and never overwritten by a field of the same name.
    const text = JSON.stringify(Object.assign({ ...fixed }, obj, fixed), hidden);
    if (text.length <= MAX_LINE_CHARS) return JSON.parse(text) as Record<string, unknown>;
  } catch (error) {
    if (error !== TOO_LONG) throw error;
  }
  // Cut before redacting: only the kept start of the message is read, and a secret across the cut goes whole.
  const short = redactPrefix(redact, msg ?? "", job, MAX_LINE_CHARS / 2);
  return { at: fixed.at, level, msg: short, truncated: true };
}

/** What an outcome is called in an attempt's log. */
const OUTCOME_LABEL: Record<string, string> = { retry: "failed" };

/**
 * One attempt's entry as stored in attempt_logs (JSON text): `error` is the attempt's error as stored in
 * last_error (already redacted), null when it has none.
 */
export function attemptEntry(
  record: AttemptLines,
  p: { attempt: number; worker: string; outcome: string; error: string | null },
): string {
  return JSON.stringify({
    attempt: p.attempt,
    worker: p.worker,
    startedAt: record.startedAt,
    endedAt: new Date().toISOString(),
    outcome: OUTCOME_LABEL[p.outcome] ?? p.outcome,
    error: p.error,
    lines: record.lines,
    dropped: record.dropped,
  });
}
