/**
 * Per-attempt logs (docs/jobs.md, "Attempt logs"): `ctx.log` writes to the
 * worker's logger as before and also keeps the attempt's lines (info and
 * above), which are stored with the job at its outcome, under the attempt's
 * worker, start, end, outcome and error.
 *
 * Invariants: at most `maxLines` lines per attempt are kept (the rest are
 * counted as dropped) and each is at most MAX_LINE_CHARS of JSON; every string
 * in a line passes the worker's error redactor and values under secret-looking
 * keys are hidden, so a line never stores what last_error would not; logging
 * never throws into the handler.
 */
import { childLogger, type Logger } from "../core/logger.js";
import { type ErrorRedactor, REDACTED, SECRET_KEY_PATTERN } from "../core/secrets.js";
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

function line(
  level: string,
  obj: Record<string, unknown>,
  msg: string | undefined,
  job: Job,
  redact: ErrorRedactor,
): Record<string, unknown> {
  const hidden = (key: string, value: unknown): unknown => {
    if (key !== "" && SECRET_KEY_PATTERN.test(key)) return REDACTED;
    if (value instanceof Error) return { message: redact(value.message, job), name: value.name };
    if (typeof value === "string") return redact(value, job);
    if (typeof value === "bigint") return value.toString();
    return value;
  };
  const fixed = { at: new Date().toISOString(), level, msg: msg === undefined ? "" : msg };
  // at, level and msg first, and never overwritten by a field of the same name.
  const text = JSON.stringify(Object.assign({ ...fixed }, obj, fixed), hidden);
  if (text.length <= MAX_LINE_CHARS) return JSON.parse(text) as Record<string, unknown>;
  const short = redact(msg ?? "", job).slice(0, MAX_LINE_CHARS / 2);
  return { at: new Date().toISOString(), level, msg: short, truncated: true };
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
