/**
 * Statements the migrator runs around each numbered migration file.
 * The advisory lock key is derived from the schema name, so two skipq schemas
 * in one database migrate independently.
 */

import type { Schema } from "../schema.js";
import { statements } from "../statements.js";

export function migrationStatements(names: Schema) {
  const schema = names.sql;
  return statements(
    names,
    { prepare: false },
    {
      migrationLock: "SELECT pg_advisory_xact_lock(hashtext('skipq.migrate'), hashtext($1))",
      schemaCreate: `CREATE SCHEMA IF NOT EXISTS ${schema}`,
      migrationTableCreate: `CREATE TABLE IF NOT EXISTS ${schema}.migrations (
      version    integer PRIMARY KEY,
      name       text NOT NULL,
      breaking   boolean NOT NULL DEFAULT false,
      applied_at timestamptz NOT NULL DEFAULT now())`,
      /** Whether the migrations table exists yet. */
      migrationTableExists: "SELECT to_regclass($1) IS NOT NULL AS exists",
      migrationVersions: `SELECT version FROM ${schema}.migrations ORDER BY version`,
      migrationCurrent: `SELECT COALESCE(max(version), 0) AS version FROM ${schema}.migrations`,
      migrationRecord: `INSERT INTO ${schema}.migrations (version, name, breaking) VALUES ($1, $2, $3)`,
      searchPathSet: `SET LOCAL search_path TO ${schema}, pg_catalog`,
    },
  );
}
