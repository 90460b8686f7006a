import { execFile } from "node:child_process";
import { existsSync, mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { beforeAll, describe, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { clearJobs, DATABASE_URL, useTestQueue } from "../helpers.js";
import { absentService } from "../outbox/helpers.js";

const run = promisify(execFile);
const PYTHON = "/usr/bin/python3";
const GOPATH = "/usr/share/gocode";

async function works(file: string, args: string[]): Promise<boolean> {
  try {
    await run(file, args, { timeout: 20_000 });
    return true;
  } catch {
    return false;
  }
}

const pythonReady = await works(PYTHON, ["-c", "import asyncpg"]);
const goReady = (await works("go", ["version"])) && existsSync(`${GOPATH}/src/github.com/jackc/pgx/v4`);

const t = useTestQueue("protocol");

/** Claim one job through the SQL protocol, as any language would. */
async function claimOne(worker: string): Promise<{ id: string; lease: string }> {
  const { rows } = await t.db.query(`SELECT id, lease FROM "${t.schema}".skipq_claim(ARRAY['poly'], 1, $1, 30000)`, [
    worker,
  ]);
  expect(rows).toHaveLength(1);
  return rows[0];
}

describe("the SQL protocol functions", () => {
  test("skipq_claim takes jobs in the TypeScript claim's order and skips paused queues", async () => {
    await clearJobs(t.db, t.schema);
    const low = await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly", priority: 0 });
    const high = await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly", priority: 5 });
    await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly-paused", priority: 9 });
    const admin = new Admin(t.skipq);
    await admin.pauseQueue("poly-paused");
    const { rows } = await t.db.query(
      `SELECT id, attempts, lease IS NOT NULL AS leased FROM "${t.schema}".skipq_claim(ARRAY['poly', 'poly-paused'], 10, 'sql', 30000)`,
    );
    expect(rows).toEqual([
      { id: high.id, attempts: 1, leased: true },
      { id: low.id, attempts: 1, leased: true },
    ]);
    const status = await t.db.query(`SELECT locked_by, status FROM "${t.schema}".all_jobs WHERE id = $1`, [high.id]);
    expect(status.rows[0]).toEqual({ locked_by: "sql", status: "running" });
  });

  test("a stale lease is rejected by skipq_complete, skipq_fail and skipq_heartbeat, as by the TypeScript statements", async () => {
    await clearJobs(t.db, t.schema);
    await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly" });
    const first = await claimOne("old");
    // The old holder's lease expires and the job is claimed again (reaper-free: back-dated and re-queued).
    await t.db.query(`UPDATE "${t.schema}".jobs SET status = 'pending', lease = NULL, lease_expires_at = NULL`);
    const second = await claimOne("new");
    expect(second.lease).not.toBe(first.lease);
    const sql = await t.db.query(
      `SELECT "${t.schema}".skipq_complete($1, $2) AS c, "${t.schema}".skipq_fail($1, $2, 'x', 0) AS f,
              "${t.schema}".skipq_heartbeat($1, $2, 1000) AS h`,
      [first.id, first.lease],
    );
    expect(sql.rows[0]).toEqual({ c: false, f: null, h: false });
    const ts = await t.db.query(t.skipq.store.sql.jobs.jobCompleteMany.text, [[first.id], [first.lease]]);
    expect(ts.rowCount).toBe(0);
    expect(
      (await t.db.query(`SELECT status, lease FROM "${t.schema}".all_jobs WHERE id = $1`, [first.id])).rows[0],
    ).toEqual({ status: "running", lease: second.lease });
    const ok = await t.db.query(`SELECT "${t.schema}".skipq_complete($1, $2) AS c`, [second.id, second.lease]);
    expect(ok.rows[0].c).toBe(true);
  });

  test("skipq_complete inside the caller's transaction completes the job when it commits and not at all when it rolls back", async () => {
    await clearJobs(t.db, t.schema);
    await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly" });
    const a = await claimOne("tx");
    const client = await t.db.connect();
    const status = async () =>
      (await t.db.query(`SELECT status, result FROM "${t.schema}".all_jobs WHERE id = $1`, [a.id])).rows[0];
    try {
      await client.query("BEGIN");
      const inside = await client.query(`SELECT "${t.schema}".skipq_complete($1, $2, '{"n": 1}') AS c`, [
        a.id,
        a.lease,
      ]);
      expect(inside.rows[0].c).toBe(true);
      expect(await status()).toEqual({ status: "running", result: null }); // not visible before the commit
      await client.query("ROLLBACK");
      expect(await status()).toEqual({ status: "running", result: null });
      await client.query("BEGIN");
      await client.query(`SELECT "${t.schema}".skipq_complete($1, $2, '{"n": 2}')`, [a.id, a.lease]);
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    expect(await status()).toEqual({ status: "completed", result: { n: 2 } });
  });

  test("skipq_release puts a job back without counting the attempt, and only under its lease", async () => {
    await clearJobs(t.db, t.schema);
    await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly" });
    const a = await claimOne("w");
    const stale = await t.db.query(`SELECT "${t.schema}".skipq_release($1, $2) AS r`, [
      a.id,
      String(BigInt(a.lease) + 1n),
    ]);
    expect(stale.rows[0].r).toBe(false);
    const ok = await t.db.query(`SELECT "${t.schema}".skipq_release($1, $2) AS r`, [a.id, a.lease]);
    expect(ok.rows[0].r).toBe(true);
    const row = await t.db.query(`SELECT status, attempts, lease FROM "${t.schema}".all_jobs`);
    expect(row.rows[0]).toEqual({ status: "pending", attempts: 0, lease: null });
  });

  test("skipq_fail retries with a delay, then buries the job when attempts are used up", async () => {
    await clearJobs(t.db, t.schema);
    await t.skipq.enqueue("polyglot.fail", {}, { queue: "poly", maxAttempts: 2 });
    const a = await claimOne("w");
    const retry = await t.db.query(`SELECT "${t.schema}".skipq_fail($1, $2, 'boom', 0) AS s`, [a.id, a.lease]);
    expect(retry.rows[0].s).toBe("pending");
    const b = await claimOne("w");
    const dead = await t.db.query(`SELECT "${t.schema}".skipq_fail($1, $2, 'boom', 0) AS s`, [b.id, b.lease]);
    expect(dead.rows[0].s).toBe("dead");
  });
});

const psqlReady = await works("psql", ["--version"]);

if (psqlReady) {
  describe("the protocol from psql", () => {
    test("examples/protocol.sql enqueues, claims, heartbeats and completes a job; a repeat outcome is refused", async () => {
      await clearJobs(t.db, t.schema);
      const { stdout } = await run(
        "psql",
        ["-X", "-q", "-v", "ON_ERROR_STOP=1", DATABASE_URL, "-f", "examples/protocol.sql"],
        {
          env: { ...process.env, PGOPTIONS: `-csearch_path=${t.schema}` },
        },
      );
      expect(stdout).toContain('kind=polyglot.echo payload={"hello": "sql"} still_held=t completed=t');
      expect(stdout).toContain("again=f");
      const { rows } = await t.db.query(`SELECT status, locked_by FROM "${t.schema}".all_jobs`);
      expect(rows).toEqual([{ status: "completed", locked_by: "psql-session" }]);
    });
  });
} else {
  describe("the protocol from psql", () => {
    test("psql is absent, so examples/protocol.sql cannot run", (ctx) =>
      absentService(ctx, "psql example", "no psql on PATH (apt-get install -y postgresql-client)"));
  });
}

/** The shared cross-language checks, for a worker binary and its argument style. */
function languageSuite(name: string, command: () => { file: string; prefix: string[]; flag: (f: string) => string }) {
  test(`${name} drains jobs enqueued from TypeScript, completing good ones and burying a failing one`, async () => {
    await clearJobs(t.db, t.schema);
    await t.skipq.enqueueMany(
      Array.from({ length: 20 }, (_, i) => ({ job: "polyglot.sum", payload: { numbers: [i, 1] }, queue: "poly" })),
    );
    const bad = await t.skipq.enqueue("polyglot.fail", { message: "nope" }, { queue: "poly", maxAttempts: 1 });
    const c = command();
    const { stdout } = await run(
      c.file,
      [...c.prefix, "drain", c.flag("dsn"), DATABASE_URL, c.flag("schema"), t.schema, c.flag("queue"), "poly"],
      { timeout: 60_000 },
    );
    const summary = JSON.parse(stdout.trim().split("\n").at(-1) as string);
    expect(summary).toMatchObject({ claimed: 21, completed: 20, failed: 1 });
    const { rows } = await t.db.query(
      `SELECT status, count(*)::int AS n, bool_and(locked_by LIKE $1) AS by_worker FROM "${t.schema}".all_jobs GROUP BY status ORDER BY status`,
      [`${name.toLowerCase()}:%`],
    );
    expect(rows).toEqual([
      { status: "completed", n: 20, by_worker: true },
      { status: "dead", n: 1, by_worker: true },
    ]);
    const dead = await t.db.query(`SELECT last_error FROM "${t.schema}".all_jobs WHERE id = $1`, [bad.id]);
    expect(dead.rows[0].last_error).toContain("nope");
  });

  test(`${name} completes a job inside its own transaction: with the business row on commit, not at all on rollback`, async () => {
    await clearJobs(t.db, t.schema);
    await t.db.query(`CREATE TABLE IF NOT EXISTS "${t.schema}".tx_orders (job_id bigint PRIMARY KEY)`);
    await t.db.query(`DELETE FROM "${t.schema}".tx_orders`);
    const { id } = await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly" });
    const child = await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly-children", dependsOn: [id] });
    const held = await claimOne(name);
    const c = command();
    const args = (lease: string, ...extra: string[]) => [
      ...c.prefix,
      "complete-tx",
      c.flag("dsn"),
      DATABASE_URL,
      c.flag("schema"),
      t.schema,
      c.flag("id"),
      id,
      c.flag("lease"),
      lease,
      c.flag("table"),
      `${t.schema}.tx_orders`,
      ...extra,
    ];
    const state = async () =>
      (
        await t.db.query(
          `SELECT (SELECT status FROM "${t.schema}".all_jobs WHERE id = $1) AS status,
                  (SELECT result FROM "${t.schema}".all_jobs WHERE id = $1) AS result,
                  (SELECT status FROM "${t.schema}".all_jobs WHERE id = $2) AS child,
                  (SELECT count(*)::int FROM "${t.schema}".tx_orders WHERE job_id = $1) AS orders`,
          [id, child.id],
        )
      ).rows[0];
    const rolledBack = await run(c.file, args(held.lease, c.flag("rollback")));
    expect(JSON.parse(rolledBack.stdout)).toEqual({ accepted: true, committed: false });
    expect(await state()).toEqual({ status: "running", result: null, child: "waiting", orders: 0 });
    const committed = await run(c.file, args(held.lease, c.flag("result"), '{"charged": 42}'));
    expect(JSON.parse(committed.stdout)).toEqual({ accepted: true, committed: true });
    expect(await state()).toEqual({ status: "completed", result: { charged: 42 }, child: "pending", orders: 1 });
    // The same attempt again: refused by its lease, and the transaction (business row included) rolled back.
    await t.db.query(`DELETE FROM "${t.schema}".tx_orders`);
    const again = await run(c.file, args(held.lease));
    expect(JSON.parse(again.stdout)).toEqual({ accepted: false, committed: false });
    expect(await state()).toMatchObject({ status: "completed", orders: 0 });
  });

  test(`a stale outcome from ${name} is rejected like one from TypeScript`, async () => {
    await clearJobs(t.db, t.schema);
    await t.skipq.enqueue("polyglot.echo", {}, { queue: "poly" });
    // A first claim loses its lease; a second claim holds the job now.
    const old = await claimOne(`${name}-old`);
    await t.db.query(`UPDATE "${t.schema}".jobs SET status = 'pending', lease = NULL, lease_expires_at = NULL`);
    const current = await claimOne(`${name}-new`);
    const c = command();
    const common = [c.flag("dsn"), DATABASE_URL, c.flag("schema"), t.schema, c.flag("id"), old.id];
    for (const outcome of ["complete", "fail"]) {
      const { stdout } = await run(c.file, [...c.prefix, outcome, ...common, c.flag("lease"), old.lease]);
      expect(JSON.parse(stdout)).toMatchObject({ accepted: false });
    }
    // TypeScript's own statement, same stale lease: no row either.
    const ts = await t.db.query(t.skipq.store.sql.jobs.jobCompleteMany.text, [[old.id], [old.lease]]);
    expect(ts.rowCount).toBe(0);
    const row = await t.db.query(`SELECT status, lease FROM "${t.schema}".all_jobs`);
    expect(row.rows[0]).toEqual({ status: "running", lease: current.lease });
    // The current holder's outcome, from the same language, is accepted.
    const { stdout } = await run(c.file, [
      ...c.prefix,
      "complete",
      ...common.slice(0, 5),
      current.id,
      c.flag("lease"),
      current.lease,
    ]);
    expect(JSON.parse(stdout)).toEqual({ accepted: true });
  });
}

if (pythonReady) {
  describe("the Python worker (asyncpg)", () => {
    languageSuite("Python", () => ({
      file: PYTHON,
      prefix: [path.resolve("workers/python/worker.py")],
      flag: (f) => `--${f}`,
    }));
  });
} else {
  describe("the Python worker (asyncpg)", () => {
    test("python3-asyncpg is absent, so the Python worker cannot run", (ctx) =>
      absentService(ctx, "Python worker", `${PYTHON} cannot import asyncpg (apt-get install -y python3-asyncpg)`));
  });
}

if (goReady) {
  describe("the Go worker (pgx v4)", () => {
    const binary = path.join(mkdtempSync(path.join(os.tmpdir(), "skipq-go-")), "skipq-worker");
    beforeAll(async () => {
      await run("go", ["build", "-o", binary, "."], {
        cwd: path.resolve("workers/go"),
        env: { ...process.env, GO111MODULE: "off", GOPATH, GOFLAGS: "" },
        timeout: 300_000,
      });
    }, 300_000);
    languageSuite("Go", () => ({ file: binary, prefix: [], flag: (f) => `-${f}` }));
  });
} else {
  describe("the Go worker (pgx v4)", () => {
    test("go or pgx v4 is absent, so the Go worker cannot run", (ctx) =>
      absentService(
        ctx,
        "Go worker",
        "no go toolchain or pgx v4 (apt-get install -y golang-go golang-github-jackc-pgx-v4-dev)",
      ));
  });
}
