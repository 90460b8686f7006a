/**
 * Workflows are visible: `skipq flow <id>` (human and --json) and the
 * dashboard's job page show the graph around a job — parents and children,
 * each one's state and result (results redacted like payloads on the page).
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { type RunningDashboard, startDashboard } from "../../src/index.js";
import { skipq } from "../cli/run.js";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

const TOKEN = "test-token-0123456789abcdef";
const t = useTestQueue("workflow visible");
let d: RunningDashboard;
let ids: string[];
beforeAll(async () => {
  d = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, env: {} });
  ids = (
    await t.skipq.enqueueMany([
      { job: "ok", payload: {}, queue: "seen" },
      // Due in an hour: it becomes pending when the root completes, but never runs in this file.
      { job: "ok", payload: {}, queue: "seen", dependsOn: [{ item: 0 }], delay: "1h" },
      { job: "ok", payload: {}, queue: "seen", dependsOn: [{ item: 1 }] },
    ])
  ).map((r) => r.id);
  const w = t.skipq
    .worker({ queues: ["seen"], pollInterval: 50 })
    .register("ok", (_, ctx) => (ctx.id === ids[0] ? { token: "s3cret", n: 1 } : undefined));
  await w.start();
  await until("root completed", async () => {
    const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [ids[0]]);
    return rows[0]?.status === "completed";
  });
  await w.stop();
});
afterAll(async () => {
  await d.close();
});

test("skipq flow prints a job's parents and children with state and result", async () => {
  const env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  const json = await skipq(["flow", ids[1] as string, "--json"], env);
  expect(json.code).toBe(0);
  const flow = JSON.parse(json.stdout);
  expect(flow.parents).toEqual([{ id: ids[0], kind: "ok", status: "completed", result: { token: "s3cret", n: 1 } }]);
  expect(flow.children).toEqual([{ id: ids[2], kind: "ok", status: "waiting", result: null }]);
  expect(flow.job).toEqual({ id: ids[1], kind: "ok", status: "pending", result: null });
  const human = await skipq(["flow", ids[1] as string], env);
  expect(human.stdout).toMatch(new RegExp(`parent\\s+│\\s+${ids[0]}\\s+│ ok\\s+│ completed`));
  expect(human.stdout).toMatch(new RegExp(`child\\s+│\\s+${ids[2]}\\s+│ ok\\s+│ waiting`));
  const missing = await skipq(["flow", "987654321"], env);
  expect(missing.code).toBe(1);
  const bad = await skipq(["flow", "x"], env);
  expect(bad.code).toBe(2);
});

test("skipq job --json includes dependsOn, waitingOn and the result", async () => {
  const env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  const out = JSON.parse((await skipq(["job", ids[2] as string, "--json"], env)).stdout);
  expect(out).toMatchObject({ status: "waiting", dependsOn: [ids[1]], waitingOn: [ids[1]], result: null });
});

test("the dashboard's job page lists parents and children, with results redacted", async () => {
  const res = await fetch(new URL(`jobs/${ids[1]}`, d.url), { headers: { authorization: `Bearer ${TOKEN}` } });
  expect(res.status).toBe(200);
  const page = await res.text();
  expect(page).toContain('<table id="flow">');
  expect(page).toMatch(new RegExp(`data-role="parent"><td>parent</td><td><a href="[^"]*/jobs/${ids[0]}">`));
  expect(page).toMatch(new RegExp(`data-role="child"><td>child</td><td><a href="[^"]*/jobs/${ids[2]}">`));
  expect(page).not.toContain("s3cret");
  expect(page).toContain("&quot;n&quot;: 1");
});

test("skipq enqueue --depends-on creates a waiting job; an unknown parent or a bad policy exits 2 and writes nothing", async () => {
  const env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  const made = await skipq(
    ["enqueue", "ok", "--queue", "cli", "--depends-on", `${ids[1]},${ids[2]}`, "--on-parent-failure", "run", "--json"],
    env,
  );
  expect(made.code).toBe(0);
  const { id } = JSON.parse(made.stdout);
  const { rows } = await t.db.query(
    `SELECT status, on_parent_failure, waiting_on FROM "${t.schema}".jobs WHERE id = $1`,
    [id],
  );
  expect(rows[0]).toEqual({ status: "waiting", on_parent_failure: "run", waiting_on: 2 });
  const before = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs`);
  const unknown = await skipq(["enqueue", "ok", "--depends-on", "987654321"], env);
  expect(unknown.code).toBe(2);
  expect(unknown.stderr).toMatch(/987654321/);
  expect((await skipq(["enqueue", "ok", "--depends-on", "x"], env)).code).toBe(2);
  expect(
    (await skipq(["enqueue", "ok", "--depends-on", String(ids[0]), "--on-parent-failure", "maybe"], env)).code,
  ).toBe(2);
  expect((await skipq(["enqueue", "ok", "--on-parent-failure", "run"], env)).code).toBe(2);
  const after = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs`);
  expect(after.rows[0].n).toBe(before.rows[0].n);
});
