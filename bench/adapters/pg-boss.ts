/**
 * pg-boss 10's bench adapter, at its documented fastest: batch fetch. A
 * pg-boss 10 work() loop waits its polling interval after every fetch (it
 * has no LISTEN), so its rate is loops × batchSize / interval: we run one
 * work() loop per unit of concurrency, each with batchSize 100 (completed in
 * one statement per batch) and the shortest interval it accepts (0.5 s), and
 * `insert()` for bulk. Workers run their own instance with
 * maintenance (supervise/schedule) off; the producer instance keeps it on.
 */
import pg from "pg";
import PgBoss from "pg-boss";
import { type AdapterFactory, type SystemAdapter, timedPool } from "../lib.js";

const QUEUE = "noop";

export const create: AdapterFactory = (env, tag): SystemAdapter => {
  const schema = `bench_pgboss_${tag}`;
  const admin = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  admin.on("error", () => undefined);
  const boss = new PgBoss({ connectionString: env.databaseUrl, schema, max: 10 });
  boss.on("error", () => undefined);
  let started = false;
  const producer = async () => {
    if (!started) {
      await boss.start();
      started = true;
    }
    return boss;
  };
  return {
    name: "pg-boss",
    settings:
      "one work() loop per unit of concurrency, each batchSize 100, pollingIntervalSeconds 0.5 (its minimum; it has no LISTEN and waits the interval after every fetch), insert() for bulk",
    async setup() {
      const b = await producer();
      if (!(await b.getQueue(QUEUE))) await b.createQueue(QUEUE);
      return null;
    },
    async reset() {
      await admin.query(`TRUNCATE "${schema}".job`);
    },
    async enqueueBulk(payloads) {
      await (await producer()).insert(payloads.map((data) => ({ name: QUEUE, data })));
    },
    async analyze() {
      await admin.query(`VACUUM ANALYZE "${schema}".job`);
    },
    async enqueueOne(payload) {
      await (await producer()).send(QUEUE, payload);
    },
    async startWorker({ concurrency, onJob, onClaim, single }) {
      const pool = onClaim
        ? timedPool(env.databaseUrl, Math.min(20, concurrency + 2), /SKIP LOCKED/, onClaim)
        : undefined;
      const worker = new PgBoss({
        ...(pool
          ? { db: { executeSql: (text: string, values: unknown[]) => pool.query(text, values) } }
          : { connectionString: env.databaseUrl, max: Math.min(20, concurrency + 2) }),
        schema,
        supervise: false,
        schedule: false,
        migrate: false,
      });
      worker.on("error", () => undefined);
      await worker.start();
      for (let loop = 0; loop < concurrency; loop++) {
        await worker.work<{ t?: number }>(
          QUEUE,
          { batchSize: single ? 1 : 100, pollingIntervalSeconds: 0.5 },
          async (jobs) => {
            for (const job of jobs) onJob(job.data);
          },
        );
      }
      return {
        async stop() {
          await worker.stop({ graceful: true, wait: true, close: true, timeout: 10_000 });
          // pg-boss may still finish a completion on a pool it does not own: end ours a little later.
          if (pool) setTimeout(() => void pool.end().catch(() => undefined), 5_000).unref();
        },
      };
    },
    async seedBig(pending, completed) {
      await admin.query(
        `INSERT INTO "${schema}".job (name, data, state, completed_on)
         SELECT $1, '{}', 'completed', now() FROM generate_series(1, $2)`,
        [QUEUE, completed],
      );
      await admin.query(`INSERT INTO "${schema}".job (name, data) SELECT $1, '{}' FROM generate_series(1, $2)`, [
        QUEUE,
        pending,
      ]);
      await this.analyze();
      return `${completed} completed + ${pending} pending rows`;
    },
    async seedIdle(n) {
      const b = await producer();
      const queues = ["idle", ...Array.from({ length: 18 }, (_, i) => `other-${i}`)];
      for (const q of queues) if (!(await b.getQueue(q))) await b.createQueue(q);
      await admin.query(
        `INSERT INTO "${schema}".job (name, data) SELECT 'idle', '{}' FROM generate_series(1, $1::int)`,
        [n],
      );
      await admin.query(
        `INSERT INTO "${schema}".job (name, data) SELECT 'other-' || (g % 18), '{}' FROM generate_series(1, 1800) g`,
      );
      return `${n} pending in queue "idle" + 1,800 in 18 other queues`;
    },
    async teardown() {
      if (started) await boss.stop({ graceful: false, wait: true, close: true });
      started = false;
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
    async close() {
      if (started) await boss.stop({ graceful: false, wait: true, close: true });
      started = false;
      await admin.end();
    },
  };
};
