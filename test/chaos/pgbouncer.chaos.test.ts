/**
 * PgBouncer in transaction pooling mode (Debian's pgbouncer, started by the
 * test on a free port with a generated ini): a drain with every pool query
 * going through PgBouncer, prepared statements off, and LISTEN on a direct
 * connection (LISTEN through transaction pooling never hears a NOTIFY).
 *
 * Invariant: nothing the worker does depends on session state: the claim,
 * outcomes, heartbeats and the reaper's transaction-scoped advisory lock all
 * work when consecutive statements land on different server connections.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { EmbeddedPostgres } from "../../src/embedded/embeddedPostgres.js";
import { Skipq, silentLogger, type Worker } from "../../src/index.js";
import { type Bouncer, startBouncer } from "./bouncer.js";
import {
  CHAOS_WORKER,
  type ChaosQueue,
  chaosQueue,
  recordResult,
  startServer,
  statusCounts,
  until,
} from "./harness.js";

let server: EmbeddedPostgres;
let bouncer: Bouncer | undefined;
let bouncerUrl = "";
let q: ChaosQueue;

beforeAll(async () => {
  server = await startServer();
  q = await chaosQueue(server.url, "pgbouncer");
  bouncer = await startBouncer(server.port);
  bouncerUrl = bouncer.url;
});

afterAll(async () => {
  await bouncer?.stop();
  await q?.cleanup();
  await server?.stop();
});

describe("pgbouncer", () => {
  it("PgBouncer transaction pooling: a 3,000-job drain by two workers completes every job exactly once, woken through a direct LISTEN", async () => {
    const jobs = 3000;
    const viaBouncer = () =>
      new Skipq({
        connectionString: bouncerUrl,
        schema: q.schema,
        logger: silentLogger,
        preparedStatements: false,
        // PgBouncer 1.18 refuses the startup parameter "options"; the timeouts belong on the pooler there.
        sessionSettings: false,
        poolSize: 4,
      });
    const producer = viaBouncer();
    const clients = [viaBouncer(), viaBouncer()];
    const runs = new Map<string, number>();
    const workers: Worker[] = clients.map((c) => {
      const w = c.worker({ ...CHAOS_WORKER, concurrency: 10, listenConnectionString: server.url });
      w.register("chaos", async (_p, ctx) => {
        runs.set(ctx.job.id, (runs.get(ctx.job.id) ?? 0) + 1);
      });
      return w;
    });
    const warnings: unknown[] = [];
    for (const w of workers) w.on("warning", (e) => warnings.push(e));
    try {
      await Promise.all(workers.map((w) => w.start()));
      await until("both listeners connected directly", () => workers.every((w) => w.listener?.connected));
      const started = Date.now();
      await producer.enqueueMany(Array.from({ length: jobs }, (_, i) => ({ job: "chaos", payload: { i } })));
      await until("every job completed", async () => (await statusCounts(q)).completed === jobs, 120_000, 50);
      const drainMs = Date.now() - started;
      // A single enqueue wakes an idle worker through the direct LISTEN, faster than the 200 ms poll.
      await until("idle", () => workers.every((w) => w.running === 0));
      const t0 = Date.now();
      const single = await producer.enqueue("chaos", { single: true });
      await until("the single job ran", () => runs.has(single.id), 5000, 5);
      const wakeMs = Date.now() - t0;
      expect(runs.size).toBe(jobs + 1);
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      expect(warnings).toEqual([]);
      const log = bouncer?.log() ?? "";
      expect(log).not.toMatch(/prepared statement .* does not exist/);
      recordResult({
        row: "B1",
        title:
          "PgBouncer 1.18 transaction pooling: 3,000-job drain by 2 workers (pool 4 each, server pool 6), LISTEN direct",
        config: `${CHAOS_WORKER.lockTimeout} lease, preparedStatements: false, listenConnectionString direct`,
        lost: jobs + 1 - runs.size,
        duplicates: [...runs.values()].filter((n) => n > 1).length,
        other: `drain ${(drainMs / 1000).toFixed(1)} s; worker warnings: 0; pickup of a single job after enqueue ${wakeMs} ms`,
      });
    } finally {
      await Promise.all(workers.map((w) => w.stop()));
      await Promise.all([producer, ...clients].map((c) => c.close()));
    }
  });
});
