/**
 * The session settings that keep a partition from stalling anything forever
 * (docs/deployment.md), read back from real sessions: the client's pool, a
 * worker's own pool (statement and idle-transaction timeouts bounded by its
 * lease), the LISTEN connection; each timeout shown to act; bad settings
 * refused at the edge; the prefetch target bounded by the lease; a buffered
 * job whose lease no heartbeat renewed for a whole lease is never started.
 */
import pg from "pg";
import { afterEach, describe, expect, test } from "vitest";
import { connectionOptions, DEFAULT_SESSION_SETTINGS, resolveSessionSettings } from "../../src/db/pool.js";
import { Skipq, silentLogger, ValidationError, type Worker } from "../../src/index.js";
import { prefetchTarget } from "../../src/worker/fetcher.js";
import { ChaosProxy } from "../chaos/proxy.js";
import { DATABASE_URL, type TestQueue, testQueue, until } from "../helpers.js";

let t: TestQueue | undefined;
let worker: Worker | undefined;
let proxy: ChaosProxy | undefined;
afterEach(async () => {
  await worker?.stop();
  worker = undefined;
  await t?.cleanup();
  t = undefined;
  await proxy?.close();
  proxy = undefined;
});

const NAMES = [
  "tcp_user_timeout",
  "tcp_keepalives_idle",
  "tcp_keepalives_interval",
  "tcp_keepalives_count",
  "idle_in_transaction_session_timeout",
  "statement_timeout",
];

/** The session's values of NAMES as pg_settings shows them (integers in the setting's unit). */
async function settingsOf(db: pg.Pool | pg.Client): Promise<Record<string, string>> {
  const { rows } = await db.query<{ name: string; setting: string }>(
    "SELECT name, setting FROM pg_settings WHERE name = ANY($1)",
    [NAMES],
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.setting]));
}

describe("session settings", () => {
  test("the client's pool sends the partition defaults: tcp_user_timeout, keepalives, idle-in-transaction timeout", async () => {
    t = await testQueue("session-client");
    const s = await settingsOf(t.skipq.pool);
    expect(s).toMatchObject({
      tcp_user_timeout: "10000",
      tcp_keepalives_idle: "10",
      tcp_keepalives_interval: "5",
      tcp_keepalives_count: "3",
      idle_in_transaction_session_timeout: "60000",
      // No statement timeout on the client's pool: admin calls and bulk COPY may run long.
      statement_timeout: "0",
    });
  });

  test("a worker's own pool bounds statement_timeout and idle_in_transaction_session_timeout by its lease", async () => {
    t = await testQueue("session-worker", { sessionSettings: { statement_timeout: 60_000, tcp_user_timeout: 4000 } });
    worker = t.skipq.worker({ lockTimeout: "3s", maintenance: false, presence: false, listen: false });
    const s = await settingsOf(worker.pool);
    expect(s).toMatchObject({
      statement_timeout: "3000",
      idle_in_transaction_session_timeout: "3000",
      tcp_user_timeout: "4000",
      tcp_keepalives_idle: "10",
    });
  });

  test("a worker's statement that runs longer than its lease is cancelled by the server (57014)", async () => {
    t = await testQueue("session-stmt");
    worker = t.skipq.worker({ lockTimeout: "500ms", maintenance: false, presence: false, listen: false });
    const error = await worker.pool.query("SELECT pg_sleep(5)").then(
      () => undefined,
      (e: unknown) => e as { code?: string },
    );
    expect(error?.code).toBe("57014");
  });

  test("a transaction left idle on a worker's pool is ended by the server after one lease (25P03)", async () => {
    t = await testQueue("session-idle");
    worker = t.skipq.worker({ lockTimeout: "500ms", maintenance: false, presence: false, listen: false });
    const client = await worker.pool.connect();
    try {
      await client.query("BEGIN");
      await client.query("SELECT 1");
      const pid = (await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid")).rows[0]?.pid;
      await until("the server ended the idle transaction's session", async () => {
        const { rows } = await (t as TestQueue).db.query("SELECT 1 FROM pg_stat_activity WHERE pid = $1", [pid]);
        return rows.length === 0;
      });
      await expect(client.query("SELECT 1")).rejects.toThrow();
    } finally {
      client.release(true);
    }
  });

  test("the LISTEN connection carries the same settings", async () => {
    t = await testQueue("session-listen", { sessionSettings: { tcp_user_timeout: 7000 } });
    worker = t.skipq.worker({ maintenance: false, presence: false });
    await worker.start();
    await until("listener connected", () => worker?.listener?.connected);
    // Another session's settings are not visible; the listener's own connection is read through its client.
    const client = (worker.listener as unknown as { client: pg.Client }).client;
    expect(await settingsOf(client)).toMatchObject({ tcp_user_timeout: "7000", tcp_keepalives_count: "3" });
  });

  test("sessionSettings: false sends none (the server's defaults apply)", async () => {
    t = await testQueue("session-off", { sessionSettings: false });
    const s = await settingsOf(t.skipq.pool);
    const server = new pg.Client({ connectionString: DATABASE_URL });
    await server.connect();
    try {
      expect(s).toEqual(await settingsOf(server));
    } finally {
      await server.end();
    }
    expect(connectionOptions(false)).toEqual({ keepAlive: true });
  });

  test("the client's end keeps its socket alive at the server's keepalive pace", () => {
    expect(connectionOptions(resolveSessionSettings(undefined))).toMatchObject({
      keepAlive: true,
      keepAliveInitialDelayMillis: DEFAULT_SESSION_SETTINGS.tcp_keepalives_idle * 1000,
    });
  });

  test("bad session settings are refused with a message naming the setting, and nothing is created", () => {
    const make = (sessionSettings: unknown) =>
      new Skipq({
        connectionString: DATABASE_URL,
        logger: silentLogger,
        sessionSettings: sessionSettings as Record<string, number>,
      });
    expect(() => make({ "tcp_user_timeout; DROP": 1 })).toThrow(ValidationError);
    expect(() => make({ tcp_user_timeout: "10 -c x=1" })).toThrow(/sessionSettings.tcp_user_timeout/);
    expect(() => make({ statement_timeout: Number.NaN })).toThrow(/not a plain value/);
    expect(() => make("fast")).toThrow(/sessionSettings must be an object/);
    expect(resolveSessionSettings({ tcp_user_timeout: null })).not.toHaveProperty("tcp_user_timeout");
  });

  test("a worker's statement the server never answers (packets dropped) fails after lease + 5 s and its connection is discarded", async () => {
    t = await testQueue("session-read-timeout");
    proxy = new ChaosProxy(Number(new URL(DATABASE_URL).port || 5432));
    await proxy.start();
    const viaProxy = new Skipq({ connectionString: proxy.url(DATABASE_URL), schema: t.schema, logger: silentLogger });
    const w = viaProxy.worker({ lockTimeout: "500ms", maintenance: false, presence: false, listen: false });
    try {
      await w.pool.query("SELECT 1");
      proxy.blackholeExisting();
      const started = Date.now();
      await expect(w.pool.query("SELECT 1")).rejects.toThrow(/timeout/i);
      const took = Date.now() - started;
      expect(took).toBeGreaterThanOrEqual(5000);
      expect(took).toBeLessThan(8000);
      expect(w.pool.totalCount).toBe(0);
    } finally {
      await w.stop();
      await viaProxy.close();
    }
  });
});

describe("prefetch and the lease", () => {
  test("the prefetch target never exceeds what the handlers start within a quarter of the lease", () => {
    // 10 handlers of 100 ms, a 2 s lease: 10 × 500 ms / 100 ms = 50, though slow claims would ask 2,000.
    expect(prefetchTarget({ prefetch: 1000, concurrency: 10, leaseMs: 2000, handlerMs: 100, claimMs: 10_000 })).toBe(
      50,
    );
    // Fast handlers, default lease: prefetch itself is the bound.
    expect(prefetchTarget({ prefetch: 1000, concurrency: 10, leaseMs: 30_000, handlerMs: 0.1, claimMs: 5 })).toBe(1000);
    // Before any handler has finished: concurrency; prefetch 0: none.
    expect(prefetchTarget({ prefetch: 1000, concurrency: 10, leaseMs: 30_000, handlerMs: undefined, claimMs: 5 })).toBe(
      10,
    );
    expect(prefetchTarget({ prefetch: 0, concurrency: 10, leaseMs: 30_000, handlerMs: 1, claimMs: 5 })).toBe(0);
  });

  test("a buffered job whose lease no heartbeat renewed for a whole lease is handed back, never started", async () => {
    t = await testQueue("prefetch-unconfirmed");
    await t.skipq.enqueueMany([
      { job: "slow", payload: { n: 1 } },
      { job: "slow", payload: { n: 2 } },
    ]);
    proxy = new ChaosProxy(Number(new URL(DATABASE_URL).port || 5432));
    await proxy.start();
    const viaProxy = new Skipq({ connectionString: proxy.url(DATABASE_URL), schema: t.schema, logger: silentLogger });
    let release: () => void = () => undefined;
    const gate = new Promise<void>((r) => {
      release = r;
    });
    const started: number[] = [];
    const w = viaProxy
      .worker({
        concurrency: 1,
        prefetch: 1,
        lockTimeout: "1s",
        maintenance: false,
        presence: false,
        listen: false,
      })
      .register("slow", async (payload) => {
        started.push((payload as { n: number }).n);
        await gate;
      });
    try {
      await w.start();
      await until("one running and one buffered", () => w.running === 1 && w.buffered === 1);
      // Cut the worker off: its heartbeats hang, so no lease is confirmed again.
      proxy.partition();
      const cut = performance.now();
      await until("a lease has passed unconfirmed", () => performance.now() - cut > 1200);
      release();
      await until("the buffered job was handed back", () => w.buffered === 0 && w.running === 0);
      expect(started).toEqual([1]);
      expect(w.stats.released).toBe(1);
    } finally {
      proxy.heal();
      await w.stop();
      await viaProxy.close();
    }
  });
});
