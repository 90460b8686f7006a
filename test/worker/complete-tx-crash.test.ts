/**
 * ctx.completeTx under a real SIGKILL of the worker process: killed after the
 * caller's commit and before the handler returned, the job is completed and
 * never runs again; killed before the commit, the caller's transaction dies
 * with its connection, the business row does not exist, and the job is reaped
 * and runs again. Real processes, real SIGKILL, no stubs.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { beforeAll, expect, test } from "vitest";
import { silentLogger } from "../../src/index.js";
import { Reaper } from "../../src/maintenance/reaper.js";
import { until, useTestQueue } from "../helpers.js";

const t = useTestQueue("complete_tx_crash");
let s: string;
beforeAll(async () => {
  s = `"${t.schema}"`;
  await t.db.query(`CREATE TABLE ${s}.orders (job_id bigint PRIMARY KEY)`);
});

/** The fixture worker, crashing at `crash`; resolves with the line it printed there. */
function spawnWorker(crash: "before-commit" | "after-commit"): { child: ChildProcess; reached: Promise<string> } {
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/complete-tx-worker.ts", t.schema], {
    stdio: ["ignore", "pipe", "inherit"],
    env: { ...process.env, CRASH: crash },
  });
  const reached = new Promise<string>((resolve, reject) => {
    let buffer = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      for (const line of buffer.split("\n")) if (/^(in-tx|committed) /.test(line)) resolve(line);
    });
    child.once("exit", (code) => reject(new Error(`the worker exited (${code}) before the crash point`)));
  });
  return { child, reached };
}

async function kill(child: ChildProcess): Promise<void> {
  const exited = new Promise((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
  child.kill("SIGKILL");
  expect(await exited).toBe("SIGKILL");
}

async function row(id: string) {
  const { rows } = await t.db.query(
    `SELECT status, attempts, result, (SELECT count(*)::int FROM ${s}.orders WHERE job_id = $1) AS orders
       FROM ${s}.all_jobs WHERE id = $1`,
    [id],
  );
  return rows[0];
}

/** Expires every lease (back-dated, no waiting) and runs one reaper pass; returns the ids it reaped. */
async function reap(): Promise<string[]> {
  await t.db.query(`UPDATE ${s}.jobs SET lease_expires_at = now() - interval '1 second' WHERE status = 'running'`);
  const reaped = await new Reaper({ store: t.skipq.store, intervalMs: 1000, logger: silentLogger }).runOnce();
  return reaped.reaped.map((r) => r.id);
}

test("a worker killed after the caller's commit and before its handler returned leaves the job completed, never re-run", async () => {
  const { id } = await t.skipq.enqueue("order", {}, { queue: "crash-tx" });
  const victim = spawnWorker("after-commit");
  expect(await victim.reached).toBe(`committed ${id}`);
  await kill(victim.child);
  expect(await row(id)).toMatchObject({ status: "completed", attempts: 1, orders: 1 });
  expect(await reap()).toEqual([]);
  // A survivor finds nothing to run: the job is not run a second time.
  let ran = 0;
  const survivor = t.skipq
    .worker({ queues: ["crash-tx"], maintenance: false, listen: false })
    .register("order", () => void ran++);
  expect(await survivor.runOnce()).toBe(0);
  await survivor.stop();
  expect(ran).toBe(0);
  expect(await row(id)).toMatchObject({
    status: "completed",
    attempts: 1,
    orders: 1,
    result: { pid: victim.child.pid },
  });
});

test("a worker killed before the caller's commit leaves no business row, and the job is reaped and runs again", async () => {
  const { id } = await t.skipq.enqueue("order", {}, { queue: "crash-tx" });
  const victim = spawnWorker("before-commit");
  expect(await victim.reached).toBe(`in-tx ${id}`);
  await kill(victim.child);
  // The killed process's connections end; PostgreSQL rolls its open transaction back.
  await until("the killed worker's transaction is gone", async () => {
    const { rows } = await t.db.query(
      `SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE c.relname = 'orders' AND c.relnamespace = $1::regnamespace`,
      [t.schema],
    );
    return rows[0].n === 0;
  });
  expect(await row(id)).toMatchObject({ status: "running", attempts: 1, orders: 0 });
  expect(await reap()).toEqual([id]);
  expect(await row(id)).toMatchObject({ status: "pending", orders: 0 });
  const survivor = t.skipq
    .worker({ queues: ["crash-tx"], maintenance: false, listen: false })
    .register("order", async (_p, ctx) => {
      const client = await t.db.connect();
      try {
        await client.query("BEGIN");
        await client.query(`INSERT INTO ${s}.orders (job_id) VALUES ($1)`, [ctx.id]);
        await ctx.completeTx(client, { rerun: true });
        await client.query("COMMIT");
      } finally {
        client.release();
      }
    });
  expect(await survivor.runOnce()).toBe(1);
  await survivor.stop();
  expect(await row(id)).toMatchObject({ status: "completed", attempts: 2, orders: 1, result: { rerun: true } });
});
