/**
 * The least-privilege roles of docs/security.md, as the docs show them: the
 * two SQL blocks there run here verbatim (role, schema and database names
 * swapped for this test's), then every protocol function, every enqueue option
 * and a TypeScript worker with its maintainer run through the roles they made.
 * And the audit: no SECURITY DEFINER function of the schema is executable by
 * PUBLIC.
 */
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { migrate } from "../../src/db/migrate.js";
import { Admin, defineJob, Pruner, RetryIn, Skipq, silentLogger, type Worker } from "../../src/index.js";
import { DATABASE_URL, schemaName, until } from "../helpers.js";

const suffix = randomBytes(3).toString("hex");
const roles = {
  skipq_owner: `rq_owner_${suffix}`,
  app: `rq_app_${suffix}`,
  py_worker: `rq_py_${suffix}`,
  worker: `rq_worker_${suffix}`,
};
const schema = schemaName("roles");
const admin = new pg.Pool({ connectionString: DATABASE_URL, max: 2 });

/** The SQL blocks of docs/security.md's least-privilege layout, with this test's names. */
function documentedBlocks(database: string): string[] {
  const docs = readFileSync(new URL("../../docs/security.md", import.meta.url), "utf8");
  const section = docs.slice(docs.indexOf("A least-privilege layout"));
  const blocks = [...section.matchAll(/```sql\n([\s\S]*?)```/g)].slice(0, 2).map((m) => m[1] as string);
  return blocks.map((b) =>
    b
      .replace(/\bskipq\.(?=\w)/g, `"${schema}".`)
      .replace(/\bSCHEMA skipq\b/g, `SCHEMA "${schema}"`)
      .replace(/\bapp_db\b/g, `"${database}"`)
      .replace(/\b(skipq_owner|app|py_worker|worker)\b/g, (name) => roles[name as keyof typeof roles]),
  );
}

function urlOf(role: string): string {
  const url = new URL(DATABASE_URL);
  url.username = role;
  url.password = "";
  return url.toString();
}

const clients: Array<{ close(): Promise<void> }> = [];
const pools: pg.Pool[] = [];
function pool(role: string): pg.Pool {
  const p = new pg.Pool({ connectionString: urlOf(role), max: 4 });
  pools.push(p);
  return p;
}
function client(role: string): Skipq {
  const c = new Skipq({ connectionString: urlOf(role), schema, logger: silentLogger });
  clients.push(c);
  return c;
}

let owner: Skipq;
beforeAll(async () => {
  const { rows } = await admin.query("SELECT current_database() AS db");
  const [asSuperuser, asOwner] = documentedBlocks(rows[0].db);
  expect(asSuperuser).toContain("CREATE ROLE");
  await admin.query(asSuperuser as string);
  owner = client(roles.skipq_owner);
  await owner.migrate();
  await pool(roles.skipq_owner).query(asOwner as string);
});

afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
  await Promise.all(pools.map((p) => p.end()));
  await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  const { rows } = await admin.query("SELECT current_database() AS db");
  for (const role of Object.values(roles)) {
    await admin.query(`DROP OWNED BY ${role} CASCADE`).catch(() => undefined);
    await admin.query(`REVOKE ALL ON DATABASE "${rows[0].db}" FROM ${role}`).catch(() => undefined);
    await admin.query(`DROP ROLE IF EXISTS ${role}`);
  }
  await admin.end();
});

const s = () => `"${schema}"`;
const task = defineJob<{ n?: number; fail?: boolean; snooze?: boolean }>("task");

async function statusOf(id: string): Promise<string | undefined> {
  const { rows } = await admin.query(`SELECT status FROM ${s()}.all_jobs WHERE id = $1`, [id]);
  return rows[0]?.status;
}

describe("as the documented roles", () => {
  test("a producer enqueues with every option: plain, keyed, unique, debounced, dependsOn, many, in its own transaction, and by plain SQL", async () => {
    const app = client(roles.app);
    const plain = await app.enqueue(task, {}, { queue: "app" });
    const keyed = await app.enqueue(task, {}, { queue: "app", idempotencyKey: "k1" });
    expect(await app.enqueue(task, {}, { queue: "app", idempotencyKey: "k1" })).toEqual({
      id: keyed.id,
      created: false,
    });
    const unique = await app.enqueue(task, {}, { queue: "app", unique: { key: "u1", period: "1h" } });
    expect((await app.enqueue(task, {}, { queue: "app", unique: { key: "u1", period: "1h" } })).id).toBe(unique.id);
    const debounced = await app.enqueue(task, { n: 1 }, { queue: "app", debounce: { key: "d1", delay: "1h" } });
    expect((await app.enqueue(task, { n: 2 }, { queue: "app", debounce: { key: "d1", delay: "1h" } })).id).toBe(
      debounced.id,
    );
    const child = await app.enqueue(task, {}, { queue: "app", dependsOn: [plain.id] });
    const many = await app.enqueueMany([
      { job: task, payload: {}, queue: "app" },
      { job: task, payload: {}, queue: "app", idempotencyKey: "k2" },
    ]);
    expect((await app.enqueueMany([{ job: task, payload: {}, queue: "app" }], { returning: false })).count).toBe(1);
    expect(many).toHaveLength(2);
    const db = pool(roles.app);
    const tx = await db.connect();
    try {
      await tx.query("BEGIN");
      await app.enqueueTx(tx, task, {}, { queue: "app" });
      await tx.query("COMMIT");
    } finally {
      tx.release();
    }
    await db.query(`INSERT INTO ${s()}.jobs (kind, payload, queue) VALUES ('task', '{}', 'app')`);
    const { rows } = await admin.query(
      `SELECT status, count(*)::int AS n FROM ${s()}.jobs WHERE queue = 'app' GROUP BY status ORDER BY status`,
    );
    expect(rows).toEqual([
      { status: "pending", n: 9 },
      { status: "waiting", n: 1 },
    ]);
    expect(await statusOf(child.id)).toBe("waiting");
  });

  test("a protocol worker claims a fair, rate-limited queue round robin across its keys through its grants", async () => {
    const py = pool(roles.py_worker);
    await new Admin(owner).setQueueLimits("py-fair", { fairness: {}, rate: { limit: 100, window: "1h" } });
    for (const key of ["big", "a", "b"])
      await owner.enqueueMany(
        Array.from({ length: key === "big" ? 20 : 2 }, () => ({
          job: task,
          payload: {},
          queue: "py-fair",
          concurrencyKey: key,
        })),
      );
    const { rows } = await py.query(
      `SELECT c.id, j.concurrency_key AS key FROM ${s()}.skipq_claim(ARRAY['py-fair'], 6, 'py', 30000) c
         JOIN ${s()}.jobs j USING (id)`,
    );
    expect(rows.map((r) => r.key)).toEqual(["a", "b", "big", "a", "b", "big"]);
  });

  test("a protocol worker runs every protocol function: claim, heartbeat, complete with and without a result, fail to retry and to dead, release", async () => {
    const owned = owner;
    const py = pool(roles.py_worker);
    const q = "py";
    const keyed = await owned.enqueue(task, {}, { queue: q, idempotencyKey: "pk", priority: 9 });
    const unique = await owned.enqueue(
      task,
      {},
      { queue: q, unique: { key: "pu", period: "1h" }, priority: 8, maxAttempts: 2 },
    );
    const debounced = await owned.enqueue(task, {}, { queue: q, debounce: { key: "pd", delay: 0 } });
    await until("the debounced job is due", async () => {
      const { rows } = await admin.query(`SELECT run_at <= now() AS due FROM ${s()}.jobs WHERE id = $1`, [
        debounced.id,
      ]);
      return rows[0]?.due === true;
    });
    const parentOk = await owned.enqueue(task, {}, { queue: q, priority: 5 });
    const parentDies = await owned.enqueue(task, {}, { queue: q, priority: 4, maxAttempts: 1 });
    const released = await owned.enqueue(task, {}, { queue: "later" });
    const child = await owned.enqueue(task, {}, { queue: "children", dependsOn: [parentOk.id] });
    const cancelled = await owned.enqueue(task, {}, { queue: "children", dependsOn: [parentDies.id] });
    const runs = await owned.enqueue(
      task,
      {},
      { queue: "children", dependsOn: [parentDies.id], onParentFailure: "run" },
    );

    const claim = async (queue: string, n: number) =>
      (await py.query(`SELECT id::text, lease::text FROM ${s()}.skipq_claim(ARRAY[$1], $2, 'py', 30000)`, [queue, n]))
        .rows;
    const got = await claim(q, 10);
    expect(got.map((r) => r.id)).toEqual([keyed.id, unique.id, parentOk.id, parentDies.id, debounced.id]);
    const lease = new Map(got.map((r) => [r.id, r.lease]));
    const one = async (sql: string, ...args: unknown[]) => (await py.query(sql, args)).rows[0]?.r;

    expect(await one(`SELECT ${s()}.skipq_heartbeat($1, $2, 30000) AS r`, keyed.id, lease.get(keyed.id))).toBe(true);
    expect(await one(`SELECT ${s()}.skipq_complete($1, $2) AS r`, keyed.id, lease.get(keyed.id))).toBe(true);
    expect(await one(`SELECT ${s()}.skipq_complete($1, $2) AS r`, keyed.id, lease.get(keyed.id))).toBe(false);
    expect(await one(`SELECT ${s()}.skipq_fail($1, $2, 'boom', 0) AS r`, unique.id, lease.get(unique.id))).toBe(
      "pending",
    );
    expect(
      await one(`SELECT ${s()}.skipq_complete($1, $2, '{"ok":1}') AS r`, parentOk.id, lease.get(parentOk.id)),
    ).toBe(true);
    expect(await one(`SELECT ${s()}.skipq_fail($1, $2, 'died', 0) AS r`, parentDies.id, lease.get(parentDies.id))).toBe(
      "dead",
    );
    // A newer job of the debounced job's key is pending: the release still puts it back.
    await owned.enqueue(task, {}, { queue: q, debounce: { key: "pd", delay: "1h" } });
    expect(await one(`SELECT ${s()}.skipq_release($1, $2) AS r`, debounced.id, lease.get(debounced.id))).toBe(true);
    const again = await claim(q, 1);
    expect(again.map((r) => r.id)).toEqual([unique.id]);
    expect(await one(`SELECT ${s()}.skipq_fail($1, $2, 'boom again', 0) AS r`, unique.id, again[0]?.lease)).toBe(
      "dead",
    );
    const later = await claim("later", 1);
    expect(await one(`SELECT ${s()}.skipq_release($1, $2) AS r`, released.id, later[0]?.lease)).toBe(true);

    expect(await statusOf(keyed.id)).toBe("completed");
    expect(await statusOf(unique.id)).toBe("dead");
    expect(await statusOf(child.id)).toBe("pending");
    expect(await statusOf(cancelled.id)).toBe("cancelled");
    expect(await statusOf(runs.id)).toBe("pending");
    expect(await statusOf(released.id)).toBe("pending");
    const { rows: keys } = await admin.query(
      `SELECT finished_at IS NOT NULL AS finished FROM ${s()}.job_keys WHERE key = 'pk'`,
    );
    expect(keys).toEqual([{ finished: true }]);
    const { rows: windows } = await admin.query(
      `SELECT finished_at IS NOT NULL AS finished FROM ${s()}.job_unique WHERE key = 'pu'`,
    );
    expect(windows).toEqual([{ finished: true }]);
  });

  test("a TypeScript worker drains every outcome and its maintainer applies retention and reaps", async () => {
    const runtime = client(roles.worker);
    const q = "ts";
    const ids = [
      (await owner.enqueue(task, {}, { queue: q })).id,
      (await owner.enqueue(task, { fail: true }, { queue: q, maxAttempts: 2 })).id,
      (await owner.enqueue(task, { snooze: true }, { queue: q })).id,
      (await owner.enqueue(task, {}, { queue: q, idempotencyKey: "tk" })).id,
      (await owner.enqueue(task, {}, { queue: q, unique: { key: "tu", period: "1h" } })).id,
    ];
    const child = await owner.enqueue(task, {}, { queue: q, dependsOn: [ids[1] as string] });
    // An abandoned claim, for the reaper.
    await admin.query(
      `INSERT INTO ${s()}.jobs (kind, queue, status, attempts, lease, lease_expires_at, locked_by)
       VALUES ('task', $1, 'running', 1, 1, now() - interval '1 second', 'ghost')`,
      [q],
    );
    const snoozed = new Set<string>();
    const w: Worker = runtime
      .worker({ queues: [q], pollInterval: 50, reaperInterval: 100, backoff: { baseMs: 10, maxMs: 10, jitter: 0 } })
      .register(task, async (payload, ctx) => {
        if (payload.fail) throw new Error("fails every time");
        if (payload.snooze && !snoozed.has(ctx.id)) {
          snoozed.add(ctx.id);
          throw new RetryIn(10);
        }
        return ctx.attempt;
      });
    try {
      await w.start();
      await until(
        "every job finished",
        async () => {
          const { rows } = await admin.query(`SELECT count(*)::int AS n FROM ${s()}.jobs WHERE queue = $1`, [q]);
          return rows[0].n === 0;
        },
        20_000,
      );
    } finally {
      await w.stop();
    }
    expect(await Promise.all(ids.map(statusOf))).toEqual(["completed", "dead", "completed", "completed", "completed"]);
    expect(await statusOf(child.id)).toBe("cancelled");
    // Retention as the worker's maintainer runs it: partitions ahead (through the SECURITY DEFINER functions).
    await admin
      .query(`DELETE FROM ${s()}.history_partitions WHERE lower > now() + interval '1 day' RETURNING name`)
      .then(async ({ rows }) => {
        for (const r of rows) await admin.query(`DROP TABLE ${s()}."${r.name}"`);
      });
    const pass = await new Pruner(runtime).runOnce();
    expect(pass.leader).toBe(true);
    const { rows } = await admin.query(
      `SELECT count(*)::int AS n FROM ${s()}.history_partitions WHERE lower > now() + interval '1 day'`,
    );
    expect(rows[0].n).toBeGreaterThan(0);
    // Without EXECUTE on the history functions, retention fails and says what to grant.
    await pool(roles.skipq_owner).query(
      `REVOKE EXECUTE ON FUNCTION ${s()}.skipq_history_partition(text, timestamptz, timestamptz) FROM ${roles.worker}`,
    );
    await admin
      .query(`DELETE FROM ${s()}.history_partitions WHERE lower > now() + interval '1 day' RETURNING name`)
      .then(async ({ rows }) => {
        for (const r of rows) await admin.query(`DROP TABLE ${s()}."${r.name}"`);
      });
    await expect(new Pruner(runtime).runOnce()).rejects.toThrow(/GRANT EXECUTE ON FUNCTION .*skipq_history_partition/);
    await pool(roles.skipq_owner).query(
      `GRANT EXECUTE ON FUNCTION ${s()}.skipq_history_partition(text, timestamptz, timestamptz) TO ${roles.worker}`,
    );
    // The operator's actions through the same role.
    const ops = new Admin(runtime);
    await ops.retryJob(ids[1] as string);
    expect(await statusOf(ids[1] as string)).toBe("pending");
    await ops.cancelJob(ids[1] as string);
    expect(await statusOf(ids[1] as string)).toBe("cancelled");
  });
});

describe("batch handlers as the documented roles", () => {
  test("a batch worker of the worker role claims one batch and records every per-item outcome: completed with results, retried, dead", async () => {
    const runtime = client(roles.worker);
    const q = "batch";
    const ids: string[] = [];
    for (let n = 0; n < 4; n++) ids.push((await owner.enqueue(task, { n }, { queue: q, maxAttempts: 2 })).id);
    const sizes: number[] = [];
    const w: Worker = runtime
      .worker({ queues: [q], maintenance: false, listen: false })
      .registerBatch(task, { size: 10 }, async (jobs) => {
        sizes.push(jobs.length);
        (jobs[1] as (typeof jobs)[0]).retry("1h");
        (jobs[2] as (typeof jobs)[0]).fail(new Error("item failed"));
        return jobs.map((j) => (j.payload.n === 3 ? new Error("result failed") : { n: j.payload.n }));
      });
    try {
      expect(await w.runOnce()).toBe(4);
    } finally {
      await w.stop();
    }
    expect(sizes).toEqual([4]);
    expect(await Promise.all(ids.map(statusOf))).toEqual(["completed", "pending", "pending", "pending"]);
    const { rows } = await admin.query(`SELECT result FROM ${s()}.all_jobs WHERE id = $1`, [ids[0]]);
    expect(rows[0].result).toEqual({ n: 0 });
  });
});

describe("ctx.completeTx as the documented roles", () => {
  test("a completion in a transaction of the protocol worker's role commits with it; a producer-only role's is refused and the handler's outcome applies", async () => {
    const runtime = client(roles.worker);
    const q = "tx";
    const viaWorker = await owner.enqueue(task, { n: 1 }, { queue: q });
    const child = await owner.enqueue(task, {}, { queue: "tx-children", dependsOn: [viaWorker.id] });
    const viaApp = await owner.enqueue(task, { n: 2 }, { queue: q });
    const refused: unknown[] = [];
    const w: Worker = runtime
      .worker({ queues: [q], maintenance: false, listen: false })
      .register(task, async (payload, ctx) => {
        // n 1: the caller's transaction runs as py_worker (the protocol worker's grants); n 2: as app (enqueue only).
        const tx = await pool(payload.n === 1 ? roles.py_worker : roles.app).connect();
        try {
          await tx.query("BEGIN");
          await ctx.completeTx(tx, { role: payload.n });
          await tx.query("COMMIT");
        } catch (error) {
          refused.push(error);
          await tx.query("ROLLBACK");
        } finally {
          tx.release();
        }
        return "handler";
      });
    try {
      expect(await w.runOnce()).toBe(2);
    } finally {
      await w.stop();
    }
    const { rows } = await admin.query(`SELECT id::text, status, result FROM ${s()}.all_jobs WHERE id = ANY ($1)`, [
      [viaWorker.id, viaApp.id],
    ]);
    expect(Object.fromEntries(rows.map((r) => [r.id, [r.status, r.result]]))).toEqual({
      [viaWorker.id]: ["completed", { role: 1 }],
      [viaApp.id]: ["completed", "handler"],
    });
    expect(refused).toHaveLength(1);
    expect(refused[0]).toMatchObject({ code: "42501" });
    expect(await statusOf(child.id)).toBe("pending");
  });
});

test("no SECURITY DEFINER function of the schema is executable by PUBLIC", async () => {
  const { rows } = await admin.query(
    `SELECT p.oid::regprocedure::text AS fn,
            EXISTS (SELECT 1 FROM aclexplode(COALESCE(p.proacl, acldefault('f', p.proowner))) a
                     WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE') AS public
       FROM pg_proc p WHERE p.pronamespace = $1::regnamespace AND p.prosecdef ORDER BY 1`,
    [schema],
  );
  expect(rows.length).toBeGreaterThanOrEqual(5);
  expect(rows.filter((r) => r.public).map((r) => r.fn)).toEqual([]);
});

test("an upgrade keeps what roles could do: workers keep retention's functions, producers dependsOn's, and nobody else gets them", async () => {
  const old = schemaName("roles_upgrade");
  const db = new pg.Pool({ connectionString: DATABASE_URL, max: 1 });
  try {
    await migrate(db, old, 17);
    const q = `"${old}"`;
    // The grants the docs showed before 0018: PUBLIC's EXECUTE was enough.
    await db.query(`GRANT USAGE ON SCHEMA ${q} TO ${roles.worker}, ${roles.app}, ${roles.py_worker}`);
    await db.query(`GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA ${q} TO ${roles.worker}`);
    await db.query(`GRANT INSERT ON ${q}.jobs TO ${roles.app}`);
    await migrate(db, old);
    const { rows } = await db.query(
      `SELECT r AS role, f AS fn, has_function_privilege(r, format('%s.%s', $1::text, f), 'EXECUTE') AS can
         FROM unnest($2::text[]) AS r, unnest(ARRAY['skipq_history_drop(text,timestamptz)', 'skipq_link(bigint[],bigint[])']) AS f
        ORDER BY 1, 2`,
      [q, [roles.app, roles.py_worker, roles.worker]],
    );
    expect(rows.map((r) => `${r.role.replace(suffix, "x")} ${r.fn.split("(")[0]} ${r.can}`)).toEqual([
      "rq_app_x skipq_history_drop false",
      "rq_app_x skipq_link true",
      "rq_py_x skipq_history_drop false",
      "rq_py_x skipq_link false",
      "rq_worker_x skipq_history_drop true",
      "rq_worker_x skipq_link true",
    ]);
  } finally {
    await db.query(`DROP SCHEMA IF EXISTS "${old}" CASCADE`);
    await db.end();
  }
});
