/**
 * Secrets in error text. A handler's error often echoes a value it was given
 * ("upstream refused api key sk-live-…"): before an error is stored in
 * last_error or printed by `skipq worker`, every string the job carries under a
 * secret-looking key (its payload and headers, at any depth) is replaced by
 * `[redacted]` in the text, and so are `key=value` / `key: value` pairs and
 * bearer tokens. Applications with other secrets pass their own
 * `redactError` to the worker. Displays (dashboard, CLI) run `redactText` over
 * any error text at display time too, whoever wrote it.
 *
 * Invariants: redaction is linear in the text (every pattern is anchored so
 * that each character is scanned a bounded number of times, whatever the
 * input); `redactPrefix` cuts before it redacts, and a secret that straddles
 * the cut is redacted whole, never kept in part.
 */

/** Object keys whose values are secrets (also what the dashboard hides). */
export const SECRET_KEY_PATTERN =
  /passw(or)?d|passphrase|^pwd$|secret|token|api[-_]?key|authori[sz]ation|cookie|credential|private[-_]?key/i;

export const REDACTED = "[redacted]";

/** Replaces a job's secret values (and secret-looking pairs) in `text`. */
export type ErrorRedactor = (text: string, job: { payload: unknown; headers: Record<string, string> }) => string;

const MIN_SECRET = 4;
const MAX_NODES = 10_000;

/** The string values under secret-looking keys of `value`, at any depth (iterative; bounded). */
export function secretValues(value: unknown): string[] {
  const found: string[] = [];
  const stack: Array<[unknown, boolean]> = [[value, false]];
  for (let seen = 0; stack.length > 0 && seen < MAX_NODES; seen++) {
    const [node, secret] = stack.pop() as [unknown, boolean];
    if (typeof node === "string") {
      if (secret && node.length >= MIN_SECRET) found.push(node);
    } else if (Array.isArray(node)) {
      for (const item of node) stack.push([item, secret]);
    } else if (node !== null && typeof node === "object") {
      for (const [key, item] of Object.entries(node)) stack.push([item, secret || SECRET_KEY_PATTERN.test(key)]);
    }
  }
  return found;
}

/**
 * A key and its separator (`password=`, `"api_key": "`). The key starts where a run of word characters
 * starts (the lookbehind), so each run is tried once: the old pattern started at every key word inside a
 * run and backtracked over the rest of it, which made 112 KB of "tokentoken…" take seconds. The value is
 * read by hand after a secret key, so a non-secret key never rescans what follows it.
 */
const KEY = /(?<![\w-])([\w-]+)"?\s*[:=]\s*"?/g;
/** A pair's value, read from where its key's separator ends (sticky). */
const VALUE = /[^\s"',;&]*/y;
/** A credential after an auth scheme: only the token is replaced. Anchored by \b, so linear. */
const BEARER = /\b(?:bearer|basic)\s+([A-Za-z0-9._~+/=-]{8,})/gi;
/** A match needs this much text past a cut to be recognised: the longest key-and-separator worth reading. */
const CUT_MARGIN = 256;

type Span = [start: number, end: number];

/** The spans of `text` to replace: the job's secret values, pairs' values and bearer tokens, merged. */
function secretSpans(text: string, secrets: readonly string[]): Span[] {
  const spans: Span[] = [];
  for (const secret of secrets)
    for (let at = text.indexOf(secret); at >= 0; at = text.indexOf(secret, at + secret.length))
      spans.push([at, at + secret.length]);
  KEY.lastIndex = 0;
  for (let m = KEY.exec(text); m !== null; m = KEY.exec(text)) {
    if (!SECRET_KEY_PATTERN.test(m[1] as string)) continue;
    const start = KEY.lastIndex;
    VALUE.lastIndex = start;
    VALUE.exec(text);
    const end = VALUE.lastIndex;
    if (end > start) spans.push([start, end]);
    KEY.lastIndex = end;
  }
  BEARER.lastIndex = 0;
  for (let m = BEARER.exec(text); m !== null; m = BEARER.exec(text))
    spans.push([BEARER.lastIndex - (m[1] as string).length, BEARER.lastIndex]);
  spans.sort((a, b) => a[0] - b[0]);
  const merged: Span[] = [];
  for (const span of spans) {
    const last = merged.at(-1);
    if (last && span[0] <= last[1]) last[1] = Math.max(last[1], span[1]);
    else merged.push([span[0], span[1]]);
  }
  return merged;
}

/** `text` up to `end` with every span before `end` replaced by REDACTED. */
function replaced(text: string, spans: readonly Span[], end: number): string {
  let out = "";
  let at = 0;
  for (const [s, e] of spans) {
    if (s >= end) break;
    out += text.slice(at, s) + REDACTED;
    at = e;
  }
  return at < end ? out + text.slice(at, end) : out;
}

/** Distinct secrets of a job, longest first; computed once per job object. */
const secretsByJob = new WeakMap<object, string[]>();
function secretsOf(job: { payload: unknown; headers: Record<string, string> }): string[] {
  let secrets = secretsByJob.get(job);
  if (!secrets) {
    secrets = [...new Set([...secretValues(job.payload), ...secretValues(job.headers)])].sort(
      (a, b) => b.length - a.length,
    );
    secretsByJob.set(job, secrets);
  }
  return secrets;
}

/**
 * Secret-looking pairs (`password=…`, `"token": "…"`) and bearer/basic credentials in any text, with no job
 * to take values from: what displays run over error text that anyone (a protocol worker, the relay, plain
 * SQL) may have written.
 */
export function redactText(text: string, secrets: readonly string[] = []): string {
  const spans = secretSpans(text, secrets);
  return spans.length === 0 ? text : replaced(text, spans, text.length);
}

export const defaultErrorRedactor: ErrorRedactor = (text, job) => redactText(text, secretsOf(job));

/**
 * At most `max` characters of `text`, redacted. With the default redactor only the start of the text is
 * read (the cut plus a margin that holds any secret starting before it); a secret across the cut is
 * redacted whole. Any other redactor sees the whole text, since only it knows what its secrets look like.
 */
export function redactPrefix(
  redact: ErrorRedactor,
  text: string,
  job: { payload: unknown; headers: Record<string, string> },
  max: number,
): string {
  if (redact !== defaultErrorRedactor || text.length <= max) return redact(text, job).slice(0, max);
  const secrets = secretsOf(job);
  const window = text.slice(0, max + Math.max(CUT_MARGIN, secrets[0]?.length ?? 0));
  const spans = secretSpans(window, secrets);
  let end = max;
  for (const [s, e] of spans) if (s < end && e > end) end = e;
  return replaced(window, spans, end).slice(0, max);
}

/**
 * A URL as it may be stored or logged: scheme://host[:port] and a redacted path and query, since webhook
 * services (Slack, Discord, Teams) keep the credential in the path. User info is never shown.
 */
export function describeUrl(url: URL): string {
  const bare = url.pathname === "/" && url.search === "" && url.hash === "";
  return `${url.protocol}//${url.host}/${bare ? "" : REDACTED}`;
}

/**
 * Every URL in `text` with its path and query redacted (see describeUrl), for error text written before
 * sinks described their URLs. A scheme starts only where a run of scheme characters starts, so linear.
 */
export function redactUrlPaths(text: string): string {
  return text.replace(
    /(?<![a-z0-9+.-])([a-z][a-z0-9+.-]*:\/\/[^\s/?#"'<>]+)[/?#][^\s"'<>]*/gi,
    (_m, origin: string) => `${origin}/${REDACTED}`,
  );
}
