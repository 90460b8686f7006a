/**
 * Versioned migrations from the numbered `.sql` files in `migrations/`.
 *
 * Each version runs in its own transaction together with its version row,
 * after `pg_advisory_xact_lock` and a re-read of the applied versions, so any
 * number of processes migrating at once apply each version exactly once.
 * Versions increase but may have gaps; any version not yet recorded is applied
 * in order, so branches that add migrations merge in any order.
 * Failures are classified by SQLSTATE, never by message text. A database
 * newer than this code is refused, never downgraded.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import type pg from "pg";
import { MigrationError, SchemaNotMigratedError, SchemaTooNewError } from "../core/errors.js";
import { catalogue } from "./catalogue.js";
import { Schema } from "./schema.js";

export interface Migration {
  version: number;
  name: string;
  /** A breaking migration needs every worker upgraded first; marked by `-- skipq:breaking` in the file. */
  breaking: boolean;
  sql: string;
}

function migrationsDir(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 5; i++) {
    const candidate = path.join(dir, "migrations");
    if (existsSync(path.join(candidate, "0001_init.sql"))) return candidate;
    dir = path.dirname(dir);
  }
  throw new Error("skipq: cannot find its migrations/ folder next to the package; reinstall skipq");
}

let cached: Migration[] | undefined;

/** All migrations shipped with this version of skipq, in order. */
export function loadMigrations(): Migration[] {
  if (cached) return cached;
  const dir = migrationsDir();
  const files = readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort();
  cached = files.map((file, index) => {
    const version = Number(file.slice(0, 4));
    const previous = index === 0 ? 0 : Number(files[index - 1]?.slice(0, 4));
    if (version <= previous) throw new Error(`skipq: migration ${file} repeats version ${version}`);
    const sql = readFileSync(path.join(dir, file), "utf8");
    return { version, name: file.replace(/\.sql$/, ""), breaking: /^--\s*skipq:breaking/m.test(sql), sql };
  });
  return cached;
}

export function latestVersion(): number {
  return loadMigrations().at(-1)?.version ?? 0;
}

/** SQLSTATEs of a statement naming a table (42P01) or a schema (3F000, e.g. COPY) that does not exist. */
const MISSING = new Set(["42P01", "3F000"]);

/**
 * What to throw for `error` from one of skipq's statements on a schema: SchemaNotMigratedError when
 * PostgreSQL says a table or the schema is missing (it was never migrated, or is not the one that was),
 * else `error` itself. By SQLSTATE alone: skipq's statements name only its own schema's tables.
 */
export function notMigrated(error: unknown, schema: string): unknown {
  if (!MISSING.has((error as { code?: string } | null)?.code ?? "")) return error;
  return new SchemaNotMigratedError(null, latestVersion(), schema, error);
}

/** SQLSTATEs worth a retry of the whole version: serialization failure, deadlock. */
const RETRYABLE = new Set(["40001", "40P01"]);

const HINTS: Record<string, string> = {
  "42501":
    "the database user lacks privileges: run migrations as the schema owner (workers can run with DML-only rights)",
  "3D000": "the database does not exist: create it or fix DATABASE_URL",
  "57014": "the migration was cancelled by statement_timeout: raise it for the migrating session",
  "25006": "the server is read-only (a replica or in recovery): point DATABASE_URL at the primary",
  "53300": "the server has no free connections: lower pool sizes or raise max_connections",
};

export interface MigrateResult {
  from: number;
  to: number;
  applied: number[];
}

/**
 * Brings `schema` (unquoted, already validated) up to the latest version.
 * Safe to call from many processes at once.
 */
export async function migrate(pool: pg.Pool, schema: string, upTo = latestVersion()): Promise<MigrateResult> {
  const sql = catalogue(new Schema(schema)).migrations;
  const migrations = loadMigrations().filter((m) => m.version <= upTo);
  const applied: number[] = [];
  const client = await pool.connect();
  let from = -1;
  try {
    await inTransaction(client, 0, async () => {
      await client.query(sql.migrationLock.text, [schema]);
      await client.query(sql.schemaCreate.text);
      await client.query(sql.migrationTableCreate.text);
    });
    for (const migration of migrations) {
      for (let attempt = 1; ; attempt++) {
        try {
          await inTransaction(client, migration.version, async () => {
            await client.query(sql.migrationLock.text, [schema]);
            // Re-read under the lock: another process may have applied it meanwhile.
            const done = await appliedVersions(client, schema);
            if (from < 0) from = Math.max(0, ...done);
            assertKnown(done, schema);
            if (done.includes(migration.version)) return;
            await client.query(sql.searchPathSet.text);
            await client.query(migration.sql);
            await client.query(sql.migrationRecord.text, [migration.version, migration.name, migration.breaking]);
            applied.push(migration.version);
          });
          break;
        } catch (error) {
          const state = (error as { code?: string }).code;
          if (state && RETRYABLE.has(state) && attempt < 5) continue;
          throw error;
        }
      }
    }
    const done = await appliedVersions(client, schema);
    assertKnown(done, schema);
    const to = Math.max(0, ...done);
    if (from < 0) from = to;
    return { from, to, applied };
  } finally {
    client.release();
  }
}

async function inTransaction(client: pg.PoolClient, version: number, body: () => Promise<void>): Promise<void> {
  await client.query("BEGIN");
  try {
    await body();
    await client.query("COMMIT");
  } catch (error) {
    await client.query("ROLLBACK").catch(() => undefined);
    if (error instanceof SchemaTooNewError || error instanceof MigrationError) throw error;
    const state = (error as { code?: string }).code;
    if (state && RETRYABLE.has(state)) throw error;
    const hint = (state && HINTS[state]) ?? "see the cause for the database's message";
    throw new MigrationError(
      version,
      state,
      `skipq migration ${version || "setup"} failed${state ? ` (SQLSTATE ${state})` : ""}: ${(error as Error).message}; ${hint}`,
      error,
    );
  }
}

/** The schema's migration version; 0 when skipq was never installed there. */
export async function currentVersion(client: pg.ClientBase | pg.Pool, schema: string): Promise<number> {
  const names = new Schema(schema);
  const sql = catalogue(names).migrations;
  const exists = await client.query<{ exists: boolean }>(sql.migrationTableExists.text, [names.table("migrations")]);
  if (!exists.rows[0]?.exists) return 0;
  const { rows } = await client.query<{ version: number }>(sql.migrationCurrent.text);
  return rows[0]?.version ?? 0;
}

/** Every version recorded in the schema's migrations table (empty before the first migration). */
async function appliedVersions(client: pg.ClientBase, schema: string): Promise<number[]> {
  const { rows } = await client.query<{ version: number }>(
    catalogue(new Schema(schema)).migrations.migrationVersions.text,
  );
  return rows.map((r) => r.version);
}

/** Refuses a schema that holds a migration this code does not know (a newer skipq migrated it). */
function assertKnown(done: number[], schema: string): void {
  const known = new Set(loadMigrations().map((m) => m.version));
  const unknown = done.filter((v) => !known.has(v));
  if (unknown.length > 0) throw new SchemaTooNewError(Math.max(...unknown), latestVersion(), schema);
}

/** Throws unless the schema holds exactly the migrations this code ships. */
export async function assertSchemaCurrent(pool: pg.Pool, schema: string): Promise<void> {
  const version = await currentVersion(pool, schema);
  const latest = latestVersion();
  if (version > latest) throw new SchemaTooNewError(version, latest, schema);
  if (version < latest) throw new SchemaNotMigratedError(version, latest, schema);
  const client = await pool.connect();
  try {
    const done = new Set(await appliedVersions(client, schema));
    const missing = loadMigrations().find((m) => !done.has(m.version));
    if (missing) throw new SchemaNotMigratedError(missing.version - 1, latest, schema);
  } finally {
    client.release();
  }
}
