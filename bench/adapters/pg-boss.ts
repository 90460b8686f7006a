/**
 * pg-boss 12's bench adapter, at its documented fastest: one work() registration
 * with `localConcurrency` workers (its per-node concurrency), each fetching
 * `batchSize` jobs (completed in one statement per batch) and fetching again at
 * once while a fetch comes back full (`burstWhenBatchFull`), LISTEN/NOTIFY on
 * (`useListenNotify` on the instance, `notify` on the queue) so an idle worker
 * wakes at an insert instead of its 0.5 s poll, and `insert()` for bulk.
 * Workers run their own instance with maintenance (supervise/schedule) off;
 * the producer instance keeps it on.
 */
import pg from "pg";
import { PgBoss } from "pg-boss";
import { type AdapterFactory, packageVersion, type SystemAdapter, timedPool } from "../lib.js";

const QUEUE = "noop";
/** Jobs per fetch when draining: the largest batch a drain at concurrency 10-100 can keep busy. */
const BATCH = 100;

export const create: AdapterFactory = (env, tag): SystemAdapter => {
  const schema = `bench_pgboss_${tag}`;
  const admin = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  admin.on("error", () => undefined);
  const boss = new PgBoss({ connectionString: env.databaseUrl, schema, max: 10, useListenNotify: true });
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
    version: packageVersion("pg-boss"),
    settings: `work() with localConcurrency = concurrency, batchSize ${BATCH} (1 for one-job claims), burstWhenBatchFull, pollingIntervalSeconds 0.5 (its minimum), useListenNotify with the queue's notify: true (notifyPollingIntervalSeconds 0.5), insert() for bulk`,
    async setup() {
      const b = await producer();
      if (!(await b.getQueue(QUEUE))) await b.createQueue(QUEUE, { notify: true });
      return null;
    },
    async reset() {
      await admin.query(`TRUNCATE "${schema}".job`);
    },
    async enqueueBulk(payloads) {
      const b = await producer();
      // One statement per 10,000 jobs: pg-boss sends a batch as one JSON parameter.
      for (let i = 0; i < payloads.length; i += 10_000) {
        await b.insert(
          QUEUE,
          payloads.slice(i, i + 10_000).map((data) => ({ data })),
        );
      }
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
        useListenNotify: !pool, // LISTEN needs a pg-boss-owned pool; the timed one polls (claims only are measured)
      });
      worker.on("error", () => undefined);
      await worker.start();
      await worker.work<{ t?: number }>(
        QUEUE,
        {
          localConcurrency: concurrency,
          batchSize: single ? 1 : BATCH,
          burstWhenBatchFull: !single,
          pollingIntervalSeconds: 0.5,
          notifyPollingIntervalSeconds: 0.5,
        },
        async (jobs) => {
          for (const job of jobs) onJob(job.data);
        },
      );
      return {
        async stop() {
          await worker.stop({ graceful: true, close: true, timeout: 10_000 });
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
    async seedPending(n) {
      await admin.query(`INSERT INTO "${schema}".job (name, data) SELECT $1, '{}' FROM generate_series(1, $2::int)`, [
        QUEUE,
        n,
      ]);
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
      if (started) await boss.stop({ graceful: false, close: true });
      started = false;
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
    async close() {
      if (started) await boss.stop({ graceful: false, close: true });
      started = false;
      await admin.end();
    },
  };
};
