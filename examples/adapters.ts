/**
 * Transactional enqueue from the drivers people use: each adapter turns the
 * driver's transaction into a skipq Queryable, so the job commits or rolls
 * back with your data. (Prisma: see examples/prisma.ts.)
 * Run: DATABASE_URL=postgres://… node --import tsx examples/adapters.ts
 */
import { sql as drizzleSql } from "drizzle-orm";
import { drizzle } from "drizzle-orm/node-postgres";
import knexFactory from "knex";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import postgres from "postgres";
import { drizzleQueryable, knexQueryable, kyselyQueryable, postgresJsQueryable, Skipq } from "skipq";

const url = process.env.DATABASE_URL as string;
const skipq = new Skipq({ connectionString: url, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

// postgres.js
const sql = postgres(url);
await sql.begin(async (tx) => {
  await skipq.enqueueTx(postgresJsQueryable(tx), "welcome", { via: "postgres.js" });
});

// Kysely
const db = new Kysely<unknown>({ dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: url }) }) });
await db.transaction().execute(async (trx) => {
  await skipq.enqueueTx(kyselyQueryable(trx), "welcome", { via: "kysely" });
});

// Drizzle (pass Drizzle's own `sql` tag)
const drizzlePool = new pg.Pool({ connectionString: url });
await drizzle(drizzlePool).transaction(async (tx) => {
  await skipq.enqueueTx(drizzleQueryable(tx, drizzleSql), "welcome", { via: "drizzle" });
});

// Knex
const knex = knexFactory({ client: "pg", connection: url });
await knex.transaction(async (trx) => {
  await skipq.enqueueTx(knexQueryable(trx), "welcome", { via: "knex" });
});

// A rolled-back transaction leaves no job.
await sql
  .begin(async (tx) => {
    await skipq.enqueueTx(postgresJsQueryable(tx), "welcome", { via: "rolled back" });
    throw new Error("roll back");
  })
  .catch(() => undefined);

const { rows } = await skipq.pool.query(
  `SELECT payload->>'via' AS via FROM ${skipq.schemaSql}.jobs WHERE kind = 'welcome' ORDER BY id`,
);
console.log(`enqueued via: ${rows.map((r) => r.via).join(", ")}`);
await Promise.all([sql.end(), db.destroy(), drizzlePool.end(), knex.destroy(), skipq.close()]);
