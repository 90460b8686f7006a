/**
 * Which errors mean "the database cannot be reached or used right now" —
 * worth waiting for with backoff, unlike a wrong schema or bad credentials.
 * Classified by code (socket errno or SQLSTATE), never by message text. The
 * worker, the maintainer and the CLI all read these two sets.
 */

/** Socket errors meaning nothing answered at the address (also what the CLI reports as "cannot reach"). */
export const UNREACHABLE_SOCKET_CODES: ReadonlySet<string> = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
]);

/**
 * Besides those: a connection cut mid-use (ECONNRESET, EPIPE), SQLSTATE class 08
 * (connection exception, matched by prefix), 57P01–57P03 (admin shutdown, crash
 * shutdown, cannot connect now), 53300 (too many connections) and 25006 (a
 * read-only transaction: the server was demoted after a failover).
 */
const UNAVAILABLE_CODES: ReadonlySet<string> = new Set([
  ...UNREACHABLE_SOCKET_CODES,
  "ECONNRESET",
  "EPIPE",
  "57P01",
  "57P02",
  "57P03",
  "53300",
  "25006",
]);

export function isUnavailable(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code !== "string") return false;
  return UNAVAILABLE_CODES.has(code) || code.startsWith("08");
}
