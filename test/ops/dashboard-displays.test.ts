/**
 * What the dashboard shows of rows it did not write: error text from a
 * protocol worker, the relay or plain SQL is redacted at display time (pairs
 * like password=…, bearer tokens) on every page and in the live feed, and
 * values PostgreSQL accepts in any shape (a non-array attempt_logs, deeply
 * nested progress and result) are shown as JSON, never a 500. Timestamps are
 * <time datetime> elements with UTC text, which the self-hosted script (never
 * an inline one) rewrites to the browser's time zone.
 */
import { createHash } from "node:crypto";
import { afterAll, beforeAll, expect, test } from "vitest";
import { createDashboard, type Dashboard } from "../../src/index.js";
import { insertRawJob, until, useTestQueue } from "../helpers.js";

const TOKEN = "displays-token-0123456789";
const LEAKY = "connect failed password=hunter22 for db; Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig";
const SECRETS = /hunter22|eyJhbGciOiJIUzI1NiJ9/;
const t = useTestQueue("dashboard_displays");
let dashboard: Dashboard;

beforeAll(async () => {
  dashboard = createDashboard({ skipq: t.skipq, auth: { token: TOKEN }, env: {} });
});
afterAll(async () => {
  await dashboard.close();
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

test("timestamps are <time datetime> with the UTC text; every page loads the self-hosted script that shows them in local time, nothing inline", async () => {
  const id = await sqlJob({ created_at: "2026-01-31T09:00:00Z", run_at: "2026-01-31T09:30:05.250Z" });
  const job = await (await get(`/jobs/${id}`)).text();
  expect(job).toMatch(/<time datetime="2026-01-31T09:00:00\.000Z" title="[^"]+">2026-01-31 09:00:00Z<\/time>/);
  expect(job).toMatch(/<time datetime="2026-01-31T09:30:05\.250Z" title="[^"]+">2026-01-31 09:30:05Z<\/time>/);
  const list = await (await get("/jobs")).text();
  expect(list).toContain('<time datetime="2026-01-31T09:00:00.000Z"');

  // Pages with nothing live load the script too (it rewrites the times); none carries an inline script.
  for (const path of ["/", `/jobs/${id}`, "/jobs", "/dead", "/cron", "/outbox", "/audit", "/workers"]) {
    const res = await get(path);
    expect(res.status, path).toBe(200);
    const csp = res.headers.get("content-security-policy") ?? "";
    expect(csp, path).toContain("script-src 'self';");
    expect(csp, path).not.toContain("unsafe-inline");
    const text = await res.text();
    expect(text.match(/<script[^>]*>/g), path).toEqual(['<script src="/assets/live.js" defer>']);
    expect(text, path).not.toMatch(/<script(?![^>]*\bsrc=)[^>]*>/);
    expect(text, path).not.toMatch(/\son[a-z]+=/i);
    // The one inline stylesheet is the one the policy allows by hash.
    const style = /<style>([\s\S]*?)<\/style>/.exec(text)?.[1] ?? "";
    expect(csp, path).toContain(`style-src 'sha256-${createHash("sha256").update(style).digest("base64")}'`);
  }
  const script = await (await get("/assets/live.js")).text();
  expect(script).toContain("new Intl.DateTimeFormat(undefined");
  expect(script).toContain('timeZoneName: "short"');
  expect(script).toContain(
    'querySelectorAll("time[datetime]:not([data-local]), text[data-datetime]:not([data-local])")',
  );
  expect(script).toContain('el.setAttribute("title", utc');
  // The rewrite runs before (and whether or not) the live feed starts.
  expect(script.indexOf("localTimes(document);")).toBeGreaterThan(0);
  expect(script.indexOf("localTimes(document);")).toBeLessThan(script.indexOf("new EventSource"));
});
