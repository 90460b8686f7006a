/**
 * The hooks every chaos file shares: one embedded PostgreSQL per file, a fresh
 * queue schema per test, and nothing left running between tests (child worker
 * processes killed, in-process workers stopped).
 */
import { afterAll, afterEach, beforeAll } from "vitest";
import type { EmbeddedPostgres } from "../../src/embedded/embeddedPostgres.js";
import type { Worker } from "../../src/index.js";
import { type ChaosQueue, chaosQueue, killAllChildren, startServer } from "./harness.js";

/** The lease settings of CHAOS_WORKER, as printed with every result row. */
export const CHAOS_CONFIG = "lease 2s, heartbeat 0.5s, reaper 0.2s, poll 0.2s, leader lease 2s";

export interface ChaosSuite {
  /** This file's PostgreSQL, started before its first test. */
  readonly server: EmbeddedPostgres;
  /** A fresh queue schema, dropped after the file. */
  queue(label: string): Promise<ChaosQueue>;
  /** In-process workers a test started; each is stopped after the test. */
  readonly workers: Worker[];
}

/** `env`: extra environment for this file's PostgreSQL server (T4 preloads libfaketime into it). */
export function chaosSuite(options: { env?: Record<string, string> } = {}): ChaosSuite {
  let server: EmbeddedPostgres | undefined;
  const queues: ChaosQueue[] = [];
  const workers: Worker[] = [];
  beforeAll(async () => {
    server = await startServer({}, options.env);
  });
  afterEach(async () => {
    await killAllChildren();
    await Promise.all(workers.splice(0).map((w) => w.stop()));
  });
  afterAll(async () => {
    await killAllChildren();
    for (const q of queues) await q.cleanup();
    await server?.stop();
  });
  const running = (): EmbeddedPostgres => {
    if (!server) throw new Error("the chaos server starts in beforeAll; use it inside a test");
    return server;
  };
  return {
    get server() {
      return running();
    },
    async queue(label) {
      const q = await chaosQueue(running().url, label);
      queues.push(q);
      return q;
    },
    workers,
  };
}
