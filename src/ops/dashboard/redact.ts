/**
 * Redaction of secrets before the dashboard renders a payload, headers or an
 * error. The default hides values under keys that look like secrets
 * (password, token, secret, api key, authorization, cookie, credential,
 * private key); an application can pass its own hook, or `false` to show all.
 * A hook returns a new value and must never mutate its input.
 */

export interface RedactTarget {
  field: "payload" | "headers" | "error";
  job: { id: string; queue: string; kind: string };
}

/** Returns what to show instead of `value` (for "error", a string). */
export type Redactor = (value: unknown, target: RedactTarget) => unknown;

export const SECRET_KEY_PATTERN =
  /passw(or)?d|passphrase|^pwd$|secret|token|api[-_]?key|authori[sz]ation|cookie|credential|private[-_]?key/i;

export const REDACTED = "[redacted]";

/** A redactor replacing the values of object keys matching `pattern`, at any depth. */
export function redactKeys(pattern: RegExp = SECRET_KEY_PATTERN): Redactor {
  const walk = (value: unknown, depth: number): unknown => {
    if (depth > 64 || value === null || typeof value !== "object") return value;
    if (Array.isArray(value)) return value.map((v) => walk(v, depth + 1));
    const out: Record<string, unknown> = {};
    for (const [key, v] of Object.entries(value as Record<string, unknown>))
      out[key] = pattern.test(key) ? REDACTED : walk(v, depth + 1);
    return out;
  };
  return (value) => walk(value, 0);
}

export const defaultRedactor: Redactor = redactKeys();
