/**
 * `skipq limits …` and `skipq cron …` through the built binary against real
 * PostgreSQL: what they print and what they change.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, Scheduler } from "../../src/index.js";
import { DATABASE_URL, type TestQueue, testQueue, until } from "../helpers.js";
import { skipq, start } from "./run.js";

let t: TestQueue;
let env: Record<string, string>;
let dir: string;
beforeAll(async () => {
  t = await testQueue("cli-flow");
  env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  dir = await mkdtemp(path.join(os.tmpdir(), "skipq-cli-flow-"));
});
afterAll(async () => {
  await t.cleanup();
  await rm(dir, { recursive: true, force: true });
});

test("limits set, show, pause-key and resume-key change what every worker's claim enforces", async () => {
  const set = await skipq(["limits", "set", "crm", "--key-concurrency", "2", "--rate", "50/1s", "--per-key"], env);
  expect(set).toMatchObject({ code: 0, stdout: "limits of crm set\n" });
  expect(await new Admin(t.skipq).getQueueLimits("crm")).toEqual([
    {
      queue: "crm",
      paused: false,
      concurrency: null,
      keyConcurrency: 2,
      rate: { limit: 50, window: 1000, perKey: true },
      fairness: null,
    },
  ]);
  const fair = await skipq(["limits", "set", "crm", "--fair", "--weight", "acme=2", "--weight", "a=b=0.5"], env);
  expect(fair).toMatchObject({ code: 0 });
  expect((await new Admin(t.skipq).getQueueLimits("crm"))[0]?.fairness).toEqual({ weights: { acme: 2, "a=b": 0.5 } });
  expect((await skipq(["limits", "show", "crm"], env)).stdout).toMatch(/yes a=b=0\.5 acme=2/);
  await skipq(["limits", "set", "crm", "--key-concurrency", "2", "--rate", "50/1s", "--per-key"], env);
  expect((await skipq(["limits", "pause-key", "crm", "acme", "--for", "1h"], env)).code).toBe(0);
  const shown = JSON.parse((await skipq(["limits", "show", "crm", "--json"], env)).stdout);
  expect(shown.pausedKeys).toEqual([{ queue: "crm", key: "acme", pausedUntil: expect.any(String) }]);
  expect((await skipq(["limits", "resume-key", "crm", "acme"], env)).stdout).toBe("acme of crm resumed\n");
  expect((await skipq(["limits", "set", "crm"], env)).code).toBe(0);
  expect((await new Admin(t.skipq).getQueueLimits("crm"))[0]).toMatchObject({ keyConcurrency: null, rate: null });
});

test("limits refuses malformed rates and ambiguous key pauses with exit code 2, changing nothing", async () => {
  const bad = await skipq(["limits", "set", "crm2", "--rate", "50"], env);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toMatch(/--rate "50" is not a rate: use starts\/window, e.g. --rate 50\/1s/);
  const both = await skipq(["limits", "pause-key", "crm2", "acme", "--whole-queue", "--for", "1s"], env);
  expect(both.code).toBe(2);
  for (const weight of ["acme=0", "acme=-1", "acme=", "=2", "acme=1e400", "acme=two"]) {
    const refused = await skipq(["limits", "set", "crm2", "--fair", "--weight", weight], env);
    expect(refused.code, weight).toBe(2);
    expect(refused.stderr).toMatch(/is not a weight: use key=number/);
  }
  const alone = await skipq(["limits", "set", "crm2", "--weight", "acme=2"], env);
  expect(alone.stderr).toMatch(/--weight needs --fair/);
  expect(await new Admin(t.skipq).getQueueLimits("crm2")).toEqual([]);
});

test("cron list shows the schedules Schedulers declared, with last and next tick; cron remove forgets one", async () => {
  expect((await skipq(["cron", "list"], env)).stdout).toMatch(/no cron schedules/);
  await new Scheduler(t.skipq)
    .add("0 9 * * *", "morning-report", {}, { timezone: "Europe/Paris" })
    .runOnce({ now: new Date("2026-03-01T00:00:00Z") });
  const list = JSON.parse((await skipq(["cron", "list", "--json"], env)).stdout);
  expect(list.schedules).toEqual([
    {
      name: "morning-report",
      expression: "0 9 * * *",
      timezone: "Europe/Paris",
      queue: "default",
      kind: "morning-report",
      lastTick: "2026-03-01T00:00:00.000Z",
      lastJobId: null,
      nextTick: expect.stringMatching(/T0[78]:00:00\.000Z$/), // 09:00 in Paris
    },
  ]);
  expect((await skipq(["cron", "list"], env)).stdout).toMatch(/morning-report\s.*0 9 \* \* \*.*Europe\/Paris/);
  expect((await skipq(["cron", "remove", "morning-report"], env)).stdout).toBe(
    "cron schedule morning-report removed\n",
  );
  expect((await skipq(["cron", "--help"], env)).stdout).toMatch(/Examples:\n\s+\$ skipq cron list/);
  expect((await skipq(["limits", "--help"], env)).stdout).toMatch(/Examples:\n\s+\$ skipq limits set/);
});

test("skipq worker runs the cron schedules its tasks module exports, and refuses a bad one before connecting", async () => {
  const tasks = path.join(dir, "cron-tasks.mjs");
  await writeFile(
    tasks,
    `export default { tick: async () => {} };
     export const cron = [{ expression: "* * * * * *", kind: "tick", payload: { from: "cli" }, options: { queue: "ticks" } }];\n`,
  );
  const w = start(["worker", "--tasks", tasks, "--queue", "ticks"], env);
  await until("a tick ran", async () => {
    const { rows } = await t.db.query(
      `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE kind = 'tick' AND status = 'completed'`,
    );
    return rows[0].n >= 1;
  });
  w.child.kill("SIGTERM");
  expect((await w.exited).code).toBe(0);

  const bad = path.join(dir, "bad-cron.mjs");
  await writeFile(
    bad,
    `export default { tick: async () => {} };\nexport const cron = [{ expression: "61 * * * *", kind: "tick" }];\n`,
  );
  const refused = await skipq(["worker", "--tasks", bad], {
    ...env,
    DATABASE_URL: "postgres://nobody@127.0.0.1:1/none",
  });
  expect(refused.code).not.toBe(0);
  expect(refused.stderr).toMatch(/cron\[0\] \(tick\): cron expression "61 \* \* \* \*" is invalid/);
});
