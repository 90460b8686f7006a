/**
 * Migrations: exactly-once under concurrency, refusal of a newer schema,
 * schema-name validation, and fresh install == step-by-step upgrade.
 */
import pg from "pg";
import { afterAll, expect, test } from "vitest";
import { loadMigrations, migrate } from "../../src/db/migrate.js";
import { latestVersion, SchemaTooNewError, Skipq, silentLogger, ValidationError } from "../../src/index.js";
import { DATABASE_URL, schemaName } from "../helpers.js";

const db = new pg.Pool({ connectionString: DATABASE_URL, max: 30 });
const schemas: string[] = [];
afterAll(async () => {
  for (const s of schemas) await db.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await db.end();
});

function fresh(label: string): string {
  const s = schemaName(label);
  schemas.push(s);
  return s;
}

/** Dated history partitions (job_history_completed_p20261201t0000): counted per parent, not described. */
const DATED = "_p[0-9]{8}t[0-9]{4}$";

/**
 * A normalised description of every table, column, index, constraint, function (its whole definition, rights
 * and settings) and trigger in a schema. The dated history partitions a migration makes are named by the day
 * it ran: they are counted per parent instead.
 */
async function catalog(schema: string): Promise<string[]> {
  const { rows } = await db.query(
    `SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type || ' ' || is_nullable || ' ' || COALESCE(column_default, '') AS d
       FROM information_schema.columns WHERE table_schema = $1 AND table_name !~ $2
     UNION ALL
     SELECT 'index ' || tablename || ' ' || replace(indexdef, quote_ident($1) || '.', '') FROM pg_indexes
      WHERE schemaname = $1 AND tablename !~ $2
     UNION ALL
     SELECT 'constraint ' || conrelid::regclass::text || ' ' || pg_get_constraintdef(c.oid)
       FROM pg_constraint c JOIN pg_namespace n ON n.oid = c.connamespace
      WHERE n.nspname = $1 AND c.contype <> 'n' -- PostgreSQL 18 lists NOT NULL here too; columns cover it
        AND conrelid::regclass::text !~ $2
     UNION ALL
     SELECT 'reloptions ' || relname || ' ' || COALESCE(array_to_string(reloptions, ','), '')
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND relkind = 'r' AND relname !~ $2
     UNION ALL
     SELECT 'partitions ' || parent || ' ' || count(*) FROM (
       SELECT regexp_replace(relname, $2, '') AS parent
         FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1 AND relname ~ $2 AND relkind = 'r') d
      GROUP BY parent
     UNION ALL
     SELECT 'function ' || p.oid::regprocedure::text
            || CASE WHEN p.prosecdef THEN ' SECURITY DEFINER' ELSE '' END
            || ' executable by ' || COALESCE((SELECT string_agg(CASE WHEN a.grantee = 0 THEN 'PUBLIC' WHEN a.grantee = p.proowner THEN 'owner' ELSE a.grantee::regrole::text END, ', ' ORDER BY 1)
                                                FROM aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a
                                               WHERE a.privilege_type = 'EXECUTE'), 'nobody')
            || E'\n' || pg_get_functiondef(p.oid)
       FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE n.nspname = $1
     UNION ALL
     SELECT 'trigger ' || pg_get_triggerdef(t.oid)
       FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND NOT t.tgisinternal
     ORDER BY 1`,
    [schema, DATED],
  );
  return rows.map((r) =>
    String(r.d).replaceAll(`"${schema}".`, "").replaceAll(`${schema}.`, "").replaceAll(schema, "<schema>"),
  );
}

test("ten concurrent migrators apply each version exactly once", async () => {
  const schema = fresh("concurrent");
  const pools = Array.from({ length: 10 }, () => new pg.Pool({ connectionString: DATABASE_URL, max: 1 }));
  const results = await Promise.all(pools.map((p) => migrate(p, schema)));
  await Promise.all(pools.map((p) => p.end()));
  const applied = results.flatMap((r) => r.applied).sort((a, b) => a - b);
  expect(applied).toEqual(loadMigrations().map((m) => m.version));
  const { rows } = await db.query(`SELECT version, count(*)::int AS n FROM "${schema}".migrations GROUP BY version`);
  expect(rows.every((r) => r.n === 1)).toBe(true);
  expect(rows).toHaveLength(loadMigrations().length);
  for (const r of results) expect(r.to).toBe(latestVersion());
});

test("a fresh install equals the step-by-step upgrade", async () => {
  const whole = fresh("whole");
  const steps = fresh("steps");
  await migrate(db, whole);
  for (const m of loadMigrations()) {
    const r = await migrate(db, steps, m.version);
    expect(r.to).toBe(m.version);
  }
  expect(await catalog(steps)).toEqual(await catalog(whole));
});

test("the schema matches the committed snapshot", async () => {
  const schema = fresh("snapshot");
  await migrate(db, schema);
  await expect(`${(await catalog(schema)).join("\n")}\n`).toMatchFileSnapshot("./__snapshots__/schema.txt");
});

test("a database migrated by a newer skipq is refused with a clear message", async () => {
  const schema = fresh("newer");
  await migrate(db, schema);
  await db.query(`INSERT INTO "${schema}".migrations (version, name) VALUES (9999, '9999_from_the_future')`);
  const error = await migrate(db, schema).catch((e) => e);
  expect(error).toBeInstanceOf(SchemaTooNewError);
  expect(error.message).toMatch(/upgrade skipq/);
  const skipq = new Skipq({ connectionString: DATABASE_URL, schema, logger: silentLogger });
  const worker = skipq.worker();
  await expect(worker.start()).rejects.toBeInstanceOf(SchemaTooNewError);
  await worker.stop();
  await skipq.close();
});

test("a worker refuses to start on a schema that was never migrated", async () => {
  const skipq = new Skipq({ connectionString: DATABASE_URL, schema: fresh("unmigrated"), logger: silentLogger });
  const worker = skipq.worker();
  await expect(worker.start()).rejects.toMatchObject({ code: "SKIPQ_SCHEMA_NOT_MIGRATED" });
  await worker.stop();
  await skipq.close();
});

test.each(['x"; DROP TABLE jobs; --', "Upper", "", "a".repeat(51), "with space", "1starts_with_digit"])(
  "schema name %j is rejected before any SQL",
  (name) => {
    expect(() => new Skipq({ connectionString: DATABASE_URL, schema: name })).toThrow(ValidationError);
  },
);
