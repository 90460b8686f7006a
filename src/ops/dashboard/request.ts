/**
 * Request parsing for the dashboard's routes: the HTTP error a route throws,
 * form bodies, query parameters, the explorer's filter, the limits form and
 * the shown (redacted, size-safe) JSON of a job. Pure helpers: they read a
 * request or a value and never touch the database or write a response.
 */
import type http from "node:http";
import { ValidationError } from "../../core/errors.js";
import { type Duration, isId, NAME_PATTERN } from "../../core/validate.js";
import {
  JOB_STATUSES,
  type JobFilter,
  type JobRow,
  type JobStatus,
  type QueueLimits,
  STATS_RANGES,
  type StatsRange,
} from "../adminTypes.js";
import { type AttemptRow, attemptLogsText, attemptRows, displayJson, loggedAttempts } from "../display.js";
import { FILTER_FIELDS, type JobsFilter } from "./jobsView.js";
import type { LiveInterest } from "./live.js";
import type { Redactor } from "./redact.js";

const MAX_BODY = 16 * 1024;
/** The cookie carrying a one-shot message to the next page ("ok:…" or "err:…"). */
export const FLASH_COOKIE = "skipq_flash";

/** A failure answered with its own status and message (4xx), never logged as a server error. */
export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export function normaliseBase(basePath: string): string {
  if (basePath === "" || basePath === "/") return "";
  if (!/^\/[A-Za-z0-9._~/-]*$/.test(basePath) || basePath.includes("//"))
    throw new ValidationError(`basePath ${JSON.stringify(basePath)} must be a path like "/skipq"`);
  return basePath.replace(/\/+$/, "");
}

/**
 * A redacted value pretty-printed for the page, at any depth: a value inserted by plain SQL can nest deeper
 * than JSON.stringify can go, so it is printed iteratively and levels past MAX_DISPLAY_DEPTH become a note
 * (never a 500, never unredacted text; the redactors copy iteratively too).
 */
export function shownJson(redacted: () => unknown): string {
  return displayJson(redacted(), { indent: 2 });
}

/** A limits form: an empty field removes that limit; numbers and the window are validated by Admin.setQueueLimits. */
export function limitsOf(form: URLSearchParams): QueueLimits {
  const int = (name: string): number | null => {
    const text = formParam(form, name);
    if (text === "") return null;
    if (!/^[0-9]{1,7}$/.test(text))
      throw new ValidationError(`${name} must be a whole number from 1 to 1000000, or empty for no limit`);
    return Number(text);
  };
  const rateLimit = int("rateLimit");
  const windowText = formParam(form, "rateWindow");
  if ((rateLimit === null) !== (windowText === ""))
    throw new ValidationError("a rate limit needs both a number of starts and a window (e.g. 100 per 1m), or neither");
  const fair = formParam(form, "fair") === "true";
  const weightsText = (form.get("weights") ?? "").trim();
  if (weightsText.length > 20_000) throw new HttpError(400, "weights is longer than 20000 characters");
  if (weightsText !== "" && !fair)
    throw new ValidationError("weights apply to fair claims: set Fair to yes, or leave weights empty");
  return {
    concurrency: int("concurrency"),
    keyConcurrency: int("keyConcurrency"),
    fairness: fair ? { weights: weightsOf(weightsText) } : null,
    rate:
      rateLimit === null
        ? null
        : { limit: rateLimit, window: windowText as Duration, perKey: formParam(form, "ratePerKey") === "true" },
  };
}

/**
 * "acme=2, globex=0.5" (commas or new lines) → { acme: 2, globex: 0.5 }; the key is what precedes the last "=".
 * Numbers are checked here for their form, and by Admin.setQueueLimits for their range.
 */
function weightsOf(text: string): Record<string, number> {
  const weights: Record<string, number> = {};
  for (const item of text
    .split(/[,\n]/)
    .map((s) => s.trim())
    .filter(Boolean)) {
    const at = item.lastIndexOf("=");
    const number = item.slice(at + 1).trim();
    if (at <= 0 || !/^\d+(\.\d+)?$/.test(number))
      throw new ValidationError(`weight ${JSON.stringify(item)} must be key=number, e.g. acme=2, globex=0.5`);
    weights[item.slice(0, at).trim()] = Number(number);
  }
  return weights;
}

/** The explorer's filter as typed, from a URL or a form (each field at most 200 characters). */
export function filterOf(get: (name: string) => string): JobsFilter {
  const filter = {} as JobsFilter;
  for (const [key, name] of Object.entries(FILTER_FIELDS) as Array<[keyof JobsFilter, string]>) filter[key] = get(name);
  if (filter.status && !JOB_STATUSES.includes(filter.status as JobStatus))
    throw new HttpError(400, `status must be one of ${JOB_STATUSES.join(", ")}`);
  return filter;
}

/** A "from"/"to" field: an ISO time, read as UTC when it names no zone (what a datetime-local input sends). */
function utcTime(name: string, text: string): Date | undefined {
  if (!text) return undefined;
  const local = /^\d{4}-\d{2}-\d{2}(T\d{2}:\d{2}(:\d{2}(\.\d{1,3})?)?)?$/.test(text);
  const d = new Date(local ? (text.includes("T") ? `${text}Z` : `${text}T00:00Z`) : text);
  if (!/^\d{4}-/.test(text) || Number.isNaN(d.getTime()))
    throw new HttpError(400, `${name} must be a time like 2026-01-31T09:00 (UTC) or 2026-01-31T09:00:00+01:00`);
  return d;
}

/** The typed filter as Admin's, validated by it (bad names, paths and values are 400s). */
export function toJobFilter(f: JobsFilter): JobFilter {
  return {
    ...(f.status ? { status: f.status as JobStatus } : {}),
    ...(f.queue ? { queue: f.queue } : {}),
    ...(f.kind ? { kind: f.kind } : {}),
    ...(f.search ? { search: f.search } : {}),
    ...(f.from ? { createdFrom: utcTime("from", f.from) } : {}),
    ...(f.to ? { createdTo: utcTime("to", f.to) } : {}),
    ...(f.path ? { payloadPath: f.path } : {}),
    ...(f.value ? { payloadValue: f.value } : {}),
  };
}

export function formParam(form: URLSearchParams, name: string): string {
  const value = form.get(name) ?? "";
  if (value.length > 200) throw new HttpError(400, `${name} is longer than 200 characters`);
  return value.trim();
}

export function rangeOf(url: URL): StatsRange {
  const range = url.searchParams.get("range") || "1h";
  if (!(range in STATS_RANGES))
    throw new HttpError(400, `range must be one of ${Object.keys(STATS_RANGES).join(", ")}`);
  return range as StatsRange;
}

/** What an event stream asks for: `topics` (queues, workers) and `jobs` (ids, at most 200). */
export function interestOf(url: URL): LiveInterest {
  const topics = (url.searchParams.get("topics") ?? "").split(",");
  const jobs = (url.searchParams.get("jobs") ?? "").split(",").filter((id) => id !== "");
  if (jobs.length > 200) throw new HttpError(400, "jobs: at most 200 ids");
  for (const id of jobs) if (!isId(id)) throw new HttpError(400, `jobs: ${id.slice(0, 30)} is not a job id`);
  return { queues: topics.includes("queues"), workers: topics.includes("workers"), jobs };
}

/** A job's attempt logs as text, of any shape: each line redacted like a payload, all text like last_error. */
export function attemptLogsShown(
  job: JobRow,
  redact: Redactor,
  redactError: (text: string | null, job: JobRow) => string | null,
): string[] {
  return attemptLogsText(loggedAttempts(job.attempt_logs), {
    keys: (value) => redact(value, { field: "logs", job }),
    text: (text) => redactError(text, job) ?? "",
  });
}

/** A job's attempts, newest first (display.ts attemptRows), redacted as its attempt logs are. */
export function attemptsShown(
  job: JobRow,
  redact: Redactor,
  redactError: (text: string | null, job: JobRow) => string | null,
): { rows: AttemptRow[]; unrecorded: number } {
  return attemptRows(job, {
    keys: (value) => redact(value, { field: "logs", job }),
    text: (text) => redactError(text, job) ?? "",
  });
}

export function param(url: URL, name: string): string {
  const value = url.searchParams.get(name) ?? "";
  if (value.length > 200) throw new HttpError(400, `${name} is longer than 200 characters`);
  return value.trim();
}

/** A percent-decoded path segment, or undefined when its escapes are malformed ("%", "%ZZ", "%C0%80"). */
export function decodePathSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** A name (queue, schedule) from its path segment, percent-decoded; 400 when it is not one. */
export function nameSegment(segment: string | undefined, what: "queue" | "schedule"): string {
  const name = segment === undefined ? undefined : decodePathSegment(segment);
  if (name === undefined || !NAME_PATTERN.test(name)) throw new HttpError(400, `not a ${what} name`);
  return name;
}

/** The last value of a proxy header (the one the proxy in front wrote), trimmed; undefined when absent. */
export function forwarded(
  req: http.IncomingMessage,
  name: "x-forwarded-proto" | "x-forwarded-host",
): string | undefined {
  const value = req.headers[name];
  const last = (Array.isArray(value) ? value.join(",") : (value ?? "")).split(",").at(-1)?.trim();
  return last || undefined;
}

export function safeHost(origin: string): string | undefined {
  try {
    return new URL(origin).host;
  } catch {
    return undefined;
  }
}

/**
 * A form body. When a framework's body parser already read the stream (express.urlencoded(), body-parser:
 * the stream has ended, `req.body` holds what it parsed), that parsed body is used: waiting for the
 * stream's events would wait forever. Otherwise the stream is read here, at most MAX_BODY bytes.
 */
export function readForm(req: http.IncomingMessage): Promise<URLSearchParams> {
  return new Promise((resolve, reject) => {
    const type = req.headers["content-type"] ?? "";
    if (!type.startsWith("application/x-www-form-urlencoded")) {
      reject(new HttpError(415, "send the form as application/x-www-form-urlencoded"));
      req.resume();
      return;
    }
    const parsed = (req as { body?: unknown; _body?: unknown }).body;
    if (req.readableEnded || (req as { _body?: unknown })._body === true) {
      const form = parsedForm(parsed);
      if (form) resolve(form);
      else
        reject(
          new Error(
            "the dashboard's form body was read by another middleware and not kept as req.body: mount the dashboard before body parsers, or use express.urlencoded()",
          ),
        );
      return;
    }
    if (req.destroyed) {
      // The client hung up before the body was read: the stream will emit nothing more.
      reject(Object.assign(new Error("aborted"), { code: "ECONNRESET" }));
      return;
    }
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > MAX_BODY) {
        reject(new HttpError(413, "form too large"));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(new URLSearchParams(Buffer.concat(chunks).toString("utf8"))));
    req.on("error", reject);
  });
}

/** A body a framework parsed, as form fields: an object of strings (or arrays of them), or the raw text. */
function parsedForm(body: unknown): URLSearchParams | undefined {
  if (typeof body === "string") return new URLSearchParams(body);
  if (Buffer.isBuffer(body)) return new URLSearchParams(body.toString("utf8"));
  if (body === null || typeof body !== "object") return undefined;
  const form = new URLSearchParams();
  for (const [name, value] of Object.entries(body))
    for (const one of Array.isArray(value) ? value : [value])
      if (typeof one === "string" || typeof one === "number" || typeof one === "boolean")
        form.append(name, String(one));
  return form;
}
