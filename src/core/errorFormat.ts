/**
 * How a failure is stored: `formatError` is the text in last_error (message
 * and stack, NUL-free, valid UTF-8, at most 8 KiB), `errorFingerprint` groups
 * failures that are "the same error" for the dead-letter tools. Used by the
 * worker and the outbox relay.
 */
import { createHash } from "node:crypto";

const MAX_ERROR_CHARS = 8192;

/** The text stored in last_error: message and stack, NUL bytes stripped, truncated. */
export function formatError(error: unknown): string {
  let text: string;
  if (error instanceof Error) {
    text = error.stack?.includes(error.message) ? error.stack : `${error.name}: ${error.message}\n${error.stack ?? ""}`;
  } else {
    try {
      text = `non-Error thrown: ${typeof error === "string" ? error : (JSON.stringify(error) ?? String(error))}`;
    } catch {
      text = `non-Error thrown: ${String(error)}`;
    }
  }
  // biome-ignore lint/suspicious/noControlCharactersInRegex: PostgreSQL text cannot hold NUL.
  text = text.replace(/\u0000/g, "");
  if (text.length > MAX_ERROR_CHARS)
    text = `${text.slice(0, MAX_ERROR_CHARS)}… [truncated ${text.length - MAX_ERROR_CHARS} chars]`;
  // A cut in the middle of a surrogate pair would be invalid UTF-8.
  return text.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, "\uFFFD");
}

/**
 * Groups failures that are "the same error": the job kind plus the first line
 * of the message with numbers, hex, UUIDs and quoted values masked, hashed.
 */
export function errorFingerprint(kind: string, error: unknown): string {
  const message =
    error instanceof Error ? `${error.name}: ${error.message}` : typeof error === "string" ? error : "non-Error";
  const normalised = (message.split("\n")[0] ?? "")
    .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi, "<uuid>")
    .replace(/0x[0-9a-f]+|\b[0-9a-f]{12,}\b/gi, "<hex>")
    .replace(/"[^"]*"|'[^']*'/g, "<str>")
    .replace(/\d+(\.\d+)?/g, "<n>")
    .slice(0, 500);
  return createHash("sha256").update(`${kind}\u0000${normalised}`).digest("hex").slice(0, 16);
}
