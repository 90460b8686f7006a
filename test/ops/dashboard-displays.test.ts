/**
 * What the dashboard shows of rows it did not write: error text from a
 * protocol worker, the relay or plain SQL is redacted at display time (pairs
 * like password=…, bearer tokens) on every page and in the live feed, and
 * values PostgreSQL accepts in any shape (a non-array attempt_logs, deeply
 * nested progress and result) are shown as JSON, never a 500.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { createDashboard, type Dashboard } from "../../src/index.js";
import { insertRawJob, type TestQueue, testQueue, until } from "../helpers.js";

const TOKEN = "displays-token-0123456789";
const LEAKY = "connect failed password=hunter22 for db; Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig";
const SECRETS = /hunter22|eyJhbGciOiJIUzI1NiJ9/;
let t: TestQueue;
let dashboard: Dashboard;

beforeAll(async () => {
  t = await testQueue("dashboard_displays");
  dashboard = createDashboard({ skipq: t.skipq, auth: { token: TOKEN }, env: {} });
});
afterAll(async () => {
  await dashboard.close();
  await t.cleanup();
});

const get = (path: string) =>
  dashboard.fetch(new Request(`http://127.0.0.1${path}`, { headers: { authorization: `Bearer ${TOKEN}` } }), {
    remoteAddress: "127.0.0.1",
  });

const sqlJob = (columns: Record<string, string>, history = false) => insertRawJob(t, columns, { history });

test("error text written by plain SQL is shown with password= pairs and bearer tokens redacted on every page and in the live feed", async () => {
  const live = await sqlJob({
    last_error: LEAKY,
    attempt_logs: JSON.stringify([
      {
        attempt: 1,
        worker: "py",
        startedAt: "a",
        endedAt: "b",
        outcome: "failed",
        error: LEAKY,
        lines: [{ at: "t", level: "info", msg: LEAKY }],
        dropped: 0,
      },
    ]),
  });
  const dead = await sqlJob({ last_error: LEAKY, error_fingerprint: "feedfacefeedface", queue: "q-dead" }, true);
  for (const path of [`/jobs/${live}`, `/jobs/${dead}`, "/jobs", "/dead"]) {
    const res = await get(path);
    expect(res.status, path).toBe(200);
    const page = await res.text();
    expect(page, path).toContain("password=[redacted]");
    expect(page, path).not.toMatch(SECRETS);
  }
  const events = await get(`/events?jobs=${live}`);
  const reader = (events.body as ReadableStream<Uint8Array>).getReader();
  let text = "";
  await until("the job's event arrives", async () => {
    text += new TextDecoder().decode((await reader.read()).value);
    return text.includes('"error"');
  });
  await reader.cancel();
  expect(text).toContain("password=[redacted]");
  expect(text).not.toMatch(SECRETS);
});

test("a non-array attempt_logs, deeply nested progress and result are shown as JSON on the job page, not a 500", async () => {
  const deep = (depth: number, leaf: string) => `${'{"a":'.repeat(depth)}${leaf}${"}".repeat(depth)}`;
  const ids = [
    await sqlJob({ attempt_logs: '{"not": "a list", "password": "hunter22"}' }),
    await sqlJob({ attempt_logs: '[1, "two", null, {"attempt": {"x": 1}, "lines": "not a list", "error": 7}]' }),
    await sqlJob({ progress: deep(5000, "1") }),
    await sqlJob({ result: deep(5000, '"end"') }, true),
    await sqlJob({ headers: deep(3000, '"h"'), payload: "[[[[[[[[[[]]]]]]]]]]" }),
  ];
  for (const id of ids) {
    const res = await get(`/jobs/${id}`);
    expect(res.status, `job ${id}`).toBe(200);
    const page = await res.text();
    expect(page, `job ${id}`).not.toMatch(SECRETS);
  }
  const notList = await (await get(`/jobs/${ids[0]}`)).text();
  expect(notList).toContain("not a list");
  expect(await (await get(`/jobs/${ids[2]}`)).text()).toContain("nested too deeply to show");
});
