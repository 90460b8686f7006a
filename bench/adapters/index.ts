/** The systems the bench knows, by key (the file name: bench/child.ts imports ./<key>.js): one adapter file each. */
import type { AdapterFactory } from "../lib.js";
import { create as bullmq } from "./bullmq.js";
import { create as bullmqPostgres } from "./bullmq-postgres.js";
import { create as graphileWorker } from "./graphile-worker.js";
import { create as pgBoss } from "./pg-boss.js";
import { create as skipq } from "./skipq.js";

export const adapters: Record<string, AdapterFactory> = {
  skipq,
  "graphile-worker": graphileWorker,
  "pg-boss": pgBoss,
  bullmq,
  "bullmq-postgres": bullmqPostgres,
};
