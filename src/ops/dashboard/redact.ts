/**
 * Redaction of secrets before the dashboard renders a payload, headers, a
 * result, progress, attempt logs or an error. The default hides values under
 * keys that look like secrets (password, token, secret, api key,
 * authorization, cookie, credential, private key) and, in error text and log
 * lines, secret-looking pairs and bearer tokens, whoever wrote them (the
 * worker's own redactor covers only what the TypeScript worker stores); an
 * application can pass its own hook, or `false` to show all. A hook returns a
 * new value and must never mutate its input.
 */

export interface RedactTarget {
  field: "payload" | "headers" | "error" | "result" | "progress" | "logs";
  /** The job shown; on a job's own page it also carries its payload and headers. */
  job: { id: string; queue: string; kind: string };
}

/** Returns what to show instead of `value` (for "error", a string). */
export type Redactor = (value: unknown, target: RedactTarget) => unknown;

import { REDACTED, SECRET_KEY_PATTERN } from "../../core/secrets.js";
import { errorRedactorFor } from "../display.js";

export { REDACTED, SECRET_KEY_PATTERN };

/**
 * A redactor replacing the values of object keys matching `pattern`, at any
 * depth: it copies with an explicit stack, never recursion, so no nesting can
 * overflow the call stack or stop the walk early. Shared and circular
 * references are copied once and stay shared.
 */
export function redactKeys(pattern: RegExp = SECRET_KEY_PATTERN): Redactor {
  return copyRedacted(pattern);
}

/** redactKeys, with every string of the copy (keys' values that are not secret) passed through `text`. */
function copyRedacted(pattern: RegExp, text?: (s: string) => string): Redactor {
  // A global or sticky pattern keeps state between test() calls; drop those flags.
  const keyPattern = new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ""));
  return (value) => {
    const copies = new Map<object, unknown>();
    const pending: Array<[object, Record<string, unknown> | unknown[]]> = [];
    const copyOf = (v: unknown): unknown => {
      if (typeof v === "string") return text ? text(v) : v;
      if (v === null || typeof v !== "object") return v;
      const known = copies.get(v);
      if (known !== undefined) return known;
      const copy: Record<string, unknown> | unknown[] = Array.isArray(v) ? new Array<unknown>(v.length) : {};
      copies.set(v, copy);
      pending.push([v, copy]);
      return copy;
    };
    const root = copyOf(value);
    for (let next = pending.pop(); next !== undefined; next = pending.pop()) {
      const [source, copy] = next;
      if (Array.isArray(source)) {
        for (let i = 0; i < source.length; i++) (copy as unknown[])[i] = copyOf(source[i]);
        continue;
      }
      for (const [key, v] of Object.entries(source)) {
        // defineProperty, so a "__proto__" key from JSON stays a plain key instead of setting the prototype.
        Object.defineProperty(copy, key, {
          value: keyPattern.test(key) ? REDACTED : copyOf(v),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
    }
    return root;
  };
}

const keysOnly = redactKeys();

/**
 * The default: values under secret-looking keys, at any depth; in an error, secret-looking pairs, bearer
 * tokens and (on a job's page) the job's own secret values; in log lines, both.
 */
export const defaultRedactor: Redactor = (value, target) => {
  if (target.field === "error") return typeof value === "string" ? errorRedactorFor(target.job)(value) : value;
  if (target.field !== "logs") return keysOnly(value, target);
  return copyRedacted(SECRET_KEY_PATTERN, errorRedactorFor(target.job))(value, target);
};
