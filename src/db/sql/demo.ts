/**
 * Statements only `skipq demo` runs: reading the database clock, owning its
 * schema (marked with a comment so a rerun may drop it and nothing else), and
 * the summary read back at the end. None is on the claim path.
 */

export function demoStatements(schema: string, mark: string) {
  return {
    /** clock_timestamp(), not now(): now() is frozen at the start of the transaction. */
    clockRead: "SELECT extract(epoch FROM clock_timestamp())::float8 * 1000 AS now",
    /** The schema's comment, if the schema exists ($1: its unquoted name). */
    schemaMarkRead: "SELECT obj_description(oid, 'pg_namespace') AS comment FROM pg_namespace WHERE nspname = $1",
    /** Only ever run after schemaMarkRead returned the demo's mark. */
    schemaDrop: `DROP SCHEMA ${schema} CASCADE`,
    /** COMMENT takes no bind parameters; the mark is a constant, quoted here. */
    schemaMark: `COMMENT ON SCHEMA ${schema} IS '${mark.replaceAll("'", "''")}'`,
    summaryByQueue: `SELECT queue, status, count(*)::int AS jobs, sum(attempts)::int AS attempts
                       FROM ${schema}.all_jobs GROUP BY queue, status ORDER BY queue, status`,
  } as const;
}
