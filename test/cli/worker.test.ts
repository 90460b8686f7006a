/**
 * `skipq worker` as a real process: it drains jobs with the handlers of a
 * tasks module (examples/tasks.mjs, examples/tasks.ts), stops gracefully on
 * SIGTERM (running jobs finish, nothing new is claimed) and stops at once on a
 * second signal (unfinished jobs go back to pending without using an attempt).
 */
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { readFile, rm } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { DATABASE_URL, type TestQueue, testQueue, until } from "../helpers.js";
import { cliEnv, ROOT, type Running, start } from "./run.js";

let t: TestQueue;
const log = path.join(os.tmpdir(), `skipq-cli-worker-${process.pid}.log`);

beforeAll(async () => {
  t = await testQueue("cli-worker");
});
afterAll(async () => {
  await t.cleanup();
  await rm(log, { force: true });
});

function worker(queue: string, tasks = "examples/tasks.mjs", ...extra: string[]): Running {
  return start(["worker", "--tasks", tasks, "--queue", queue, ...extra], {
    DATABASE_URL,
    SKIPQ_SCHEMA: t.schema,
    SKIPQ_EXAMPLE_LOG: log,
  });
}

async function status(id: string) {
  const { rows } = await t.db.query(`SELECT status, attempts, lease FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  return rows[0] as { status: string; attempts: number; lease: string | null };
}

test("npx skipq worker drains on a SIGTERM sent to npx, which passes it only to its shell: the running job finishes, then it exits", async () => {
  // An application with skipq installed: npx runs node_modules/.bin/skipq under `sh -c`.
  const app = mkdtempSync(path.join(os.tmpdir(), "skipq-npx-"));
  writeFileSync(path.join(app, "package.json"), '{ "name": "npx-app", "private": true }\n');
  mkdirSync(path.join(app, "node_modules", ".bin"), { recursive: true });
  symlinkSync(ROOT, path.join(app, "node_modules", "skipq"), "dir");
  symlinkSync("../skipq/bin/skipq.js", path.join(app, "node_modules", ".bin", "skipq"));
  const tasks = path.join(ROOT, "examples/tasks.mjs");
  const npx = spawn("npx", ["--no", "skipq", "worker", "--tasks", tasks, "--queue", "npx"], {
    cwd: app,
    env: cliEnv({ DATABASE_URL, SKIPQ_SCHEMA: t.schema }),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let out = "";
  npx.stdout.on("data", (chunk) => {
    out += chunk;
  });
  npx.stderr.on("data", (chunk) => {
    out += chunk;
  });
  let pid: number | undefined;
  const alive = () => {
    try {
      return pid !== undefined && process.kill(pid, 0);
    } catch {
      return false;
    }
  };
  try {
    // The worker's id is host:pid:random; its pid is what must exit.
    pid = Number(
      (
        await until("the worker to be ready", () => /skipq worker: [^:\s]+:(\d+):\S+ running .*ready/.exec(out), 60_000)
      )[1],
    );
    // A job that takes 1.5 s is running when npx gets the signal: the worker must let it finish.
    const { id: slow } = await t.skipq.enqueue("send-email", { to: "npx@example.com", ms: 1500 }, { queue: "npx" });
    await until("the slow job running", async () => (await status(slow)).status === "running", 30_000);
    npx.kill("SIGTERM");
    await until("the worker process to exit", () => !alive(), 20_000);
    expect(await status(slow)).toMatchObject({ status: "completed", attempts: 1 });
    expect(out).toContain("stopped: 1 completed");
  } finally {
    if (alive() && pid !== undefined) process.kill(pid, "SIGKILL");
    npx.kill("SIGKILL");
    rmSync(app, { recursive: true, force: true });
  }
});

test("worker prints a job that fails its last attempt as dead, never as one that will retry", async () => {
  const { id } = await t.skipq.enqueue("send-email", {}, { queue: "bury", maxAttempts: 1 });
  const w = worker("bury");
  await until("dead", async () => (await status(id)).status === "dead", 30_000);
  w.child.kill("SIGTERM");
  const result = await w.exited;
  expect(result.stderr).toContain(`job ${id} (send-email) is dead after attempt 1/1: payload.to must be`);
  expect(result.stderr).not.toContain("will retry");
});

test("worker runs every job of its queue with the tasks module's handlers, then SIGTERM exits 0", async () => {
  const jobs = Array.from({ length: 20 }, (_, i) => ({
    job: "send-email",
    payload: { to: `u${i}@example.com` },
    queue: "drain",
  }));
  const ids = (await t.skipq.enqueueMany(jobs)).map((r) => r.id);
  const w = worker("drain");
  await until(
    "all completed",
    async () => {
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE queue = 'drain' AND status = 'completed'`,
      );
      return rows[0].n === 20;
    },
    30_000,
  );
  w.child.kill("SIGTERM");
  const result = await w.exited;
  expect(result.code, result.stderr).toBe(0);
  expect(result.stderr).toContain("stopped: 20 completed");
  const ran = (await readFile(log, "utf8"))
    .split("\n")
    .filter(Boolean)
    .map((line) => line.split(" ")[0]);
  expect(new Set(ran)).toEqual(new Set(ids));
});

test("SIGTERM lets a running job finish, claims nothing new, and exits 0", async () => {
  const { id: slow } = await t.skipq.enqueue("send-email", { to: "slow@example.com", ms: 1500 }, { queue: "graceful" });
  const w = worker("graceful");
  await until("slow job running", async () => (await status(slow)).status === "running", 30_000);
  w.child.kill("SIGTERM");
  await until("stop acknowledged", () => w.stderr().includes("SIGTERM: finishing running jobs"));
  const { id: late } = await t.skipq.enqueue("send-email", { to: "late@example.com" }, { queue: "graceful" });
  const result = await w.exited;
  expect(result.code, result.stderr).toBe(0);
  expect(await status(slow)).toMatchObject({ status: "completed", attempts: 1 });
  expect(await status(late)).toMatchObject({ status: "pending", attempts: 0 });
});

test("a second signal stops at once and puts the unfinished job back to pending without using an attempt", async () => {
  const { id } = await t.skipq.enqueue("send-email", { to: "stuck@example.com", ms: 120_000 }, { queue: "hard" });
  const w = worker("hard", "examples/tasks.mjs", "--shutdown-timeout", "60s");
  await until("job running", async () => (await status(id)).status === "running", 30_000);
  const signalled = Date.now();
  w.child.kill("SIGINT");
  await until("stop acknowledged", () => w.stderr().includes("SIGINT: finishing running jobs"));
  w.child.kill("SIGINT");
  const result = await w.exited;
  expect(result.code, result.stderr).toBe(0);
  expect(Date.now() - signalled).toBeLessThan(30_000);
  expect(result.stderr).toContain("SIGINT again: stopping now");
  expect(await status(id)).toEqual({ status: "pending", attempts: 0, lease: null });
});

test("a TypeScript tasks module loads through tsx and runs its handler", async () => {
  const { id } = await t.skipq.enqueue("greet", { name: "Ada" }, { queue: "typescript" });
  const w = worker("typescript", "examples/tasks.ts");
  await until("greet completed", async () => (await status(id)).status === "completed", 30_000);
  w.child.kill("SIGTERM");
  expect((await w.exited).code).toBe(0);
});
