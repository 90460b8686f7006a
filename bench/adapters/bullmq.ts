/**
 * BullMQ 6's bench adapter on its Redis backend (bullmq-postgres.ts is its PostgreSQL one) at 127.0.0.1:6379: a Worker with the
 * given concurrency and removeOnComplete (so Redis memory stays flat),
 * addBulk in chunks of 1,000 for bulk. No PostgreSQL, so no claim-latency or
 * big-table figure. When Redis does not answer, setup says "no Redis".
 */
import { Queue, Worker } from "bullmq";
import { Redis } from "ioredis";
import { type AdapterFactory, packageVersion, redisAnswers, type SystemAdapter } from "../lib.js";

export const create: AdapterFactory = (env, tag): SystemAdapter => {
  const name = `bench-${tag}`;
  // BullMQ under native ESM wants a constructed client; it duplicates it for its blocking connections.
  const connect = () => new Redis({ host: env.redisHost, port: env.redisPort, maxRetriesPerRequest: null });
  const clients: Redis[] = [];
  const connection = () => {
    const client = connect();
    clients.push(client);
    return client;
  };
  let queue: Queue | undefined;
  const getQueue = () => {
    queue ??= new Queue(name, {
      connection: connection(),
      defaultJobOptions: { removeOnComplete: true, removeOnFail: true },
    });
    return queue;
  };
  return {
    name: "BullMQ (Redis)",
    version: packageVersion("bullmq"),
    settings: "Worker concurrency = n, removeOnComplete, addBulk in chunks of 1,000",
    async setup() {
      if (!(await redisAnswers(env.redisHost, env.redisPort))) return "no Redis";
      await getQueue().waitUntilReady();
      return null;
    },
    async reset() {
      await getQueue().obliterate({ force: true });
    },
    async enqueueBulk(payloads) {
      for (let i = 0; i < payloads.length; i += 1000) {
        await getQueue().addBulk(payloads.slice(i, i + 1000).map((data) => ({ name: "noop", data })));
      }
    },
    async analyze() {
      // Redis has no planner.
    },
    async enqueueOne(payload) {
      await getQueue().add("noop", payload);
    },
    async startWorker({ concurrency, onJob }) {
      const worker = new Worker(
        name,
        async (job) => {
          onJob(job.data);
        },
        { connection: connection(), concurrency, removeOnComplete: { count: 0 } },
      );
      worker.on("error", () => undefined);
      await worker.waitUntilReady();
      return {
        async stop() {
          await worker.close();
        },
      };
    },
    async teardown() {
      await getQueue()
        .obliterate({ force: true })
        .catch(() => undefined);
    },
    async close() {
      await queue?.close();
      queue = undefined;
      for (const client of clients.splice(0)) client.disconnect();
    },
  };
};
