/**
 * A worker process killed with SIGKILL mid-drain loses nothing: its jobs come
 * back through the reaper and another process completes every one.
 * Real processes and a real SIGKILL, no stubs.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { expect, test } from "vitest";
import { until, useTestQueue } from "../helpers.js";

const t = useTestQueue("crash");

function spawnWorker(schema: string): { child: ChildProcess; started: Set<string> } {
  const child = spawn(process.execPath, ["--import", "tsx", "test/fixtures/drain-worker.ts", schema], {
    stdio: ["ignore", "pipe", "inherit"],
    env: process.env,
  });
  const started = new Set<string>();
  let buffer = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    buffer += chunk.toString();
    const lines = buffer.split("\n");
    buffer = lines.pop() ?? "";
    for (const line of lines) if (line.startsWith("started ")) started.add(line.slice(8));
  });
  return { child, started };
}

test("a worker process killed with SIGKILL mid-drain loses nothing: another process completes every job", async () => {
  const total = 600;
  await t.skipq.enqueueMany(Array.from({ length: total }, (_, i) => ({ job: "work", payload: { i }, queue: "crash" })));
  const victim = spawnWorker(t.schema);
  await until("the victim is mid-drain", () => victim.started.size >= 100, 30_000);
  const exited = new Promise((resolve) => victim.child.once("exit", (_code, signal) => resolve(signal)));
  victim.child.kill("SIGKILL");
  expect(await exited).toBe("SIGKILL");

  const { rows: stranded } = await t.db.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE status = 'running'`,
  );
  expect(stranded[0].n).toBeGreaterThan(0); // the kill really left jobs mid-flight

  const survivor = spawnWorker(t.schema);
  try {
    await until(
      "every job completed",
      async () => {
        const { rows } = await t.db.query(
          `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE status = 'completed'`,
        );
        return rows[0].n === total;
      },
      60_000,
      100,
    );
  } finally {
    const stopped = new Promise((resolve) => survivor.child.once("exit", resolve));
    survivor.child.kill("SIGTERM");
    await stopped;
  }
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS jobs, count(*) FILTER (WHERE attempts = 2)::int AS rerun, max(attempts) AS max_attempts
       FROM "${t.schema}".all_jobs`,
  );
  expect(rows[0].jobs).toBe(total);
  // Only the jobs in flight at the kill ran twice (reason: lease expired).
  expect(rows[0].rerun).toBe(stranded[0].n);
  expect(rows[0].max_attempts).toBeLessThanOrEqual(2);
});
