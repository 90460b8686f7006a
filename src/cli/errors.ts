/**
 * How the CLI reports failure: one line on stderr saying what is wrong and
 * what to do, and an exit code (2 for input the user can fix by retyping the
 * command, 1 for everything else). Library `SkipqError`s keep their own
 * message; connection failures name the host and port that did not answer.
 * It never prints a stack trace for an expected failure.
 */
import { SkipqError } from "../core/errors.js";
import { UNREACHABLE_SOCKET_CODES } from "../db/connectionErrors.js";
import { describeHosts, parseConnectionString } from "../db/connectionString.js";

/** Exit codes: 0 success, 1 failure (database, missing job, not actionable), 2 bad input. */
export const EXIT_FAILURE = 1;
export const EXIT_USAGE = 2;

/** An error the CLI raises itself; `exitCode` 2 means the input was wrong. */
export class CliError extends Error {
  constructor(
    message: string,
    readonly exitCode: number = EXIT_USAGE,
  ) {
    super(message);
    this.name = "CliError";
  }
}

/** Library codes that mean "the command line was wrong", so exit 2. */
const INPUT_CODES = new Set([
  "SKIPQ_INVALID_ARGUMENT",
  "SKIPQ_PAYLOAD_TOO_LARGE",
  "SKIPQ_PAYLOAD_NOT_JSON",
  "SKIPQ_PAYLOAD_INVALID",
]);

const POINT_ELSEWHERE = "pass --database-url or set DATABASE_URL to point at another server (or try `skipq demo`)";

/** Where a connection string points, for messages: "host:port/database". */
export function describeTarget(connectionString: string | undefined): string {
  if (!connectionString) return "an unknown server";
  try {
    const url = new URL(connectionString);
    const host = url.hostname || process.env.PGHOST || "localhost";
    const port = url.port || process.env.PGPORT || "5432";
    return `${host}:${port}${url.pathname && url.pathname !== "/" ? url.pathname : ""}`;
  } catch {
    // A libpq host list (h1:5432,h2:5432) is no WHATWG URL: name its hosts instead.
    try {
      const target = parseConnectionString(connectionString);
      if (target.hosts.length > 0) return describeHosts(target);
    } catch {
      /* malformed: the validation error says why */
    }
    return "the server in DATABASE_URL";
  }
}

/** Turns any thrown value into one line and an exit code. */
export function describeError(error: unknown, context: { connectionString?: string; schema?: string } = {}) {
  const target = describeTarget(context.connectionString);
  if (error instanceof CliError) return { message: error.message, exitCode: error.exitCode };
  if (error instanceof SkipqError) {
    return { message: oneLine(error.message), exitCode: INPUT_CODES.has(error.code) ? EXIT_USAGE : EXIT_FAILURE };
  }
  const err = error as { code?: string; message?: string; address?: string; port?: number };
  const code = err?.code;
  if (code && UNREACHABLE_SOCKET_CODES.has(code)) {
    const where = err.address && err.port ? `${err.address}:${err.port}` : target;
    return {
      message: `cannot reach PostgreSQL at ${where} (${code}): is the server running and the address right? ${POINT_ELSEWHERE}`,
      exitCode: EXIT_FAILURE,
    };
  }
  const message = oneLine(err?.message ?? String(error));
  // node-postgres gives these connection failures no code; its messages are all there is to go on.
  if (!code && /timeout expired|Connection terminated/i.test(message)) {
    return {
      message: `cannot reach PostgreSQL at ${target}: ${message.toLowerCase()} (is a PostgreSQL server listening there?); ${POINT_ELSEWHERE}`,
      exitCode: EXIT_FAILURE,
    };
  }
  // SQLSTATEs a user can act on; classified by code, never by message text.
  const hints: Record<string, string> = {
    "28P01": `authentication failed at ${target}: check the user and password in the connection string`,
    "28000": `the server at ${target} refused this user: check the user in the connection string and pg_hba.conf`,
    "3D000": `the database at ${target} does not exist: create it or fix the database name in the connection string`,
    "42P01": `schema "${context.schema}" has no skipq tables: run \`skipq migrate\` first, or pass the schema you migrated with --schema or SKIPQ_SCHEMA`,
    "3F000": `schema "${context.schema}" does not exist: run \`skipq migrate\` first, or pass the schema you migrated with --schema or SKIPQ_SCHEMA`,
    "42501": `the database user lacks privileges on schema "${context.schema}": ${message}`,
    "53300": `the server at ${target} has no free connections: ${message}`,
  };
  if (code && hints[code]) return { message: hints[code], exitCode: EXIT_FAILURE };
  return { message, exitCode: EXIT_FAILURE };
}

function oneLine(text: string): string {
  return text.split("\n")[0]?.trim() ?? text;
}
