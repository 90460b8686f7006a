/**
 * Connection economy through PgBouncer (issue 17): a hundred worker
 * processes (concurrency 10 each) against a PostgreSQL with
 * max_connections = 100, every pool going through PgBouncer in transaction
 * mode; and what a process sees when the server's connection budget is spent.
 *
 * Invariants checked: every job completes exactly once with no connection
 * error in any process and no deadlock detected by the server, while the server never holds more connections than
 * PgBouncer's pool plus the test's own; a direct LISTEN connection refused by
 * a full server (53300) costs only wake-ups: the process logs why, keeps
 * reconnecting, and drains by polling through PgBouncer meanwhile.
 */
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Skipq, silentLogger } from "../../src/index.js";
import { type Bouncer, startBouncer } from "../chaos/bouncer.js";
import { type ChaosQueue, enqueueChaos, recordResult, until } from "../chaos/harness.js";
import { type DrainChild, type DrainChildReport, spawnDrainChild } from "./children.js";
import { fleetSuite } from "./fleet.js";

const MAX_CONNECTIONS = 100;
const SERVER_POOL = 40;
const suite = fleetSuite(0, { max_connections: String(MAX_CONNECTIONS) });
let bouncer: Bouncer | undefined;

beforeAll(async () => {
  bouncer = await startBouncer(suite.server.port, {
    default_pool_size: SERVER_POOL,
    max_db_connections: SERVER_POOL,
    max_client_conn: 2000,
    // skipq's sessionSettings cannot pass PgBouncer 1.18: the same protections are set here, on the pooler.
    tcp_user_timeout: 10_000,
    tcp_keepalive: 1,
    tcp_keepidle: 10,
    tcp_keepintvl: 5,
    tcp_keepcnt: 3,
    idle_transaction_timeout: 60,
  });
});

afterAll(async () => {
  await bouncer?.stop();
});

/** Client backends on the server now (PgBouncer's, the test's, any direct LISTEN). */
async function serverConnections(db: pg.Pool): Promise<number> {
  const { rows } = await db.query(
    "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'",
  );
  return rows[0].n;
}

/** Deadlocks PostgreSQL has detected in the current database since its statistics were last reset. */
async function deadlocks(db: pg.Pool): Promise<number> {
  const { rows } = await db.query(
    "SELECT deadlocks::int AS n FROM pg_stat_database WHERE datname = current_database()",
  );
  return rows[0].n;
}

async function completed(q: ChaosQueue): Promise<{ done: number; attempts: number }> {
  const { rows } = await q.db.query(
    `SELECT count(*)::int AS done, coalesce(sum(attempts), 0)::int AS attempts FROM "${q.schema}".all_jobs
      WHERE kind = 'chaos' AND status = 'completed'`,
  );
  return rows[0];
}

function throughBouncer(q: ChaosQueue, worker: Record<string, unknown>): Record<string, unknown> {
  return {
    url: bouncer?.url,
    schema: q.schema,
    preparedStatements: false,
    sessionSettings: false,
    worker: { concurrency: 10, pollInterval: "1s", ...worker },
  };
}

describe("fleet through PgBouncer", () => {
  it("100 worker processes (concurrency 10) drain through PgBouncer in transaction mode against max_connections = 100 with no connection error", async () => {
    const q = await suite.queue("bouncer-100");
    const processes = 100;
    const jobs = 20_000;
    const children: DrainChild[] = [];
    let peak = 0;
    const sampler = setInterval(() => {
      void serverConnections(q.db).then(
        (n) => {
          peak = Math.max(peak, n);
        },
        () => undefined,
      );
    }, 100);
    try {
      const deadlocksBefore = await deadlocks(q.db);
      const spawnStarted = Date.now();
      // Polling only: a direct LISTEN per process would need 100 server connections of its own (see below).
      for (let i = 0; i < processes; i += 20) {
        const batch = Array.from({ length: 20 }, () => spawnDrainChild(throughBouncer(q, { listen: false })));
        children.push(...batch);
        await Promise.all(batch.map((c) => c.ready));
      }
      const spawnMs = Date.now() - spawnStarted;
      const started = Date.now();
      await enqueueChaos(q, jobs, { ms: 5 });
      // Bounds for a hang, not for speed: 100 processes on two shared cores take minutes when the machine is busy.
      await until("every job completed", async () => (await completed(q)).done === jobs, 300_000, 100);
      const drainMs = Date.now() - started;
      const reports: DrainChildReport[] = await Promise.all(children.map((c) => c.stop()));
      clearInterval(sampler);
      const { attempts } = await completed(q);
      const errors = reports.flatMap((r) => r.errors ?? []);
      const logged = reports.flatMap((r) => r.logged ?? []);
      // Outcome batches against the maintainer's partition work (issue 21): none may deadlock, even retried.
      // A worker's retried batch logs a warning (so `logged` catches it at once); the server's counter also
      // sees the maintainer's side, though an idle backend may report it up to 10 s late (never falsely).
      const deadlocked = (await deadlocks(q.db)) - deadlocksBefore;
      const busy = reports.filter((r) => (r.stats?.completed ?? 0) > 0).length;
      recordResult({
        row: "N4",
        title: `fleet: ${processes} worker processes × concurrency 10 through PgBouncer 1.18 (transaction mode, server pool ${SERVER_POOL}) against max_connections = ${MAX_CONNECTIONS}; ${jobs.toLocaleString("en")} jobs of 5 ms; polling (no LISTEN)`,
        config:
          "pool 5 per process (client pool 1, lazily opened); preparedStatements false; sessionSettings false (timeouts on PgBouncer); poll 1 s",
        lost: jobs - (await completed(q)).done,
        duplicates: attempts - jobs,
        other: `${processes} processes started in ${(spawnMs / 1000).toFixed(1)} s; drain ${(drainMs / 1000).toFixed(1)} s (${Math.round(jobs / (drainMs / 1000))} jobs/s); processes that ran jobs: ${busy}/${processes}; peak server connections ${peak} (PgBouncer pool ${SERVER_POOL} + the test's own); connection errors in the workers: ${errors.length}; warnings logged: ${logged.length}; deadlocks (40P01) detected by the server: ${deadlocked}`,
      });
      expect(errors).toEqual([]);
      expect(logged).toEqual([]);
      expect(attempts).toBe(jobs);
      expect(deadlocked).toBe(0);
      expect(peak).toBeLessThan(MAX_CONNECTIONS);
    } finally {
      clearInterval(sampler);
    }
  }, 420_000);

  it("a server out of connections refuses a process's direct LISTEN with 53300 'sorry, too many clients already': the process logs it, and drains by polling through PgBouncer meanwhile", async () => {
    const q = await suite.queue("bouncer-full");
    // Warm PgBouncer's server pool, so its connections exist before the server fills up.
    const warm = spawnDrainChild(throughBouncer(q, { listen: false }));
    await warm.ready;
    await enqueueChaos(q, 2000, { ms: 1 });
    await until("the warm-up drained", async () => (await completed(q)).done === 2000, 60_000, 50);
    // Take every connection the server has left (superuser_reserved_connections stay reserved for superusers,
    // which the test's role is: so fill those too).
    const hogs: pg.Client[] = [];
    let refusal: { code?: string; message: string } | undefined;
    try {
      while (!refusal && hogs.length < MAX_CONNECTIONS) {
        const c = new pg.Client({ connectionString: suite.server.url });
        c.on("error", () => undefined);
        try {
          await c.connect();
          hogs.push(c);
        } catch (error) {
          refusal = { code: (error as { code?: string }).code, message: (error as Error).message };
        }
      }
      expect(refusal?.code).toBe("53300");
      const child = spawnDrainChild({
        ...throughBouncer(q, {}),
        worker: { concurrency: 10, pollInterval: "200ms", listenConnectionString: suite.server.url },
      });
      const ready = await child.ready;
      expect(ready.listening).toBe(false);
      await enqueueChaos(q, 1000, { ms: 1 });
      await until("the process drained by polling", async () => (await completed(q)).done === 3000, 60_000, 50);
      const report = await child.stop();
      await warm.stop();
      const listenerErrors = (report.logged ?? []).filter((l) => l.msg?.includes("listener"));
      recordResult({
        row: "N5",
        title:
          "fleet: the server's connection budget exceeded — a process's direct LISTEN refused, its pool through PgBouncer still served",
        config: `max_connections ${MAX_CONNECTIONS}, every slot taken by idle connections; PgBouncer's server pool already open`,
        lost: 0,
        duplicates: 0,
        other: `the process logs: "${listenerErrors[0]?.msg}" with err ${listenerErrors[0]?.code} "${listenerErrors[0]?.error}"; claims and outcomes errors: ${(report.errors ?? []).length}; 1,000 jobs drained by polling (200 ms)`,
      });
      expect(listenerErrors[0]?.code).toBe("53300");
      expect(listenerErrors[0]?.error).toMatch(/too many clients/);
      expect(report.errors).toEqual([]);
    } finally {
      await Promise.all(hogs.map((c) => c.end().catch(() => undefined)));
    }
  });

  it("what a process is told at the pooler's limits: its startup options refused (08P01, with what to do), a busy server pool (query_wait_timeout), a full client table (max_client_conn)", async () => {
    const q = await suite.queue("bouncer-limits");
    const small = await startBouncer(suite.server.port, {
      default_pool_size: 1,
      max_db_connections: 1,
      max_client_conn: 3,
      query_wait_timeout: 1,
    });
    const clients: pg.Client[] = [];
    const seen: Record<string, string> = {};
    const failure = async (what: string, attempt: () => Promise<unknown>) => {
      const error = await attempt().then(
        () => undefined,
        (e: unknown) => e as { code?: string; message: string },
      );
      seen[what] = `${error?.code ?? "no code"}: ${error?.message}`;
      return error;
    };
    try {
      // 1. skipq's default session settings through PgBouncer 1.18.
      const withOptions = new Skipq({ connectionString: small.url, schema: q.schema, logger: silentLogger });
      const refused = await failure("options", () => withOptions.pool.query("SELECT 1"));
      await withOptions.close();
      expect(refused?.code).toBe("08P01");
      expect(refused?.message).toMatch(/unsupported startup parameter: options .*sessionSettings: false/);
      // 2. The one server connection held by an open transaction: the next query waits, then fails.
      const holder = new pg.Client({ connectionString: small.url });
      holder.on("error", () => undefined);
      await holder.connect();
      clients.push(holder);
      await holder.query("BEGIN");
      await holder.query("SELECT 1");
      const waiter = new pg.Client({ connectionString: small.url });
      waiter.on("error", () => undefined);
      await waiter.connect();
      clients.push(waiter);
      const waited = await failure("query_wait_timeout", () => waiter.query("SELECT 1"));
      expect(waited?.message).toMatch(/query_wait_timeout/);
      // 3. max_client_conn = 3 (PgBouncer closed the waiter above): clients beyond the third are turned away.
      let turnedAway: { code?: string; message: string } | undefined;
      for (let i = 0; i < 4 && !turnedAway; i++) {
        const c = new pg.Client({ connectionString: small.url });
        c.on("error", () => undefined);
        clients.push(c);
        turnedAway = await failure("max_client_conn", () => c.connect());
      }
      expect(turnedAway?.message).toMatch(/max_client_conn/);
      recordResult({
        row: "N6",
        title: "fleet: what a process is told at PgBouncer's limits (1.18, transaction mode)",
        config: "default_pool_size 1, max_client_conn 3, query_wait_timeout 1 s",
        lost: 0,
        duplicates: 0,
        other: `startup options refused: ${seen.options}; server pool busy past query_wait_timeout: ${seen.query_wait_timeout}; client table full: ${seen.max_client_conn}`,
      });
    } finally {
      await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
      await small.stop();
    }
  });
});
