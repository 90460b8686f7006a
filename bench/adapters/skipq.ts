/**
 * skipq's bench adapter: the public API only (enqueueMany, enqueue, worker), imported
 * as users import it (the built package, `skipq`, not the TypeScript sources through tsx),
 * with default settings, in its own schema. Seeding the big table is plain SQL
 * (the seeds' shape: finished rows, in job_history, and runnable ones).
 */
import pg from "pg";
import { Admin, Skipq, silentLogger } from "skipq";
import { type AdapterFactory, packageVersion, type SystemAdapter, timedPool } from "../lib.js";

export const create: AdapterFactory = (env, tag): SystemAdapter => {
  const schema = `bench_skipq_${tag}`;
  const skipq = new Skipq({ connectionString: env.databaseUrl, schema, logger: silentLogger });
  const admin = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  admin.on("error", () => undefined);
  return {
    name: "skipq",
    version: packageVersion("skipq"),
    settings: "defaults: batched claims (prefetch) and completions, prepared statements, LISTEN/NOTIFY",
    async setup() {
      await skipq.migrate();
      return null;
    },
    async reset() {
      await admin.query(`TRUNCATE "${schema}".jobs, "${schema}".job_history, "${schema}".job_keys`);
    },
    async enqueueBulk(payloads) {
      await skipq.enqueueMany(payloads.map((payload) => ({ job: "noop", payload })));
    },
    enqueueBulkFast: {
      label: "skipq, returning: false (COPY)",
      async run(payloads) {
        await skipq.enqueueMany(
          payloads.map((payload) => ({ job: "noop", payload })),
          { returning: false },
        );
      },
    },
    async analyze() {
      await admin.query(`VACUUM ANALYZE "${schema}".jobs`);
      await admin.query(`ANALYZE "${schema}".job_history`);
    },
    async enqueueOne(payload) {
      await skipq.enqueue("noop", payload);
    },
    async startWorker({ concurrency, onJob, onClaim, single, batch, noRetention }) {
      const pool = onClaim
        ? timedPool(env.databaseUrl, 4 + concurrency, /SKIP LOCKED|skipq_claim/, onClaim)
        : undefined;
      const worker = skipq.worker({
        concurrency,
        ...(single ? { batchSize: 1, prefetch: 0 } : {}),
        ...(batch ? { batchSize: batch, prefetch: 0 } : {}),
        ...(pool ? { pool } : {}),
        ...(noRetention ? { maintenance: { retention: false as const } } : {}),
      });
      worker.register("noop", (payload) => {
        onJob(payload as { t?: number; i?: number });
      });
      await worker.start();
      return {
        async stop() {
          await worker.stop();
          await pool?.end();
        },
      };
    },
    async seedBig(pending, completed) {
      // Finished jobs live in job_history (storage v2): claims never read them.
      await this.seedHistory?.(completed);
      await admin.query(
        `INSERT INTO "${schema}".jobs (kind, payload) SELECT 'noop', '{}' FROM generate_series(1, $1)`,
        [pending],
      );
      await this.analyze();
      return `${completed} completed + ${pending} pending rows`;
    },
    async sampleProtocolClaims(count, deadline) {
      // The SQL protocol's claim (docs/protocol.md) as a client in another language calls it: a named
      // statement on one connection, one job a call (left running: its lease outlives the sampling).
      const client = await admin.connect();
      const samples: number[] = [];
      try {
        for (let i = 0; i < count + 10 && Date.now() < deadline; i++) {
          const t0 = performance.now();
          const { rows } = await client.query({
            name: "bench_protocol_claim",
            text: `SELECT id FROM "${schema}".skipq_claim(ARRAY['default'], 1, 'bench-protocol', 300000)`,
          });
          if (rows.length === 0) break;
          samples.push(performance.now() - t0);
        }
      } finally {
        client.release();
      }
      return samples.slice(10);
    },
    async seedIdle(n) {
      // A bulk import parked in a queue nobody serves, beside 18 small queues also unserved.
      await admin.query(
        `INSERT INTO "${schema}".jobs (queue, kind, payload)
         SELECT CASE WHEN g <= $1::int THEN 'idle' ELSE 'other-' || (g % 18) END, 'noop', '{}'
           FROM generate_series(1, $1::int + 18 * 100) g`,
        [n],
      );
      return `${n} pending in "idle" + 1,800 in 18 other queues`;
    },
    async seedHistory(rows, { daysAgo } = {}) {
      // Rows in finish-time order, as a drain writes them: the last hour, or one whole UTC day in its own partition.
      let from = "now() - interval '1 hour'";
      let span = "interval '1 hour'";
      if (daysAgo !== undefined) {
        from = `date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - ${Number(daysAgo)} * interval '1 day'`;
        span = "interval '1 day'";
        await admin.query(
          `SELECT "${schema}".skipq_history_partition('job_history_completed', d, d + interval '1 day') FROM (SELECT ${from} AS d) x`,
        );
      }
      await admin.query(
        `INSERT INTO "${schema}".job_history (id, queue, kind, payload, status, priority, attempts, max_attempts,
                                             run_at, created_at, finished_at)
         SELECT nextval(pg_get_serial_sequence('"${schema}".jobs', 'id')), 'default', 'noop', '{"i":1}', 'completed',
                0, 1, 10, t, t, t
           FROM (SELECT ${from} + (g::float8 / $1::int) * ${span} AS t FROM generate_series(0, $1::int - 1) g) x`,
        [rows],
      );
      // VACUUM too: 5,000,000 inserted rows start autovacuum on the history, which would otherwise run during the
      // claims measured next (on 2 cores it tripled their p95) — the steady state is a vacuumed history.
      await admin.query(`VACUUM ANALYZE "${schema}".job_history`);
      return daysAgo === undefined
        ? `${rows} completed rows`
        : `${rows} completed rows in the partition of one UTC day`;
    },
    async dropHistory(olderThanMs) {
      return new Admin(skipq).prune(olderThanMs, ["completed"]);
    },
    async teardown() {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
    async close() {
      await skipq.close();
      await admin.end();
    },
  };
};
