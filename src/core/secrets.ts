/**
 * Secrets in error text. A handler's error often echoes a value it was given
 * ("upstream refused api key sk-live-…"): before an error is stored in
 * last_error or printed by `skipq worker`, every string the job carries under a
 * secret-looking key (its payload and headers, at any depth) is replaced by
 * `[redacted]` in the text, and so are `key=value` / `key: value` pairs and
 * bearer tokens. Applications with other secrets pass their own
 * `redactError` to the worker.
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

const PAIR = new RegExp(`((?:${SECRET_KEY_PATTERN.source})[\\w-]*"?\\s*[:=]\\s*"?)([^\\s"',;&]+)`, "gi");
const BEARER = /\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{8,}/gi;

export const defaultErrorRedactor: ErrorRedactor = (text, job) => {
  let out = text;
  for (const secret of [...secretValues(job.payload), ...secretValues(job.headers)].sort((a, b) => b.length - a.length))
    out = out.split(secret).join(REDACTED);
  // A bearer credential may be a single word (Bearer <token>), so it goes whole; a header named like a
  // secret is covered by its value above.
  return out.replace(BEARER, (_m, scheme: string) => `${scheme} ${REDACTED}`).replace(PAIR, `$1${REDACTED}`);
};
