/**
 * Test helpers: every test file gets its own schema (named after it, random
 * suffix) in the database at DATABASE_URL, migrated, and dropped afterwards.
 * Waiting is done by polling a condition, never by fixed sleeps.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import pg from "pg";
import { Skipq, type SkipqOptions, silentLogger } from "../src/index.js";

export { until } from "./until.js";

export const DATABASE_URL = process.env.DATABASE_URL ?? "";
if (!DATABASE_URL)
  throw new Error("DATABASE_URL is not set: run tests with `npm test`, which starts PostgreSQL when needed");

export function schemaName(label: string): string {
  return `t_${label
    .toLowerCase()
    .replace(/[^a-z0-9]+/g, "_")
    .slice(0, 30)}_${Math.random().toString(36).slice(2, 8)}`;
}

export interface TestQueue {
  skipq: Skipq;
  schema: string;
  /** A direct pool for assertions and setup SQL. */
  db: pg.Pool;
  /** Drops the schema and closes every pool. */
  cleanup(): Promise<void>;
}

export async function testQueue(label: string, options: SkipqOptions = {}): Promise<TestQueue> {
  const schema = options.schema ?? schemaName(label);
  const skipq = new Skipq({ connectionString: DATABASE_URL, logger: silentLogger, ...options, schema });
  await skipq.migrate();
  const db = new pg.Pool({ connectionString: DATABASE_URL, max: 20 });
  db.on("error", () => undefined);
  return {
    skipq,
    schema,
    db,
    async cleanup() {
      await skipq.close();
      await db.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await db.end();
    },
  };
}

export async function statusCounts(t: TestQueue): Promise<Record<string, number>> {
  const { rows } = await t.db.query(`SELECT status, count(*)::int AS n FROM "${t.schema}".jobs GROUP BY status`);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

const exampleSchemas: string[] = [];

/**
 * Runs an example file (`node --import tsx file`) in a fresh schema given as
 * SKIPQ_SCHEMA; resolves with its stdout, rejects on a non-zero exit.
 */
export async function runExample(file: string, env: Record<string, string> = {}): Promise<string> {
  const schema = schemaName(file.replace(/\W/g, "_").slice(-20));
  exampleSchemas.push(schema);
  const { stdout } = await promisify(execFile)(process.execPath, ["--import", "tsx", file], {
    env: { ...process.env, SKIPQ_SCHEMA: schema, ...env },
    timeout: 60_000,
  });
  return stdout;
}

/** Drops the schemas runExample created (call from afterAll). */
export async function dropExampleSchemas(): Promise<void> {
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  for (const s of exampleSchemas.splice(0)) await db.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
  await db.end();
}
