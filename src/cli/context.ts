/**
 * What every command shares: configuration (flags first, then DATABASE_URL and
 * SKIPQ_SCHEMA, then defaults), a short-lived `Skipq` client with a small pool,
 * and output helpers (tables for people, stable JSON for scripts; both show
 * database text through terminal.ts, never raw).
 * Invariant: a command that reads or changes jobs checks the schema's migration
 * version first, so an unmigrated schema gets "run skipq migrate", never a
 * half-done write. It never migrates on its own (only `migrate` and `demo` do).
 */
import Table from "cli-table3";
import type { Command } from "commander";
import { silentLogger } from "../core/logger.js";
import { assertSchema } from "../core/validate.js";
import { assertSchemaCurrent, currentVersion } from "../db/migrate.js";
import { Admin } from "../ops/admin.js";
import { displayJson } from "../ops/display.js";
import { timestampText } from "../ops/timestamp.js";
import { Skipq } from "../skipq.js";
import { CliError, describeError, EXIT_FAILURE } from "./errors.js";
import { terminalJson, terminalText } from "./terminal.js";

export interface GlobalOptions {
  databaseUrl?: string;
  readDatabaseUrl?: string;
  schema?: string;
}

export interface CliConfig {
  /** From --database-url, else DATABASE_URL; undefined when neither is set. */
  connectionString: string | undefined;
  /** From --read-database-url, else SKIPQ_READ_DATABASE_URL: where reads may go (a standby); undefined: nowhere else. */
  readConnectionString?: string | undefined;
  /** From --schema, else SKIPQ_SCHEMA, else "skipq". */
  schema: string;
}

/** Resolves configuration for a command: its flags (and the program's), then the environment. */
export function resolveConfig(command: Command): CliConfig {
  const options = command.optsWithGlobals<GlobalOptions>();
  const connectionString = nonEmpty(options.databaseUrl) ?? nonEmpty(process.env.DATABASE_URL);
  const schemaText = nonEmpty(options.schema) ?? nonEmpty(process.env.SKIPQ_SCHEMA) ?? "skipq";
  try {
    assertSchema(schemaText);
  } catch (error) {
    throw new CliError(`${(error as Error).message} (from ${options.schema ? "--schema" : "SKIPQ_SCHEMA"})`);
  }
  const readConnectionString = nonEmpty(options.readDatabaseUrl) ?? nonEmpty(process.env.SKIPQ_READ_DATABASE_URL);
  return { connectionString, schema: schemaText, ...(readConnectionString ? { readConnectionString } : {}) };
}

function nonEmpty(value: string | undefined): string | undefined {
  return value === undefined || value.trim() === "" ? undefined : value.trim();
}

/** The connection string, or a clear error when none is configured. */
export function requireDatabase(config: CliConfig): string {
  if (config.connectionString) {
    // node-postgres also takes socket paths; anything else is a typo worth naming before connecting.
    if (!/^(postgres(ql)?:\/\/|socket:|\/)/.test(config.connectionString)) {
      throw new CliError(
        `the database URL ${JSON.stringify(config.connectionString)} is not a PostgreSQL connection string: use postgres://user:password@host:5432/database`,
      );
    }
    return config.connectionString;
  }
  throw new CliError(
    "no database configured: pass --database-url postgres://user@host:5432/db or set DATABASE_URL (or run `skipq demo`, which needs none)",
  );
}

export interface Session {
  skipq: Skipq;
  admin: Admin;
  config: CliConfig;
}

/**
 * Runs `body` with a client on the configured database and closes it after.
 * Errors come back as one-line `CliError`s that name the server or schema.
 */
export async function withSession<T>(
  command: Command,
  body: (session: Session) => Promise<T>,
  options: { checkSchema?: boolean; poolSize?: number } = {},
): Promise<T> {
  const config = resolveConfig(command);
  const connectionString = requireDatabase(config);
  const skipq = new Skipq({
    connectionString,
    ...(config.readConnectionString ? { readConnectionString: config.readConnectionString } : {}),
    schema: config.schema,
    poolSize: options.poolSize ?? 2,
    logger: silentLogger,
  });
  try {
    if (options.checkSchema ?? true) await checkSchema(skipq);
    return await body({ skipq, admin: new Admin(skipq), config });
  } catch (error) {
    throw asCliError(error, config);
  } finally {
    await skipq.close().catch(() => undefined);
  }
}

/** Refuses a schema that is missing or not at this code's migration version. */
export async function checkSchema(skipq: Skipq): Promise<void> {
  if ((await currentVersion(skipq.pool, skipq.schema)) === 0) {
    throw new CliError(
      `schema "${skipq.schema}" has no skipq tables: run \`skipq migrate\` first, or pass the schema you migrated with --schema or SKIPQ_SCHEMA`,
      EXIT_FAILURE,
    );
  }
  await assertSchemaCurrent(skipq.pool, skipq.schema);
}

/** Any error as a `CliError` whose message names the configured server and schema. */
export function asCliError(error: unknown, config: CliConfig): CliError {
  if (error instanceof CliError) return error;
  const described = describeError(error, config);
  return new CliError(described.message, described.exitCode);
}

/**
 * Prints a value as indented JSON on stdout (the stable `--json` format): of any depth (levels past
 * MAX_DISPLAY_DEPTH become a marker string), and with no raw control character, so always valid JSON.
 */
export function printJson(value: unknown): void {
  process.stdout.write(`${terminalJson(displayJson(value, { indent: 2 }))}\n`);
}

/**
 * A plain table (no colours, so it reads the same in a terminal, a pipe or a log). Every cell is shown with
 * its control characters, newlines included, as escapes: a cell stays one line and cannot move the cursor;
 * a cell longer than MAX_CELL_CHARS is cut (a 120 KB key took cli-table3 minutes to lay out).
 */
export function table(head: string[], rows: Array<Array<string | number>>, align?: Array<"left" | "right">): string {
  const t = new Table({
    head,
    style: { head: [], border: [], compact: true },
    ...(align ? { colAligns: align } : {}),
  });
  for (const row of rows) t.push(row.map((cell) => terminalText(shortCell(String(cell)), { newlines: false })));
  return t.toString();
}

/** Longest cell text a table lays out: cli-table3's width code is quadratic on long cells of wide characters. */
const MAX_CELL_CHARS = 500;

/** A cell cut to MAX_CELL_CHARS (never inside a surrogate pair), saying how much is left out. */
function shortCell(text: string): string {
  if (text.length <= MAX_CELL_CHARS) return text;
  const end = /[\uD800-\uDBFF]/.test(text[MAX_CELL_CHARS - 1] as string) ? MAX_CELL_CHARS - 1 : MAX_CELL_CHARS;
  return `${text.slice(0, end)}… (${text.length - end} more characters; --json has all)`;
}

/** "12s", "4m 10s", "3h 2m", "5d 1h": a readable age from seconds. */
export function formatAge(seconds: number | null): string {
  if (seconds === null) return "-";
  const s = Math.max(0, Math.round(seconds));
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86_400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86_400)}d ${Math.floor((s % 86_400) / 3600)}h`;
}

/** A database timestamp as ISO 8601 (UTC), "infinity", "-infinity" or "after +275760-…" (never throws), or null. */
export function iso(value: Date | number | string | null | undefined): string | null {
  return timestampText(value);
}

/** The first line of an error text, shortened for a table cell. */
export function firstLine(text: string | null, max = 60): string {
  if (!text) return "";
  const line = text.split("\n")[0] ?? "";
  return line.length > max ? `${line.slice(0, max - 1)}…` : line;
}

/** How a user runs this binary, for "try next" hints: `skipq` when installed, else the path used. */
export function selfCommand(): string {
  const script = process.argv[1] ?? "";
  if (script.includes("node_modules") || !script.endsWith(".js")) return "npx skipq";
  const relative = script.startsWith(process.cwd()) ? script.slice(process.cwd().length + 1) : script;
  return `node ${relative}`;
}
