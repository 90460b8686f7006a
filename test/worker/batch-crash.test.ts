/**
 * A batch under a real SIGKILL of its worker process mid-batch: every job of
 * the batch is reaped and run again by another worker, none lost, none run
 * twice after the crash. Real process, real SIGKILL, no stubs.
 */
import { spawn } from "node:child_process";
import { beforeAll, expect, test } from "vitest";
import { silentLogger } from "../../src/index.js";
import { Reaper } from "../../src/maintenance/reaper.js";
import { until, useTestQueue } from "../helpers.js";

const t = useTestQueue("batch_crash");
let s: string;
beforeAll(async () => {
  s = `"${t.schema}"`;
});

test("a worker killed mid-batch loses no job: every job of the batch is reaped and run again", async () => {
  const items = Array.from({ length: 30 }, (_, n) => ({ job: "batch-crash", payload: { n }, queue: "batch-crash" }));
  const ids = (await t.skipq.enqueueMany(items)).map((j) => j.id).sort();
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/batch-worker.ts", t.schema], {
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.once("exit", (_code, signal) => resolve(signal)));
  const inBatch = new Promise<string[]>((resolve) => {
    let buffer = "";
    child.stdout?.on("data", (chunk: Buffer) => {
      buffer += chunk.toString();
      const line = buffer.split("\n").find((l) => l.startsWith("in-batch "));
      if (line) resolve(line.slice("in-batch ".length).split(",").sort());
    });
  });
  try {
    expect(await inBatch).toEqual(ids);
  } finally {
    child.kill("SIGKILL");
  }
  expect(await exited).toBe("SIGKILL");
  const { rows: running } = await t.db.query(`SELECT count(*)::int AS n FROM ${s}.jobs WHERE status = 'running'`);
  expect(running[0].n).toBe(30);
  // Expire the dead worker's leases (back-dated, no waiting) and reap.
  await t.db.query(`UPDATE ${s}.jobs SET lease_expires_at = now() - interval '1 second' WHERE status = 'running'`);
  const reaped = await new Reaper({ store: t.skipq.store, intervalMs: 1000, logger: silentLogger }).runOnce();
  expect(reaped.reaped.map((r) => r.id).sort()).toEqual(ids);
  const ran: string[] = [];
  const survivor = t.skipq
    .worker({ queues: ["batch-crash"], maintenance: false, pollInterval: 50 })
    .registerBatch("batch-crash", { size: 100 }, async (jobs) => {
      ran.push(...jobs.map((j) => j.id));
    });
  await survivor.start();
  try {
    await until("every job completed", async () => {
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE status = 'completed' AND id = ANY($1)`,
        [ids],
      );
      return rows[0].n === 30;
    });
  } finally {
    await survivor.stop();
  }
  expect(ran.sort()).toEqual(ids);
  const { rows } = await t.db.query(`SELECT attempts FROM ${s}.all_jobs WHERE id = ANY($1)`, [ids]);
  expect(rows.every((r) => r.attempts === 2)).toBe(true);
});
