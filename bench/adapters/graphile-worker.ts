/**
 * graphile-worker 0.18's bench adapter, at its documented fastest: a local
 * queue (batch fetch, size 200 or the concurrency when larger), batched
 * completions and failures (completeJobBatchDelay/failJobBatchDelay 0),
 * LISTEN/NOTIFY, a pool of concurrency + 2. Completed jobs are deleted by
 * graphile-worker, so its table never holds terminal rows.
 */
import { Logger, makeWorkerUtils, run, type WorkerUtils } from "graphile-worker";
import pg from "pg";
import { type AdapterFactory, packageVersion, type SystemAdapter, timedPool } from "../lib.js";

const silent = new Logger(() => () => undefined);

export const create: AdapterFactory = (env, tag): SystemAdapter => {
  const schema = `bench_graphile_${tag}`;
  const admin = new pg.Pool({ connectionString: env.databaseUrl, max: 2 });
  admin.on("error", () => undefined);
  let utils: WorkerUtils | undefined;
  const getUtils = async () => {
    utils ??= await makeWorkerUtils({ connectionString: env.databaseUrl, schema, logger: silent });
    return utils;
  };
  return {
    name: "graphile-worker",
    version: packageVersion("graphile-worker"),
    settings:
      "localQueue.size max(200, concurrency), completeJobBatchDelay 0, failJobBatchDelay 0, maxPoolSize concurrency+2",
    async setup() {
      await (await getUtils()).migrate();
      return null;
    },
    async reset() {
      await admin.query(`DELETE FROM "${schema}"._private_jobs`);
    },
    async enqueueBulk(payloads) {
      await (await getUtils()).addJobs(payloads.map((payload) => ({ identifier: "noop", payload })));
    },
    async analyze() {
      await admin.query(`VACUUM ANALYZE "${schema}"._private_jobs`);
    },
    async enqueueOne(payload) {
      await (await getUtils()).addJob("noop", payload);
    },
    async startWorker({ concurrency, onJob, onClaim, single }) {
      const pgPool = onClaim
        ? timedPool(env.databaseUrl, concurrency + 2, /SKIP LOCKED|skip locked/, onClaim)
        : new pg.Pool({ connectionString: env.databaseUrl, max: concurrency + 2 });
      pgPool.on("error", () => undefined);
      pgPool.on("connect", (client) => client.on("error", () => undefined));
      const runner = await run({
        pgPool,
        schema,
        concurrency,
        noHandleSignals: true,
        pollInterval: 2000,
        logger: silent,
        taskList: {
          noop: async (payload) => {
            onJob(payload as { t?: number });
          },
        },
        preset: {
          worker: {
            ...(single ? {} : { localQueue: { size: Math.max(200, concurrency) } }),
            completeJobBatchDelay: 0,
            failJobBatchDelay: 0,
          },
        },
      });
      return {
        async stop() {
          await runner.stop();
          await pgPool.end();
        },
      };
    },
    async seedBig(pending) {
      // graphile-worker deletes jobs on completion: its real table never holds the 1.8M terminal rows.
      const chunk = 50_000;
      for (let done = 0; done < pending; done += chunk) {
        const n = Math.min(chunk, pending - done);
        await (await getUtils()).addJobs(Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })));
      }
      await this.analyze();
      return `${pending} pending rows (completed jobs are deleted, so no terminal rows)`;
    },
    async seedIdle(n) {
      // Jobs of tasks this bench's workers do not run: graphile-worker's analogue of a queue nobody serves.
      const chunk = 50_000;
      for (let done = 0; done < n; done += chunk) {
        const size = Math.min(chunk, n - done);
        await (await getUtils()).addJobs(Array.from({ length: size }, () => ({ identifier: "idle", payload: {} })));
      }
      await (await getUtils()).addJobs(
        Array.from({ length: 18 * 100 }, (_, i) => ({ identifier: `other-${i % 18}`, payload: {} })),
      );
      return `${n} pending of task "idle" + 1,800 of 18 other tasks (no worker runs them)`;
    },
    async teardown() {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    },
    async close() {
      await utils?.release();
      utils = undefined;
      await admin.end();
    },
  };
};
