import { PrismaPg } from "@prisma/adapter-pg";
import { sql as drizzleSql } from "drizzle-orm";
import { drizzle as drizzleNodePg } from "drizzle-orm/node-postgres";
import { drizzle as drizzlePostgresJs } from "drizzle-orm/postgres-js";
import knexFactory from "knex";
import { Kysely, PostgresDialect } from "kysely";
import pg from "pg";
import postgres from "postgres";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import {
  drizzleQueryable,
  knexQueryable,
  kyselyQueryable,
  Outbox,
  type PrismaLike,
  postgresJsQueryable,
  prismaQueryable,
  type Queryable,
} from "../../src/index.js";
import { DATABASE_URL, useTestQueue } from "../helpers.js";
import { generatePrismaClient } from "../prismaClient.js";

class Rollback extends Error {}

/** One driver: run `body` in its own transaction, committing, or rolling back when body throws. */
interface Driver {
  name: string;
  inTransaction(body: (q: Queryable) => Promise<void>): Promise<void>;
  close(): Promise<void>;
}

async function drivers(): Promise<Driver[]> {
  const sqlJs = postgres(DATABASE_URL, { max: 2, onnotice: () => undefined });
  const kysely = new Kysely<unknown>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: DATABASE_URL, max: 2 }) }),
  });
  const drizzlePool = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });
  const drizzlePg = drizzleNodePg(drizzlePool);
  const drizzleJsClient = postgres(DATABASE_URL, { max: 2, onnotice: () => undefined });
  const drizzleJs = drizzlePostgresJs(drizzleJsClient);
  const knex = knexFactory({ client: "pg", connection: DATABASE_URL, pool: { min: 0, max: 2 } });

  const generated = await generatePrismaClient("adapters");
  const { PrismaClient } = (await import(generated)) as {
    PrismaClient: new (options: {
      adapter: unknown;
    }) => PrismaLike & {
      $transaction<T>(body: (tx: PrismaLike) => Promise<T>): Promise<T>;
      $disconnect(): Promise<void>;
    };
  };
  const prisma = new PrismaClient({ adapter: new PrismaPg({ connectionString: DATABASE_URL }) });

  const swallow = async (work: Promise<unknown>) => {
    await work.catch((error) => {
      if (!(error instanceof Rollback)) throw error;
    });
  };
  return [
    {
      name: "postgres.js",
      inTransaction: (body) => swallow(sqlJs.begin((tx) => body(postgresJsQueryable(tx)))),
      close: () => sqlJs.end(),
    },
    {
      name: "Kysely",
      inTransaction: (body) => swallow(kysely.transaction().execute((trx) => body(kyselyQueryable(trx)))),
      close: () => kysely.destroy(),
    },
    {
      name: "Drizzle (node-postgres)",
      inTransaction: (body) => swallow(drizzlePg.transaction((tx) => body(drizzleQueryable(tx, drizzleSql)))),
      close: () => drizzlePool.end(),
    },
    {
      name: "Drizzle (postgres.js)",
      inTransaction: (body) => swallow(drizzleJs.transaction((tx) => body(drizzleQueryable(tx, drizzleSql)))),
      close: () => drizzleJsClient.end(),
    },
    {
      name: "Knex",
      inTransaction: (body) => swallow(knex.transaction((trx) => body(knexQueryable(trx)))),
      close: () => knex.destroy(),
    },
    {
      name: "Prisma",
      inTransaction: (body) => swallow(prisma.$transaction((tx) => body(prismaQueryable(tx)))),
      close: () => prisma.$disconnect(),
    },
  ];
}

const t = useTestQueue("adapters");
let all: Driver[];
let outbox: Outbox;
beforeAll(async () => {
  outbox = new Outbox(t.skipq);
  await t.db.query(`CREATE TABLE "${t.schema}".orders (id text PRIMARY KEY)`);
  all = await drivers();
}, 120_000);
afterAll(async () => {
  await Promise.all(all.map((d) => d.close()));
});

async function counts(tag: string) {
  const { rows } = await t.db.query(
    `SELECT (SELECT count(*)::int FROM "${t.schema}".orders WHERE id LIKE $1) AS orders,
            (SELECT count(*)::int FROM "${t.schema}".all_jobs WHERE payload->>'tag' = $2) AS jobs,
            (SELECT count(*)::int FROM "${t.schema}".all_jobs WHERE payload->>'tag' = $2 AND jsonb_typeof(payload) = 'object') AS object_payloads,
            (SELECT count(*)::int FROM "${t.schema}".outbox WHERE event->>'tag' = $2) AS events`,
    [`${tag}%`, tag],
  );
  return rows[0];
}

describe.each(["postgres.js", "Kysely", "Drizzle (node-postgres)", "Drizzle (postgres.js)", "Knex", "Prisma"])(
  "the %s adapter",
  (name) => {
    const driver = () => all.find((d) => d.name === name) as Driver;
    const tag = name.replace(/\W+/g, "_");
    const write = async (q: Queryable, suffix: string) => {
      await q.query({ text: `INSERT INTO "${t.schema}".orders (id) VALUES ($1)`, values: [`${tag}${suffix}`] });
      const one = await t.skipq.enqueueTx(
        q,
        "order.placed",
        { tag: `${tag}${suffix}` },
        { idempotencyKey: `${tag}${suffix}` },
      );
      expect(one).toEqual({ id: expect.stringMatching(/^\d+$/), created: true });
      const again = await t.skipq.enqueueTx(
        q,
        "order.placed",
        { tag: `${tag}${suffix}` },
        { idempotencyKey: `${tag}${suffix}` },
      );
      expect(again).toEqual({ id: one.id, created: false });
      const many = await t.skipq.enqueueManyTx(q, [
        { job: "order.email", payload: { tag: `${tag}${suffix}` } },
        { job: "order.email", payload: { tag: `${tag}${suffix}` }, queue: "mail" },
      ]);
      expect(many).toHaveLength(2);
      await outbox.publish(q, "orders.placed", `${tag}${suffix}`, { tag: `${tag}${suffix}` });
    };

    test("jobs and outbox events written in a committed transaction exist with the business row", async () => {
      await driver().inTransaction((q) => write(q, "-commit"));
      expect(await counts(`${tag}-commit`)).toEqual({ orders: 1, jobs: 3, object_payloads: 3, events: 1 });
    });

    test("jobs and outbox events written in a rolled-back transaction leave nothing", async () => {
      await driver().inTransaction(async (q) => {
        await write(q, "-rollback");
        throw new Rollback("roll back on purpose");
      });
      expect(await counts(`${tag}-rollback`)).toEqual({ orders: 0, jobs: 0, object_payloads: 0, events: 0 });
    });
  },
);

describe.each(["postgres.js", "Kysely", "Drizzle (node-postgres)", "Drizzle (postgres.js)", "Knex", "Prisma"])(
  "ctx.completeTx through the %s adapter",
  (name) => {
    const driver = () => all.find((d) => d.name === name) as Driver;
    const tag = `tx_${name.replace(/\W+/g, "_")}`;
    const queue = tag.toLowerCase();

    /** One job run by a worker whose handler completes it in the driver's transaction, then returns "returned". */
    async function run(rollback: boolean) {
      const w = t.skipq
        .worker({ queues: [queue], maintenance: false, listen: false })
        .register("order", async (_p, ctx) => {
          await driver().inTransaction(async (q) => {
            await q.query({ text: `INSERT INTO "${t.schema}".orders (id) VALUES ($1)`, values: [`${tag}-${ctx.id}`] });
            await ctx.completeTx(q, { via: name });
            if (rollback) throw new Rollback("roll back on purpose");
          });
          return "returned";
        });
      const { id } = await t.skipq.enqueue("order", {}, { queue });
      expect(await w.runOnce()).toBe(1);
      await w.stop();
      const { rows } = await t.db.query(
        `SELECT status, result, (SELECT count(*)::int FROM "${t.schema}".orders WHERE id = $2) AS orders
           FROM "${t.schema}".all_jobs WHERE id = $1`,
        [id, `${tag}-${id}`],
      );
      return { ...rows[0], stale: w.stats.staleOutcomes };
    }

    test("a committed transaction completes the job with its result, and the worker writes nothing more", async () => {
      expect(await run(false)).toEqual({ status: "completed", result: { via: name }, orders: 1, stale: 0 });
    });

    test("a rolled-back transaction records nothing, and the handler's own outcome completes the job", async () => {
      expect(await run(true)).toEqual({ status: "completed", result: "returned", orders: 0, stale: 0 });
    });
  },
);
