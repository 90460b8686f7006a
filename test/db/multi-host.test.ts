/**
 * Multi-host connection strings against two real servers (issue 25, item 1):
 * a primary and its streaming standby (Debian's PostgreSQL 15, pg_basebackup
 * -R). Each connection tries the hosts in order and keeps the first whose
 * pg_is_in_recovery() / transaction_read_only fit target_session_attrs; every
 * new connection chooses again, so after a failover (the standby promoted, the
 * old primary fenced read-only) a pool and a listener move to the new primary,
 * and a connection whose server turned read-only under it is dropped.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TargetClient } from "../../src/db/connect.js";
import { isUnavailable } from "../../src/db/connectionErrors.js";
import { Listener } from "../../src/db/listener.js";
import { createPool, SessionClient } from "../../src/db/pool.js";
import { Skipq, silentLogger, ValidationError } from "../../src/index.js";
import { skipq as run } from "../cli/run.js";
import { caughtUp, freePort, type ReplicaSet, replicaSet, replicationUnavailable } from "../replication.js";
import { until } from "../until.js";

let set: ReplicaSet;
/** A port nothing listens on (connections refused). */
let deadPort: number;

beforeAll(async () => {
  const unavailable = replicationUnavailable();
  if (unavailable) throw new Error(`the multi-host tests need two PostgreSQL servers: ${unavailable}`);
  set = await replicaSet();
  deadPort = await freePort();
}, 120_000);
afterAll(async () => {
  await set?.stop();
});

const hostOf = (s: { port: number }) => `127.0.0.1:${s.port}`;
function url(hosts: string[], attrs?: string, db = "postgres"): string {
  return `postgres://postgres@${hosts.join(",")}/${db}${attrs ? `?target_session_attrs=${attrs}` : ""}`;
}

/** Which server a new client of `connectionString` reaches: its port and whether it is a standby. */
async function reached(connectionString: string): Promise<{ port: number; standby: boolean }> {
  const client = new SessionClient({ connectionString, connectionTimeoutMillis: 5000 });
  await client.connect();
  try {
    const { rows } = await client.query("SELECT inet_server_port() AS port, pg_is_in_recovery() AS standby");
    return { port: rows[0].port, standby: rows[0].standby };
  } finally {
    await client.end();
  }
}

describe("choosing a host", () => {
  it("read-write and primary reach the primary whichever host is listed first", async () => {
    const { primary, standby } = set;
    for (const attrs of ["read-write", "primary"]) {
      expect(await reached(url([hostOf(standby), hostOf(primary)], attrs))).toEqual({
        port: primary.port,
        standby: false,
      });
      expect(await reached(url([hostOf(primary), hostOf(standby)], attrs))).toEqual({
        port: primary.port,
        standby: false,
      });
    }
  });

  it("standby and read-only reach the standby whichever host is listed first", async () => {
    const { primary, standby } = set;
    for (const attrs of ["standby", "read-only"]) {
      expect(await reached(url([hostOf(primary), hostOf(standby)], attrs))).toEqual({
        port: standby.port,
        standby: true,
      });
    }
  });

  it("prefer-standby takes a standby when one answers, else the primary", async () => {
    const { primary, standby } = set;
    expect((await reached(url([hostOf(primary), hostOf(standby)], "prefer-standby"))).port).toBe(standby.port);
    expect(await reached(url([`127.0.0.1:${deadPort}`, hostOf(primary)], "prefer-standby"))).toEqual({
      port: primary.port,
      standby: false,
    });
  });

  it("any (the default) takes the first host that answers: a refused host is skipped", async () => {
    const { primary, standby } = set;
    expect((await reached(url([`127.0.0.1:${deadPort}`, hostOf(standby), hostOf(primary)]))).port).toBe(standby.port);
  });

  it("a single host with target_session_attrs is checked: a standby named as read-write is refused", async () => {
    const error = await reached(url([hostOf(set.standby)], "read-write")).catch((e) => e);
    expect(error).toBeInstanceOf(Error);
    expect(error.message).toContain(`127.0.0.1:${set.standby.port}: session is read-only`);
  });

  it("when no host fits, the error names every host and why, with a code the worker retries (08001)", async () => {
    const error = await reached(url([`127.0.0.1:${deadPort}`, hostOf(set.standby)], "read-write")).catch((e) => e);
    expect(error.code).toBe("08001");
    expect(isUnavailable(error)).toBe(true);
    expect(error.message).toContain(`127.0.0.1:${deadPort}: ECONNREFUSED`);
    expect(error.message).toContain(`127.0.0.1:${set.standby.port}: session is read-only`);
    // Every host refused: the socket code they shared, as a single-host connect would report it.
    const refused = await reached(url([`127.0.0.1:${deadPort}`, `127.0.0.1:${deadPort}`], "read-write")).catch(
      (e) => e,
    );
    expect(refused.code).toBe("ECONNREFUSED");
  });

  it("a role with nothing but LOGIN is checked like any other (the check needs no privilege)", async () => {
    const { primary, standby } = set;
    await primary.query("DROP ROLE IF EXISTS bare; CREATE ROLE bare LOGIN");
    await caughtUp(primary, standby);
    const hosts = [hostOf(standby), hostOf(primary)];
    const got = await reached(url(hosts, "read-write").replace("postgres@", "bare@"));
    expect(got.port).toBe(primary.port);
  });

  it("a host that never answers costs its connect_timeout, then the next host is tried", async () => {
    // A listening socket that accepts and never speaks: the startup packet gets no answer.
    const net = await import("node:net");
    const sockets: import("node:net").Socket[] = [];
    const silent = net.createServer((socket) => sockets.push(socket));
    await new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve));
    const port = (silent.address() as { port: number }).port;
    try {
      const startedAt = Date.now();
      const got = await reached(`${url([`127.0.0.1:${port}`, hostOf(set.primary)], "read-write")}&connect_timeout=2`);
      expect(got.port).toBe(set.primary.port);
      expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1900);
      expect(Date.now() - startedAt).toBeLessThan(5000);
    } finally {
      for (const s of sockets) s.destroy();
      silent.close();
    }
  });
});

describe("skipq over a multi-host URL", () => {
  it("migrates, enqueues, and a worker (with LISTEN) drains on the primary when the standby is listed first", async () => {
    const { primary, standby } = set;
    const connectionString = url([hostOf(standby), hostOf(primary)], "read-write");
    const skipq = new Skipq({ connectionString, schema: "multihost", logger: silentLogger });
    try {
      await skipq.migrate();
      const worker = skipq.worker({ pollInterval: "30s" });
      const done: string[] = [];
      worker.register("k", async (_p, ctx) => {
        done.push(ctx.job.id);
      });
      await worker.start();
      await until("the listener connected", () => worker.listener?.connected);
      const job = await skipq.enqueue("k", {});
      // Woken by the notification (the poll is 30 s away).
      await until("the job ran", () => done.includes(job.id), 10_000);
      // Bulk enqueue's COPY path rides the same chosen connection.
      await skipq.enqueueMany(
        Array.from({ length: 500 }, () => ({ job: "k", payload: {} })),
        { returning: false },
      );
      await until("the copied jobs ran", () => done.length === 501, 10_000);
      await worker.stop();
      const { rows } = await primary.query(
        `SELECT count(*)::int AS n FROM multihost.all_jobs WHERE status = 'completed'`,
      );
      expect(rows[0]?.n).toBe(501);
    } finally {
      await skipq.close();
    }
  });

  it("the CLI migrates through a multi-host URL (node-postgres alone: Invalid URL)", async () => {
    const connectionString = url([hostOf(set.standby), hostOf(set.primary)], "read-write");
    const result = await run(["migrate"], { DATABASE_URL: connectionString, SKIPQ_SCHEMA: "multihost_cli" });
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
    expect(() => new pg.Client({ connectionString })).toThrow(/Invalid URL/);
  });

  it("a malformed host list is a ValidationError at construction, and the CLI says what to fix", async () => {
    for (const bad of [
      "postgres://postgres@h1:5432,,h2/db",
      "postgres://postgres@h1:99999,h2/db",
      "postgres://postgres@h1,h2/db?target_session_attrs=master",
    ]) {
      expect(() => new Skipq({ connectionString: bad, logger: silentLogger })).toThrow(ValidationError);
      expect(() => createPool(bad, 1, silentLogger, "t")).toThrow(ValidationError);
    }
    const result = await run(["migrate"], { DATABASE_URL: "postgres://postgres@h1:5432,,h2/db" });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toMatch(/host 2 of 3 in the connection string is empty/);
  });

  it("the CLI names every host of a list it cannot reach", async () => {
    const hosts = [`127.0.0.1:${deadPort}`, `127.0.0.1:${deadPort}`];
    const result = await run(["stats"], { DATABASE_URL: url(hosts, "read-write") });
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(
      `cannot reach PostgreSQL at 127.0.0.1:${deadPort}, 127.0.0.1:${deadPort} (target_session_attrs=read-write) (ECONNREFUSED)`,
    );
  });
});

describe("after a failover", () => {
  it("new connections find the promoted standby; a pooled connection whose server turned read-only is dropped; the listener moves", async () => {
    const { primary, standby } = set;
    const connectionString = url([hostOf(primary), hostOf(standby)], "read-write");
    const pool = createPool(connectionString, 2, silentLogger, "failover-test");
    const notified: string[] = [];
    const listener = new Listener({
      connectionString,
      channel: "failover_test",
      logger: silentLogger,
      onNotify: (m) => notified.push(m),
      pingIntervalMs: 60_000,
    });
    try {
      await pool.query("CREATE TABLE IF NOT EXISTS failover_probe (n int)");
      const before = await pool.query("SELECT inet_server_port() AS port");
      expect(before.rows[0].port).toBe(primary.port);
      await listener.start();
      expect(listener.connected).toBe(true);
      await caughtUp(primary, standby);

      // The failover: the old primary fenced read-only (it stays up), the standby promoted.
      await primary.query("ALTER SYSTEM SET default_transaction_read_only = on");
      await primary.query("SELECT pg_reload_conf()");
      await standby.promote();

      // The idle pooled connection still sits on the old primary: its next statement runs there read-only,
      // and the server's report (default_transaction_read_only) marks it unfit, so the pool drops it.
      expect(pool.totalCount).toBe(1);
      const stale = await pool.query("SELECT inet_server_port() AS port");
      expect(stale.rows[0].port).toBe(primary.port);
      expect(pool.totalCount).toBe(0);
      // The next statement opens a connection, which skips the read-only old primary.
      const write = await pool.query("INSERT INTO failover_probe VALUES (1) RETURNING inet_server_port() AS port");
      expect(write.rows[0].port).toBe(standby.port);
      const { rows } = await pool.query("SELECT inet_server_port() AS port, pg_is_in_recovery() AS standby");
      expect(rows[0]).toEqual({ port: standby.port, standby: false });
      // A connection opened to the old primary directly (no choice) cannot write there: 25006, retried as unavailable.
      const direct = await primary.query("INSERT INTO failover_probe VALUES (2)").catch((e) => e);
      expect(direct.code).toBe("25006");
      expect(isUnavailable(direct)).toBe(true);

      // The listener's connection saw the same report at its next statement (a ping): it reconnects to the new
      // primary and hears notifications sent there.
      await (listener as unknown as { client: pg.Client }).client.query("SELECT 1");
      await until("the listener on the new primary", async () => {
        if (!listener.connected) return false;
        const pid = listener.backendPid;
        const r = await standby.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1", [pid]);
        return r.rows[0]?.n === 1;
      });
      await standby.query("SELECT pg_notify('failover_test', 'after')");
      await until("a notification from the new primary", () => notified.includes("after"));
    } finally {
      await listener.stop();
      await pool.end();
    }
  });

  it("a TargetClient reports the host it reached", async () => {
    const client = new TargetClient({ connectionString: url([`127.0.0.1:${deadPort}`, hostOf(set.standby)]) });
    await client.connect();
    expect(client.server).toEqual({ host: "127.0.0.1", port: set.standby.port });
    expect(client.port).toBe(set.standby.port);
    await client.end();
  });
});
