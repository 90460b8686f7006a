/**
 * BullMQ 6.7's bench adapter on its PostgreSQL backend (`createPostgresBackend`, shipped in
 * the bullmq package), in a schema of its own: a Worker with the given concurrency and a pool
 * of concurrency + 2 (its LISTEN client is a connection of its own), jobs removed on
 * completion (as on Redis, and as graphile-worker does), addBulk in chunks of 1,000 (one
 * `add_jobs_bulk` call each). Its claim is `move_to_active` (one job; FOR UPDATE SKIP LOCKED
 * inside the function), fused with the previous job's completion (`move_to_completed_fetch`).
 */
import {
  createPostgresBackend,
  type PostgresConnectionOptions,
  type PostgresQueueBackend,
  Queue,
  Worker,
} from "bullmq";
import pg from "pg";
import { type AdapterFactory, packageVersion, type SystemAdapter, timedClientClass } from "../lib.js";

const QUEUE = "noop";

export const create: AdapterFactory = (env, tag): SystemAdapter => {
  const schema = `bench_bullmq_${tag}`;
  const admin = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  admin.on("error", () => undefined);
  // biome-ignore lint/suspicious/noExplicitAny: job data and results are untyped here, as in the Redis adapter
  type PgQueue = Queue<any, any, string, any, any, string, PostgresQueueBackend, PostgresConnectionOptions>;
  let queue: PgQueue | undefined;
  const getQueue = (): PgQueue => {
    queue ??= new Queue(
      QUEUE,
      {
        connection: { connectionString: env.databaseUrl, schema, migrate: true, max: 4 },
        defaultJobOptions: { removeOnComplete: true, removeOnFail: true },
      },
      createPostgresBackend,
    );
    return queue;
  };
  return {
    name: "BullMQ (PostgreSQL)",
    version: packageVersion("bullmq"),
    settings:
      "createPostgresBackend, Worker concurrency = n, pool max concurrency + 2, removeOnComplete, addBulk in chunks of 1,000",
    async setup() {
      await getQueue().waitUntilReady();
      return null;
    },
    async reset() {
      await admin.query(`TRUNCATE "${schema}".job, "${schema}".event CASCADE`);
    },
    async enqueueBulk(payloads) {
      for (let i = 0; i < payloads.length; i += 1000) {
        await getQueue().addBulk(payloads.slice(i, i + 1000).map((data) => ({ name: "noop", data })));
      }
    },
    async analyze() {
      await admin.query(`VACUUM ANALYZE "${schema}".job`);
    },
    async enqueueOne(payload) {
      await getQueue().add("noop", payload);
    },
    async startWorker({ concurrency, onJob, onClaim }) {
      // Its claim statements are timed by a pg.Client class of ours: the pool it builds pins the schema.
      const Client = onClaim ? timedClientClass(/move_to_active|move_to_completed_fetch/, onClaim) : undefined;
      const worker = new Worker(
        QUEUE,
        async (job) => {
          onJob(job.data);
        },
        {
          connection: {
            connectionString: env.databaseUrl,
            schema,
            max: concurrency + 2,
            ...(Client ? { Client } : {}),
          },
          concurrency,
          removeOnComplete: { count: 0 },
        },
        createPostgresBackend,
      );
      worker.on("error", () => undefined);
      await worker.waitUntilReady();
      return {
        async stop() {
          await worker.close();
        },
      };
    },
    async seedBig(pending, completed) {
      // BullMQ keeps finished jobs in the same table (state 'completed') unless removed; the seeds' shape.
      await admin.query(
        `INSERT INTO "${schema}".job (queue, id, seq, name, state, added_at_ms, finished_at_ms)
         SELECT $1, 'c' || g, nextval('"${schema}".job_seq'), 'noop', 'completed', 0, 0 FROM generate_series(1, $2::int) g`,
        [QUEUE, completed],
      );
      await admin.query(
        `INSERT INTO "${schema}".job (queue, id, seq, name, state, added_at_ms)
         SELECT $1, 'p' || g, nextval('"${schema}".job_seq'), 'noop', 'waiting', 0 FROM generate_series(1, $2::int) g`,
        [QUEUE, pending],
      );
      await this.analyze();
      return `${completed} completed + ${pending} pending rows`;
    },
    async seedIdle(n) {
      // A queue no worker of the bench reads, beside 18 small ones.
      await admin.query(
        `INSERT INTO "${schema}".job (queue, id, seq, name, state, added_at_ms)
         SELECT CASE WHEN g <= $1::int THEN 'idle' ELSE 'other-' || (g % 18) END, 'i' || g,
                nextval('"${schema}".job_seq'), 'noop', 'waiting', 0
           FROM generate_series(1, $1::int + 18 * 100) g`,
        [n],
      );
      return `${n} pending in queue "idle" + 1,800 in 18 other queues`;
    },
    async teardown() {
      await queue?.close().catch(() => undefined);
      queue = undefined;
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
    async close() {
      await queue?.close();
      queue = undefined;
      await admin.end();
    },
  };
};
