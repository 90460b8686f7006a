/**
 * What every display (dashboard pages, the live feed, the CLI) does to a
 * database value before showing it. Rows written by plain SQL, a protocol
 * worker or `skipq_complete` can hold any JSON PostgreSQL accepts, of any
 * shape and depth, and any error text: `displayJson` prints JSON of any depth
 * without recursion (deeper levels become a marker, so the output is still
 * JSON), `attemptLogsText` reads attempt logs of any shape (a wrong one is
 * shown as its JSON), and `displayError` redacts error text whoever wrote it.
 *
 * Invariants: nothing here recurses on the data or throws on a JSON value;
 * every function is linear in what it prints. It never decides what a caller
 * may see: key redaction of payloads is the caller's redactor.
 */
import { REDACTED, redactText, secretValues } from "../core/secrets.js";
import { MAX_ATTEMPTS_KEPT } from "../db/sql/outcomes.js";

/** How many attempts a job keeps in attempt_logs (the most recent): displays say so. */
export { MAX_ATTEMPTS_KEPT };

/** Levels of nesting shown; what lies deeper is replaced by DEEP_MARKER. */
export const MAX_DISPLAY_DEPTH = 100;
/** Stands in for a value nested deeper than a display shows (a JSON string, so the output stays JSON). */
export const DEEP_MARKER = "[nested too deeply to show here: read it with SQL]";

interface Frame {
  close: "]" | "}";
  entries: Array<[string | null, unknown]>;
  next: number;
  depth: number;
}

/**
 * `value` as JSON text, like JSON.stringify(value, null, indent) but iterative: any depth is printed
 * without touching the call stack, levels past `maxDepth` become DEEP_MARKER, and values JSON cannot hold
 * (bigint, undefined in an array) are printed as JSON.stringify's callers would expect (a string, null).
 */
export function displayJson(value: unknown, options: { indent?: number; maxDepth?: number } = {}): string {
  const indent = options.indent ?? 0;
  const maxDepth = options.maxDepth ?? MAX_DISPLAY_DEPTH;
  const out: string[] = [];
  const stack: Frame[] = [];
  const newline = (depth: number) => (indent > 0 ? `\n${" ".repeat(indent * depth)}` : "");
  const emit = (v: unknown, depth: number): void => {
    if (typeof v === "string") out.push(JSON.stringify(v));
    else if (typeof v === "number") out.push(Number.isFinite(v) ? String(v) : "null");
    else if (typeof v === "boolean") out.push(v ? "true" : "false");
    else if (typeof v === "bigint") out.push(JSON.stringify(v.toString()));
    else if (v === null || typeof v !== "object") out.push("null");
    else if (v instanceof Date) out.push(Number.isNaN(v.getTime()) ? "null" : JSON.stringify(v.toISOString()));
    else if (depth >= maxDepth) out.push(JSON.stringify(DEEP_MARKER));
    else {
      const array = Array.isArray(v);
      const entries: Array<[string | null, unknown]> = array
        ? (v as unknown[]).map((item): [null, unknown] => [null, item])
        : Object.entries(v).filter(([, item]) => item !== undefined && typeof item !== "function");
      if (entries.length === 0) out.push(array ? "[]" : "{}");
      else {
        out.push(array ? "[" : "{");
        stack.push({ close: array ? "]" : "}", entries, next: 0, depth: depth + 1 });
      }
    }
  };
  emit(value, 0);
  for (let frame = stack.at(-1); frame !== undefined; frame = stack.at(-1)) {
    if (frame.next === frame.entries.length) {
      stack.pop();
      out.push(newline(frame.depth - 1) + frame.close);
      continue;
    }
    const [key, item] = frame.entries[frame.next++] as [string | null, unknown];
    const comma = frame.next > 1 ? "," : "";
    out.push(`${comma}${newline(frame.depth)}${key === null ? "" : `${JSON.stringify(key)}:${indent > 0 ? " " : ""}`}`);
    emit(item, frame.depth);
  }
  return out.join("");
}

/** The secrets a row carries under secret-looking keys of its payload and headers, when it has them. */
function rowSecrets(row: unknown): string[] {
  if (row === null || typeof row !== "object") return [];
  const { payload, headers } = row as { payload?: unknown; headers?: unknown };
  return [...new Set([...secretValues(payload), ...secretValues(headers)])].sort((a, b) => b.length - a.length);
}

/**
 * Error text as a display shows it: secret-looking pairs and bearer tokens redacted whoever wrote it (the
 * worker's redactor only runs on what the TypeScript worker stores), and the row's own secret values when
 * the row is at hand (its payload and headers are read once, here). `cut` says the text was cut short by
 * the database (a list's `left(last_error, 200)`): then a credential the cut shortened below its usual
 * length is still hidden.
 */
export function errorRedactorFor(row?: unknown): (text: string, cut?: boolean) => string {
  const secrets = rowSecrets(row);
  return (text, cut = false) => {
    const out = redactText(text, secrets);
    return cut ? out.replace(/\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{1,7}$/i, `$1$2${REDACTED}`) : out;
  };
}

/** One error text redacted for display (see errorRedactorFor). */
export function displayError(text: string, row?: unknown, cut = false): string {
  return errorRedactorFor(row)(text, cut);
}

/** Shows a value as text: a string as it is, anything else as its JSON. */
function asText(value: unknown): string {
  return typeof value === "string" ? value : displayJson(value);
}

/** Ways a display hides secrets in a log: `keys` (values under secret keys, at any depth), `text` (free text). */
export interface LogRedaction {
  keys: (value: unknown) => unknown;
  text: (text: string) => string;
}

/**
 * A job's attempt logs as text, one entry per attempt: a header line (attempt, worker, times, outcome),
 * its lines, its error. `skipq job <id>` and the dashboard's job page print the same. Any shape is shown:
 * a value that is not a list, an entry that is not an object, or a line of the wrong shape is printed as
 * its JSON (secret keys hidden), never thrown on.
 */
export function attemptLogsText(value: unknown, redact: LogRedaction): string[] {
  if (value === null || value === undefined) return [];
  const json = (v: unknown) => displayJson(redact.keys(v));
  if (!Array.isArray(value)) return [redact.text(`attempt logs (not a list; as stored): ${json(value)}`)];
  return value.map((entry) => {
    if (entry === null || typeof entry !== "object" || Array.isArray(entry))
      return redact.text(`attempt (not an object; as stored): ${json(entry)}`);
    const log = entry as Record<string, unknown>;
    const head = `attempt ${asText(log.attempt ?? "?")} on ${asText(log.worker ?? "?")}, ${asText(log.startedAt ?? "?")} → ${asText(log.endedAt ?? "?")}: ${asText(log.outcome ?? "?")}`;
    const lines: string[] = [];
    if (Array.isArray(log.lines)) {
      for (const line of log.lines) {
        if (line === null || typeof line !== "object" || Array.isArray(line)) {
          lines.push(`  ${json(line)}`);
          continue;
        }
        const { at, level, msg, ...fields } = line as Record<string, unknown>;
        const extra = Object.keys(fields).length > 0 ? ` ${json(fields)}` : "";
        lines.push(`  ${asText(at ?? "")} ${asText(level ?? "").padEnd(5)} ${asText(msg ?? "")}${extra}`);
      }
    } else if (log.lines !== undefined && log.lines !== null) {
      lines.push(`  lines (not a list; as stored): ${json(log.lines)}`);
    }
    if (typeof log.dropped === "number" && log.dropped > 0) lines.push(`  … ${log.dropped} more line(s) not kept`);
    if (log.error !== null && log.error !== undefined)
      lines.push(`  error: ${asText(log.error).split("\n").join("\n         ")}`);
    return redact.text([head, ...lines].join("\n"));
  });
}

/** One attempt as the job page's attempts table and `skipq job <id>` show it: every field text, redacted. */
export interface AttemptRow {
  attempt: string;
  /** A time (ISO text) or other stored text; null when not known. */
  startedAt: string | null;
  endedAt: string | null;
  worker: string;
  outcome: string;
  error: string | null;
  /** What the row was read from: `recorded` (attempt_logs) or `row` (the job's own columns: its current or last attempt). */
  source: "recorded" | "row";
}

/** Attempts a display lists at most (the stored list holds 25; plain SQL may store any number). */
export const MAX_ATTEMPT_ROWS = 100;
/** Characters of one attempt's error a table cell shows; the full last error is shown apart. */
export const MAX_ATTEMPT_ERROR_CHARS = 4000;

/** The columns of a job attemptRows reads; any of attempt_logs' shapes is accepted. */
export interface AttemptsOf {
  attempts: number;
  status: string;
  locked_at: Date | string | null;
  locked_by: string | null;
  completed_at?: Date | string | null;
  attempt_logs?: unknown;
}

/**
 * A job's attempts, newest first: those recorded in attempt_logs (every attempt that did not simply
 * succeed, and successes that logged: docs/jobs.md, "Attempts"), and its current or last attempt read from
 * the row when no entry records it (running, or a success that logged nothing: its start is `locked_at`,
 * the claim or its last heartbeat). `unrecorded`: attempts of the count that neither names (run before
 * this was recorded, by the SQL protocol, or older than the entries kept). Any stored shape is shown, never
 * thrown on: an entry that is not an object is one row with its JSON as the outcome.
 */
export function attemptRows(job: AttemptsOf, redact: LogRedaction): { rows: AttemptRow[]; unrecorded: number } {
  const show = (v: unknown) => redact.text(typeof v === "string" ? v : displayJson(redact.keys(v)));
  const maybe = (v: unknown) => (v === null || v === undefined ? null : show(v));
  const when = (v: Date | string | null | undefined) =>
    v === null || v === undefined
      ? null
      : v instanceof Date
        ? Number.isNaN(v.getTime())
          ? null
          : v.toISOString()
        : show(v);
  const stored = job.attempt_logs;
  const list: unknown[] =
    stored === null || stored === undefined ? [] : Array.isArray(stored) ? stored.slice(-MAX_ATTEMPT_ROWS) : [stored];
  const rows: AttemptRow[] = [];
  const named = new Set<number>();
  let last: Record<string, unknown> | undefined;
  for (const entry of list) {
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) {
      last = undefined;
      rows.push({
        attempt: "?",
        startedAt: null,
        endedAt: null,
        worker: "?",
        outcome: show(`not an attempt (as stored): ${displayJson(redact.keys(entry))}`),
        error: null,
        source: "recorded",
      });
      continue;
    }
    const e = entry as Record<string, unknown>;
    last = e;
    if (typeof e.attempt === "number" && Number.isInteger(e.attempt)) named.add(e.attempt);
    const error = maybe(e.error);
    rows.push({
      attempt: show(e.attempt ?? "?"),
      startedAt:
        maybe(e.startedAt) ??
        (e.lastSeenAt === undefined || e.lastSeenAt === null ? null : show(`? (last seen ${show(e.lastSeenAt)})`)),
      endedAt: maybe(e.endedAt),
      worker: show(e.worker ?? "?"),
      outcome: show(e.outcome ?? "?"),
      error:
        error !== null && error.length > MAX_ATTEMPT_ERROR_CHARS
          ? `${error.slice(0, MAX_ATTEMPT_ERROR_CHARS)}…`
          : error,
      source: "recorded",
    });
  }
  const attempts = Number.isInteger(job.attempts) ? Math.max(0, job.attempts) : 0;
  const fromRow =
    attempts > 0 && (job.status === "running" || (job.status === "completed" && last?.outcome !== "completed"));
  if (fromRow) {
    named.add(attempts);
    rows.push({
      attempt: String(attempts),
      startedAt: when(job.locked_at),
      endedAt: job.status === "completed" ? when(job.completed_at) : null,
      worker: job.locked_by === null ? "?" : show(job.locked_by),
      outcome: job.status,
      error: null,
      source: "row",
    });
  }
  let recorded = 0;
  for (const n of named) if (n >= 1 && n <= attempts) recorded++;
  const unrecorded = attempts - recorded;
  return { rows: rows.reverse(), unrecorded };
}

/**
 * attempt_logs without the entries that hold no lines (every failed attempt has an entry now; the
 * attempts table shows those): what an "attempt logs" section prints. Any other shape is returned as it is.
 */
export function loggedAttempts(value: unknown): unknown {
  if (!Array.isArray(value)) return value;
  return value.filter((entry) => {
    if (entry === null || typeof entry !== "object" || Array.isArray(entry)) return true;
    const { lines, dropped } = entry as { lines?: unknown; dropped?: unknown };
    if (lines === undefined || lines === null) return false;
    return !Array.isArray(lines) || lines.length > 0 || (typeof dropped === "number" && dropped > 0);
  });
}
