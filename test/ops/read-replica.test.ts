/**
 * Read replicas (issue 25, item 4) against a real streaming standby: with
 * `readConnectionString`, Admin's reads, the dashboard's pages, `skipq stats`
 * and the metrics' gauges read the standby, and the replica's lag is shown;
 * every write, claim and outcome still goes to the primary. The standby's
 * replay is paused to tell the two servers apart: what the primary has and the
 * standby does not yet is visible only through the primary.
 */
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Admin, createMetrics, Skipq, silentLogger, startDashboard } from "../../src/index.js";
import { skipq as cli } from "../cli/run.js";
import { caughtUp, freePort, type ReplicaSet, replicaSet, replicationUnavailable } from "../replication.js";
import { until } from "../until.js";

const SCHEMA = "reads";
let set: ReplicaSet;
let client: Skipq;
let admin: Admin;

beforeAll(async () => {
  const unavailable = replicationUnavailable();
  if (unavailable) throw new Error(`the read-replica tests need a standby: ${unavailable}`);
  set = await replicaSet();
  client = new Skipq({
    connectionString: set.primary.url(),
    readConnectionString: set.standby.url(),
    schema: SCHEMA,
    logger: silentLogger,
  });
  await client.migrate();
  admin = new Admin(client);
  await caughtUp(set.primary, set.standby);
}, 120_000);
afterAll(async () => {
  await client?.close();
  await set?.stop();
});

/** Runs `body` with the standby's replay paused (it receives WAL but applies none), then lets it catch up. */
async function withReplayPaused<T>(body: () => Promise<T>): Promise<T> {
  await set.standby.query("SELECT pg_wal_replay_pause()");
  await until("replay paused", async () => {
    const { rows } = await set.standby.query<{ s: string }>("SELECT pg_get_wal_replay_pause_state() AS s");
    return rows[0]?.s === "paused";
  });
  try {
    return await body();
  } finally {
    await set.standby.query("SELECT pg_wal_replay_resume()");
    await caughtUp(set.primary, set.standby);
  }
}

describe("Admin", () => {
  it("reads from the standby and writes to the primary: a job the standby has not replayed is invisible to reads and still cancellable", async () => {
    await withReplayPaused(async () => {
      const job = await client.enqueue("k", {}, { queue: "replica-a" });
      expect(await admin.getJob(job.id)).toBeUndefined();
      expect((await admin.listJobs({ queue: "replica-a" })).map((j) => j.id)).not.toContain(job.id);
      expect((await admin.overview()).find((q) => q.queue === "replica-a")).toBeUndefined();
      // The write goes to the primary, which has the job.
      await admin.cancelJob(job.id);
      const onPrimary = await set.primary.query(`SELECT status FROM ${SCHEMA}.all_jobs WHERE id = $1`, [job.id]);
      expect(onPrimary.rows[0]?.status).toBe("cancelled");
      const lag = await admin.replica();
      expect(lag?.standby).toBe(true);
      expect(lag?.server).toBe(`127.0.0.1:${set.standby.port}`);
      expect(lag?.lagBytes).toBeGreaterThan(0);
    });
    expect(await admin.replica()).toMatchObject({ standby: true, lagBytes: 0, lagMs: 0 });
  });

  it("every write method works with reads on a standby (none is sent there: it would refuse with 25006)", async () => {
    const dead = await client.enqueue("k", {}, { queue: "replica-w", maxAttempts: 1 });
    await set.primary.query(
      `WITH gone AS (DELETE FROM ${SCHEMA}.jobs WHERE id = $1 RETURNING *)
       INSERT INTO ${SCHEMA}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at, error_fingerprint)
       SELECT id, queue, kind, payload, 'dead', priority, 1, 1, run_at, created_at, now(), '0123456789abcdef' FROM gone`,
      [dead.id],
    );
    await admin.retryJob(dead.id);
    await admin.pauseQueue("replica-w");
    await admin.resumeQueue("replica-w");
    await admin.setQueueLimits("replica-w", { concurrency: 2 });
    await admin.pauseKey("replica-w", "k1", "1m");
    expect(await admin.resumeKey("replica-w", "k1")).toBe(true);
    expect(await admin.retryDead("replica-w")).toBe(0);
    expect(await admin.bulk("priority", { queue: "replica-w" }, { priority: 3 })).toBe(1);
    await admin.cancelJob(dead.id);
    expect(await admin.prune("0s", ["cancelled"])).toBeGreaterThanOrEqual(1);
    // A write the primary refuses is explained from the primary (the standby may not know the job yet).
    await withReplayPaused(async () => {
      const fresh = await client.enqueue("k", {}, { queue: "replica-w" });
      await expect(admin.retryJob(fresh.id)).rejects.toThrow(`job ${fresh.id} is pending`);
    });
  });

  it("a worker of a client that reads from a standby claims and records outcomes on the primary", async () => {
    const worker = client.worker({ queues: ["replica-work"], pollInterval: "100ms" });
    const ran: string[] = [];
    worker.register("k", async (_p, ctx) => {
      ran.push(ctx.job.id);
    });
    await worker.start();
    try {
      await withReplayPaused(async () => {
        const jobs = await client.enqueueMany(
          Array.from({ length: 20 }, () => ({ job: "k", payload: {}, queue: "replica-work" })),
        );
        // Claims and outcomes go to the primary: every job completes there while the standby stands still.
        await until("all 20 completed on the primary", async () => {
          const { rows } = await set.primary.query<{ n: number }>(
            `SELECT count(*)::int AS n FROM ${SCHEMA}.all_jobs WHERE id = ANY($1) AND status = 'completed'`,
            [jobs.map((j) => j.id)],
          );
          return rows[0]?.n === 20;
        });
        expect(ran).toHaveLength(20);
      });
    } finally {
      await worker.stop();
    }
  });

  it("a prefer-standby host list as readConnectionString reads the standby, and the primary when no standby answers", async () => {
    const dead = await freePort();
    const hosts = (list: number[]) =>
      `postgres://postgres@${list.map((p) => `127.0.0.1:${p}`).join(",")}/postgres?target_session_attrs=prefer-standby`;
    for (const [list, expected] of [
      [[set.primary.port, set.standby.port], { standby: true, server: `127.0.0.1:${set.standby.port}` }],
      [[dead, set.primary.port], { standby: false, server: `127.0.0.1:${set.primary.port}`, lagBytes: 0 }],
    ] as const) {
      const c = new Skipq({
        connectionString: set.primary.url(),
        readConnectionString: hosts([...list]),
        schema: SCHEMA,
        logger: silentLogger,
      });
      try {
        expect(await new Admin(c).replica()).toMatchObject(expected);
      } finally {
        await c.close();
      }
    }
  });

  it("without readConnectionString reads go where writes go, and replica() is undefined", async () => {
    const c = new Skipq({ connectionString: set.primary.url(), schema: SCHEMA, logger: silentLogger });
    try {
      expect(c.readStore).toBe(c.store);
      expect(await new Admin(c).replica()).toBeUndefined();
    } finally {
      await c.close();
    }
  });
});

describe("the dashboard, skipq stats and metrics", () => {
  it("the dashboard's pages read the standby, and the header shows how far behind it is", async () => {
    const dashboard = await startDashboard({ skipq: client, port: 0, auth: false, env: {} });
    try {
      const page = async (path: string) => (await fetch(new URL(path, dashboard.url))).text();
      await withReplayPaused(async () => {
        const job = await client.enqueue("k", {}, { queue: "replica-d" });
        const html = await page("/");
        expect(html).toContain(`reads: standby 127.0.0.1:${set.standby.port}`);
        expect(html).toMatch(/id="replica" data-lag-ms="[\d.]+" data-lag-bytes="[1-9]\d*"/);
        expect(html).not.toContain("replica-d");
        expect((await fetch(new URL(`/jobs/${job.id}`, dashboard.url))).status).toBe(404);
      });
      // Caught up (the header's reading is cached for 2 s).
      await until("the header says caught up", async () => (await page("/")).includes("caught up"), 10_000, 250);
      expect(await page("/")).toContain("replica-d");
    } finally {
      await dashboard.close();
    }
  });

  it("skipq stats reads the standby given --read-database-url (or SKIPQ_READ_DATABASE_URL)", async () => {
    const env = { DATABASE_URL: set.primary.url(), SKIPQ_SCHEMA: SCHEMA };
    await withReplayPaused(async () => {
      await client.enqueue("k", {}, { queue: "replica-cli" });
      const queues = async (args: string[], extra: Record<string, string> = {}) => {
        const result = await cli(["stats", "--json", ...args], { ...env, ...extra });
        expect(result.stderr).toBe("");
        return (JSON.parse(result.stdout) as { queues: Array<{ queue: string }> }).queues.map((q) => q.queue);
      };
      expect(await queues([])).toContain("replica-cli");
      expect(await queues(["--read-database-url", set.standby.url()])).not.toContain("replica-cli");
      expect(await queues([], { SKIPQ_READ_DATABASE_URL: set.standby.url() })).not.toContain("replica-cli");
    });
  });

  it("the metrics export the replica's lag", async () => {
    const metrics = createMetrics({ skipq: client, refreshInterval: "0s", health: false });
    await withReplayPaused(async () => {
      await client.enqueue("k", {}, { queue: "replica-m" });
      const text = await metrics.metrics();
      const bytes = Number(/^skipq_replica_lag_bytes (\S+)$/m.exec(text)?.[1]);
      expect(bytes).toBeGreaterThan(0);
      expect(text).toMatch(/^skipq_replica_lag_seconds \S+$/m);
    });
    const after = await metrics.metrics();
    expect(Number(/^skipq_replica_lag_bytes (\S+)$/m.exec(after)?.[1])).toBe(0);
  });
});
