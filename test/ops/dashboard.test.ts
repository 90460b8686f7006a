import http from "node:http";
import type { AddressInfo } from "node:net";
import net from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, createDashboard, type RunningDashboard, startDashboard } from "../../src/index.js";
import { until, useTestQueue } from "../helpers.js";
import { dashboardSession, signIn as signInWith } from "./dashboardSession.js";

const TOKEN = "test-token-0123456789abcdef";
const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const t = useTestQueue("dashboard");
let d: RunningDashboard;

beforeAll(async () => {
  d = await startDashboard({
    skipq: t.skipq,
    port: 0,
    auth: { token: TOKEN, user: "ops", password: "correct horse" },
    env: {},
  });
});
afterAll(async () => {
  await d.close();
});

async function deadJob(
  fields: { queue?: string; kind?: string; payload?: unknown; error?: string; fingerprint?: string } = {},
) {
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at,
                                           last_error, error_fingerprint, created_at, finished_at)
     VALUES (nextval(pg_get_serial_sequence('"${t.schema}".jobs', 'id')), $1, $2, $3, 'dead', 0, 3, 3, now(), $4, $5,
             now(), now()) RETURNING id`,
    [
      fields.queue ?? "default",
      fields.kind ?? "mail",
      JSON.stringify(fields.payload ?? { to: "ada" }),
      fields.error ?? "Error: boom\n    at handler (mail.ts:1:1)",
      fields.fingerprint ?? "0123456789abcdef",
    ],
  );
  return rows[0].id as string;
}

async function status(id: string): Promise<string> {
  const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  return rows[0].status;
}

const get = (path: string, headers: Record<string, string> = {}) =>
  fetch(new URL(path, d.url), { headers, redirect: "manual" });

const post = (path: string, form: Record<string, string>, headers: Record<string, string> = {}) =>
  fetch(new URL(path, d.url), {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
    body: new URLSearchParams(form).toString(),
    redirect: "manual",
  });

/** A new session signed in with the token: its cookie and CSRF token. */
function signIn(): Promise<{ cookie: string; csrf: string }> {
  return signInWith(
    dashboardSession(() => d.url),
    { token: TOKEN },
  );
}

test("every route answers 401 without credentials, /metrics and unknown paths included", async () => {
  const id = await deadJob();
  for (const path of ["/", "/jobs", `/jobs/${id}`, "/dead", "/metrics", "/no-such-page", "/login"]) {
    const res = await get(path);
    expect(res.status, path).toBe(401);
  }
  for (const path of [`/jobs/${id}/retry`, "/queues/default/pause", "/logout"]) {
    expect((await post(path, {})).status, path).toBe(401);
  }
  expect((await get("/", { authorization: "Bearer wrong-token-0123456789" })).status).toBe(401);
  expect(await status(id)).toBe("dead");
});

test("a wrong token is refused; the right one signs in with an HttpOnly, SameSite=Strict session cookie", async () => {
  const wrong = await post("login", { token: "not-the-token-at-all", next: "/" });
  expect(wrong.status).toBe(401);
  expect(wrong.headers.get("set-cookie")).toBeNull();
  const right = await post("login", { token: TOKEN, next: "/jobs" });
  expect(right.status).toBe(303);
  expect(right.headers.get("location")).toBe("/jobs");
  const cookie = right.headers.get("set-cookie") ?? "";
  expect(cookie).toMatch(/^skipq_session=/);
  expect(cookie).toContain("HttpOnly");
  expect(cookie).toContain("SameSite=Strict");
  const page = await get("/", { cookie: cookie.split(";")[0] as string });
  expect(page.status).toBe(200);
  expect(page.headers.get("content-security-policy")).toContain("default-src 'none'");
  const tampered = `${(cookie.split(";")[0] as string).slice(0, -2)}xx`;
  expect((await get("/", { cookie: tampered })).status).toBe(401);
});

/** Targets a browser would follow off the dashboard (browsers drop TAB/CR/LF and read "\\" as "/"). */
const OFF_SITE = [
  "//evil.example/",
  "/\t/evil.example/phish",
  "/\n/evil.example/",
  "/\r\n/evil.example/",
  "/\\evil.example/",
  "/\t\\evil.example/",
  "\\\\evil.example/",
  " //evil.example/",
  "\t//evil.example/",
  "/.//evil.example/",
  "/jobs/..//evil.example/",
  "https://evil.example/",
  "http://127.0.0.1:1/",
  "javascript:alert(1)",
  "jobs",
  "",
];

test("sign-in never redirects off the dashboard, whatever the encoding trick", async () => {
  for (const next of OFF_SITE) {
    const res = await post("login", { token: TOKEN, next });
    expect(res.status, JSON.stringify(next)).toBe(303);
    expect(res.headers.get("location"), JSON.stringify(next)).toBe("/");
  }
  const kept = await post("login", { token: TOKEN, next: "/jobs?queue=a&status=dead" });
  expect(kept.headers.get("location")).toBe("/jobs?queue=a&status=dead");
});

test("a crafted /login?next= link never puts an off-site target into the sign-in form", async () => {
  for (const next of OFF_SITE) {
    const page = await (await get(`/login?next=${encodeURIComponent(next)}`)).text();
    expect(/name="next" value="([^"]*)"/.exec(page)?.[1], JSON.stringify(next)).toBe("/");
  }
});

test("an action's back field never redirects off the dashboard", async () => {
  const { cookie, csrf } = await signIn();
  for (const back of OFF_SITE) {
    const res = await post("/queues/back-check/resume", { _csrf: csrf, back }, { cookie });
    expect(res.status, JSON.stringify(back)).toBe(303);
    expect(res.headers.get("location"), JSON.stringify(back)).toBe("/");
  }
});

test("under a basePath, redirects stay under it", async () => {
  const dashboard = createDashboard({ skipq: t.skipq, basePath: "/ops", auth: { token: TOKEN }, env: {} });
  const server = http.createServer((req, res) => dashboard.handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const login = (next: string) =>
    fetch(`${base}/ops/login`, {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: TOKEN, next }).toString(),
      redirect: "manual",
    });
  try {
    for (const next of ["/elsewhere", "/opsx/", "/ops/../elsewhere", "/ops/%2e%2e/elsewhere", ...OFF_SITE])
      expect((await login(next)).headers.get("location"), JSON.stringify(next)).toBe("/ops/");
    expect((await login("/ops/jobs")).headers.get("location")).toBe("/ops/jobs");
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test("a POST without the session's CSRF token changes nothing; with it, the job is retried", async () => {
  const id = await deadJob();
  const { cookie, csrf } = await signIn();
  expect((await post(`/jobs/${id}/retry`, {}, { cookie })).status).toBe(403);
  expect((await post(`/jobs/${id}/retry`, { _csrf: `${csrf}x` }, { cookie })).status).toBe(403);
  expect(await status(id)).toBe("dead");
  const ok = await post(`/jobs/${id}/retry`, { _csrf: csrf, back: `/jobs/${id}` }, { cookie });
  expect(ok.status).toBe(303);
  expect(ok.headers.get("location")).toBe(`/jobs/${id}`);
  expect(await status(id)).toBe("pending");
});

test("a cross-origin POST is refused even with a valid CSRF token", async () => {
  const id = await deadJob();
  const { cookie, csrf } = await signIn();
  const res = await post(`/jobs/${id}/retry`, { _csrf: csrf }, { cookie, origin: "http://evil.example" });
  expect(res.status).toBe(403);
  expect(await status(id)).toBe("dead");
});

test("Basic auth works for pages, and its POSTs need the CSRF token too", async () => {
  const basic = `Basic ${Buffer.from("ops:correct horse").toString("base64")}`;
  expect((await get("/", { authorization: `Basic ${Buffer.from("ops:wrong").toString("base64")}` })).status).toBe(401);
  const page = await (await get("/dead", { authorization: basic })).text();
  const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] as string;
  const id = await deadJob();
  expect((await post(`/jobs/${id}/cancel`, {}, { authorization: basic })).status).toBe(403);
  expect((await post(`/jobs/${id}/retry`, { _csrf: csrf }, { authorization: basic })).status).toBe(303);
  expect(await status(id)).toBe("pending");
});

test("payloads and errors are rendered escaped, and secret fields are redacted", async () => {
  const id = await deadJob({
    payload: { note: "</pre><script>alert(1)</script>", password: "hunter2", nested: { apiKey: "sk-live-1" } },
    error: `Error: <img src=x onerror=alert(2)>\n    at x (y.ts:1:1)`,
  });
  const auth = { authorization: `Bearer ${TOKEN}` };
  for (const path of [`/jobs/${id}`, "/jobs?status=dead", "/dead"]) {
    const text = await (await get(path, auth)).text();
    expect(text, path).not.toMatch(/<script>|<img /);
    expect(text, path).not.toContain("hunter2");
    expect(text, path).toContain("&lt;img src=x onerror=alert(2)&gt;");
  }
  const detail = await (await get(`/jobs/${id}`, auth)).text();
  expect(detail).toContain("&lt;/pre&gt;&lt;script&gt;");
  expect(detail).toContain("[redacted]");
  expect(detail).not.toContain("sk-live-1");
});

test("a secret nested 66 levels deep is redacted on the job page", async () => {
  let payload: unknown = { password: "deep-secret-66", note: "bottom" };
  for (let i = 0; i < 65; i++) payload = { level: payload };
  const id = await deadJob({ payload });
  const page = await (await get(`/jobs/${id}`, { authorization: `Bearer ${TOKEN}` })).text();
  expect(page).toContain("bottom");
  expect(page).not.toContain("deep-secret-66");
});

test("a payload too deep to print (inserted by plain SQL) gets a page that says so, not a 500", async () => {
  const depth = 6000;
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".jobs (kind, payload) VALUES ('deep', $1::jsonb) RETURNING id`,
    [`${'{"a":'.repeat(depth)}{"token":"sk-deep"}${"}".repeat(depth)}`],
  );
  const res = await get(`/jobs/${rows[0].id}`, { authorization: `Bearer ${TOKEN}` });
  expect(res.status).toBe(200);
  const page = await res.text();
  expect(page).toContain("nested too deeply to show");
  expect(page).not.toContain("sk-deep");
});

test("jobs with run_at 'infinity' or past the JavaScript Date range are listed and shown, not a 500", async () => {
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".jobs (kind, queue, run_at) VALUES ('k', 'forever', 'infinity'), ('k', 'forever', '294276-12-31 00:00:00+00') RETURNING id`,
  );
  const auth = { authorization: `Bearer ${TOKEN}` };
  for (const path of ["/jobs", "/jobs?queue=forever", `/jobs/${rows[0].id}`, `/jobs/${rows[1].id}`, "/"]) {
    const res = await get(path, auth);
    expect(res.status, path).toBe(200);
    const page = await res.text();
    if (path.startsWith("/jobs")) expect(page, path).toMatch(/>infinity<|after \+275760-09-13/);
  }
});

test("the jobs list filters by queue, kind, status and error text, and pages with before", async () => {
  const queue = "listing";
  const ids: string[] = [];
  for (let i = 0; i < 5; i++)
    ids.push(
      await deadJob({ queue, kind: i % 2 ? "odd" : "even", error: i === 3 ? "Error: needle 50% off_x" : "Error: hay" }),
    );
  const admin = new Admin(t.skipq);
  expect((await admin.listJobs({ queue, kind: "odd" })).map((j) => j.id)).toEqual([ids[3], ids[1]]);
  expect((await admin.listJobs({ queue, search: "NEEDLE 50% off_" })).map((j) => j.id)).toEqual([ids[3]]);
  expect(await admin.listJobs({ queue, search: "50_ off" })).toEqual([]);
  const auth = { authorization: `Bearer ${TOKEN}` };
  const page1 = await (await get(`/jobs?queue=${queue}&status=dead&q=`, auth)).text();
  for (const id of ids) expect(page1).toContain(`/jobs/${id}"`);
  const page2 = await (await get(`/jobs?queue=${queue}&before=${ids[2]}`, auth)).text();
  expect(page2).toContain(`/jobs/${ids[1]}"`);
  expect(page2).not.toContain(`/jobs/${ids[3]}"`);
  expect((await get("/jobs?status=bogus", auth)).status).toBe(400);
});

test("retry-all by fingerprint, retry-all in a queue, and pause/resume act through the dashboard", async () => {
  const { cookie, csrf } = await signIn();
  const a = [
    await deadJob({ queue: "fp", fingerprint: "aaaaaaaaaaaaaaaa" }),
    await deadJob({ queue: "fp", fingerprint: "aaaaaaaaaaaaaaaa" }),
  ];
  const b = await deadJob({ queue: "fp", fingerprint: "bbbbbbbbbbbbbbbb" });
  expect(
    (await post("/dead/retry", { _csrf: csrf, fingerprint: "aaaaaaaaaaaaaaaa", queue: "fp" }, { cookie })).status,
  ).toBe(303);
  expect([await status(a[0] as string), await status(a[1] as string), await status(b)]).toEqual([
    "pending",
    "pending",
    "dead",
  ]);
  expect((await post("/queues/fp/retry-dead", { _csrf: csrf }, { cookie })).status).toBe(303);
  expect(await status(b)).toBe("pending");
  const admin = new Admin(t.skipq);
  await post("/queues/fp/pause", { _csrf: csrf }, { cookie });
  expect((await admin.listQueueSettings()).find((q) => q.name === "fp")?.paused).toBe(true);
  const overview = await (await get("/", { cookie })).text();
  expect(overview).toMatch(/data-queue="fp"[\s\S]*?paused/);
  await post("/queues/fp/resume", { _csrf: csrf }, { cookie });
  expect((await admin.listQueueSettings()).find((q) => q.name === "fp")?.paused).toBe(false);
});

test("the dashboard refuses a non-loopback address without credentials, and generates a token on loopback", async () => {
  await expect(startDashboard({ skipq: t.skipq, port: 0, host: "0.0.0.0", env: {} })).rejects.toThrow(
    /without credentials/,
  );
  await expect(startDashboard({ skipq: t.skipq, port: 0, host: "0.0.0.0", auth: false, env: {} })).rejects.toThrow(
    /without credentials/,
  );
  expect(() => createDashboard({ skipq: t.skipq, env: {} })).toThrow(/needs credentials/);
  const local = await startDashboard({
    skipq: t.skipq,
    port: 0,
    env: {},
    logger: { debug() {}, info() {}, warn() {}, error() {} },
  });
  try {
    expect(local.generatedToken).toMatch(/^[A-Za-z0-9_-]{32}$/);
    expect((await fetch(local.url)).status).toBe(401);
    expect((await fetch(local.url, { headers: { authorization: `Bearer ${local.generatedToken}` } })).status).toBe(200);
  } finally {
    await local.close();
  }
});

test("mounted under a basePath in an existing server, it serves its pages and passes other requests on", async () => {
  const dashboard = createDashboard({ skipq: t.skipq, basePath: "/ops/skipq", auth: { token: TOKEN } });
  const server = http.createServer((req, res) =>
    dashboard.handle(req, res, () => res.writeHead(200, { "content-type": "text/plain" }).end("app")),
  );
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  try {
    expect(await (await fetch(`${base}/elsewhere`)).text()).toBe("app");
    expect((await fetch(`${base}/ops/skipq/jobs`)).status).toBe(401);
    const page = await (await fetch(`${base}/ops/skipq/`, { headers: { authorization: `Bearer ${TOKEN}` } })).text();
    expect(page).toContain('href="/ops/skipq/jobs"');
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test("/metrics needs credentials unless metricsAuth is false", async () => {
  expect((await get("/metrics", { authorization: `Bearer ${TOKEN}` })).status).toBe(200);
  const open = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, metricsAuth: false, env: {} });
  try {
    const res = await fetch(new URL("metrics", open.url));
    expect(res.status).toBe(200);
    expect(await res.text()).toContain("skipq_queue_jobs");
    expect((await fetch(open.url)).status).toBe(401);
  } finally {
    await open.close();
  }
});

/** One request from a chosen loopback address (127.0.0.x), so a test can play several clients. */
function from(
  localAddress: string,
  url: string,
  options: { method?: string; headers?: Record<string, string>; form?: Record<string, string> } = {},
): Promise<{ status: number; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const body = options.form ? new URLSearchParams(options.form).toString() : undefined;
    const req = http.request(url, {
      method: options.method ?? (body ? "POST" : "GET"),
      localAddress,
      agent: false,
      headers: { ...(body ? { "content-type": "application/x-www-form-urlencoded" } : {}), ...options.headers },
    });
    req.on("error", reject);
    req.on("response", (res) => {
      res.resume();
      res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers }));
    });
    req.end(body);
  });
}

const basicAuth = (user: string, password: string) => ({
  authorization: `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`,
});

/** A dashboard with its own throttle and a logger that keeps its warnings. */
async function guardedDashboard() {
  const warnings: Array<{ obj: Record<string, unknown>; msg: string }> = [];
  const logger = {
    ...quiet,
    warn: (obj: Record<string, unknown>, msg: string) => warnings.push({ obj, msg }),
  };
  const dashboard = await startDashboard({
    skipq: t.skipq,
    port: 0,
    auth: { token: TOKEN, user: "ops", password: "correct horse" },
    env: {},
    logger,
  });
  return { dashboard, warnings, url: (path = "") => new URL(path, dashboard.url).toString() };
}

test("wrong Basic passwords are throttled per client: 429 after 10 in a minute, even for the right password, and each failure is logged", async () => {
  const g = await guardedDashboard();
  try {
    const statuses: number[] = [];
    for (let i = 0; i < 200; i++)
      statuses.push((await from("127.0.0.1", g.url(), { headers: basicAuth("ops", `wrong-${i}`) })).status);
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401));
    expect(statuses.slice(10)).toEqual(Array(190).fill(429));
    const right = await from("127.0.0.1", g.url(), { headers: basicAuth("ops", "correct horse") });
    expect(right.status).toBe(429);
    expect(Number(right.headers["retry-after"])).toBeGreaterThan(0);
    const failures = g.warnings.filter((w) => /failed credential check/.test(w.msg));
    expect(failures).toHaveLength(10);
    expect(failures[0]?.obj).toMatchObject({ client: "127.0.0.1", via: "basic", user: "ops" });
    expect(g.warnings.filter((w) => /throttled/.test(w.msg))).toHaveLength(1);
    expect(JSON.stringify(g.warnings)).not.toMatch(/wrong-|correct horse/);
  } finally {
    await g.dashboard.close();
  }
});

test("wrong Bearer tokens and wrong sign-in forms count against the same client", async () => {
  const g = await guardedDashboard();
  try {
    for (let i = 0; i < 5; i++)
      expect(
        (await from("127.0.0.1", g.url(), { headers: { authorization: `Bearer wrong-token-${i}-0123456789` } })).status,
      ).toBe(401);
    for (let i = 0; i < 5; i++)
      expect((await from("127.0.0.1", g.url("login"), { form: { user: "ops", password: `nope-${i}` } })).status).toBe(
        401,
      );
    expect((await from("127.0.0.1", g.url(), { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(429);
    expect((await from("127.0.0.1", g.url("login"), { form: { token: TOKEN } })).status).toBe(429);
    const failures = g.warnings.filter((w) => /failed credential check/.test(w.msg));
    expect(failures.map((w) => w.obj.via).sort()).toEqual([...Array(5).fill("bearer"), ...Array(5).fill("form")]);
  } finally {
    await g.dashboard.close();
  }
});

test("a stranger guessing never locks the admin out: another client signs in while the stranger gets 429", async () => {
  const g = await guardedDashboard();
  try {
    for (let i = 0; i < 50; i++) {
      await from("127.0.0.1", g.url("login"), { form: { user: "ops", password: `guess-${i}` } });
      await from("127.0.0.1", g.url("login"), { form: { token: `guess-token-${i}-0123456789` } });
    }
    expect((await from("127.0.0.1", g.url("login"), { form: { token: TOKEN } })).status).toBe(429);
    expect((await from("127.0.0.2", g.url("login"), { form: { token: TOKEN } })).status).toBe(303);
    expect((await from("127.0.0.2", g.url("login"), { form: { user: "ops", password: "correct horse" } })).status).toBe(
      303,
    );
    expect((await from("127.0.0.2", g.url(), { headers: basicAuth("ops", "correct horse") })).status).toBe(200);
  } finally {
    await g.dashboard.close();
  }
});

test("guessing one user name from many clients is throttled per user name, except for clients that signed in as it before", async () => {
  const g = await guardedDashboard();
  try {
    // The admin's usual client signs in once.
    expect((await from("127.0.0.9", g.url(), { headers: basicAuth("ops", "correct horse") })).status).toBe(200);
    // Four strangers, 9 failures each (under the per-client limit), 36 failures against "ops" in all.
    for (let c = 2; c <= 5; c++)
      for (let i = 0; i < 9; i++) await from(`127.0.0.${c}`, g.url(), { headers: basicAuth("ops", `guess-${c}-${i}`) });
    // A fresh client guessing "ops" is refused without a check; the other user names and the token are not.
    expect((await from("127.0.0.6", g.url(), { headers: basicAuth("ops", "correct horse") })).status).toBe(429);
    expect((await from("127.0.0.6", g.url(), { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
    // The admin's known client is let through.
    expect((await from("127.0.0.9", g.url(), { headers: basicAuth("ops", "correct horse") })).status).toBe(200);
  } finally {
    await g.dashboard.close();
  }
});

test("behind a trusted proxy, failures count per forwarded client and Origin may match the forwarded host", async () => {
  const proxied = await startDashboard({
    skipq: t.skipq,
    port: 0,
    auth: { token: TOKEN },
    trustProxy: true,
    env: {},
    logger: quiet,
  });
  const plain = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, env: {}, logger: quiet });
  const bearer = (url: string, token: string, client: string) =>
    fetch(url, { headers: { authorization: `Bearer ${token}`, "x-forwarded-for": `198.51.100.1, ${client}` } });
  try {
    for (let i = 0; i < 10; i++) await bearer(proxied.url, `wrong-token-${i}-0123456789`, "203.0.113.5");
    expect((await bearer(proxied.url, TOKEN, "203.0.113.5")).status).toBe(429);
    expect((await bearer(proxied.url, TOKEN, "203.0.113.6")).status).toBe(200);
    // Not trusted: the header is the client's word, and every request is the socket's address.
    for (let i = 0; i < 10; i++) await bearer(plain.url, `wrong-token-${i}-0123456789`, "203.0.113.5");
    expect((await bearer(plain.url, TOKEN, "203.0.113.6")).status).toBe(429);

    const res = await fetch(new URL("login", proxied.url), {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: "https://ops.example.com",
        "x-forwarded-host": "ops.example.com",
        "x-forwarded-for": "203.0.113.7",
      },
      body: new URLSearchParams({ token: TOKEN }).toString(),
      redirect: "manual",
    });
    expect(res.status).toBe(303);
    const refused = await fetch(new URL("login", plain.url), {
      method: "POST",
      headers: {
        "content-type": "application/x-www-form-urlencoded",
        origin: "https://ops.example.com",
        "x-forwarded-host": "ops.example.com",
      },
      body: new URLSearchParams({ token: TOKEN }).toString(),
      redirect: "manual",
    });
    expect(refused.status).toBe(403);
  } finally {
    await proxied.close();
    await plain.close();
  }
});

test("after sign-out the old session cookie reads no page and performs no action", async () => {
  const id = await deadJob();
  const { cookie, csrf } = await signIn();
  expect((await get("/jobs", { cookie })).status).toBe(200);
  const out = await post("/logout", { _csrf: csrf }, { cookie });
  expect(out.status).toBe(303);
  expect(out.headers.get("set-cookie")).toMatch(/^skipq_session=;.*Max-Age=0/);
  expect((await get("/jobs", { cookie })).status).toBe(401);
  expect((await get(`/jobs/${id}`, { cookie })).status).toBe(401);
  expect((await post(`/jobs/${id}/retry`, { _csrf: csrf, back: "/" }, { cookie })).status).toBe(401);
  expect(await status(id)).toBe("dead");
});

test("sessions live server-side: only a keyed hash of the cookie is stored, and sign-out deletes the row", async () => {
  const count = async () =>
    (await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".dashboard_sessions`)).rows[0].n as number;
  const before = await count();
  const { cookie, csrf } = await signIn();
  expect(await count()).toBe(before + 1);
  const value = decodeURIComponent(cookie.slice(cookie.indexOf("=") + 1));
  const { rows } = await t.db.query(`SELECT id, principal FROM "${t.schema}".dashboard_sessions`);
  expect(rows.some((r) => r.id.includes(value))).toBe(false);
  expect(rows.map((r) => r.principal)).toContain("token");
  await post("/logout", { _csrf: csrf }, { cookie });
  expect(await count()).toBe(before);
});

test("signing in again rotates the session: the cookie presented with the sign-in stops working", async () => {
  const first = await signIn();
  const again = await post("login", { token: TOKEN, next: "/" }, { cookie: first.cookie });
  expect(again.status).toBe(303);
  const second = (again.headers.get("set-cookie") ?? "").split(";")[0] as string;
  expect(second).not.toBe(first.cookie);
  expect((await get("/", { cookie: second })).status).toBe(200);
  expect((await get("/", { cookie: first.cookie })).status).toBe(401);
});

test("a session unused for longer than sessionIdleTimeout is refused, even before sessionTtl", async () => {
  const idle = await startDashboard({
    skipq: t.skipq,
    port: 0,
    auth: { token: TOKEN },
    sessionTtl: "1h",
    sessionIdleTimeout: 1,
    env: {},
  });
  try {
    const res = await fetch(new URL("login", idle.url), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: TOKEN }).toString(),
      redirect: "manual",
    });
    expect(res.status).toBe(303);
    const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
    await until(
      "the idle session is refused",
      async () => (await fetch(idle.url, { headers: { cookie } })).status === 401,
    );
  } finally {
    await idle.close();
  }
});

test("with one sessionSecret, replicas share sessions: a sign-out on one ends the session on the other", async () => {
  const secret = "replica-secret-0123456789abcdef0123456789";
  const options = { skipq: t.skipq, port: 0, auth: { token: TOKEN }, sessionSecret: secret, env: {} };
  const a = await startDashboard(options);
  const b = await startDashboard(options);
  try {
    const res = await fetch(new URL("login", a.url), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: TOKEN }).toString(),
      redirect: "manual",
    });
    const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
    const page = await (await fetch(b.url, { headers: { cookie } })).text();
    const csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] as string;
    const out = await fetch(new URL("logout", b.url), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", cookie },
      body: new URLSearchParams({ _csrf: csrf }).toString(),
      redirect: "manual",
    });
    expect(out.status).toBe(303);
    expect((await fetch(a.url, { headers: { cookie } })).status).toBe(401);
  } finally {
    await a.close();
    await b.close();
  }
});

test("an expired session cookie is refused", async () => {
  const short = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, sessionTtl: 1, env: {} });
  try {
    const res = await fetch(new URL("login", short.url), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded" },
      body: new URLSearchParams({ token: TOKEN }).toString(),
      redirect: "manual",
    });
    expect(res.status).toBe(303);
    const cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
    await until(
      "the session has expired",
      async () => (await fetch(short.url, { headers: { cookie } })).status === 401,
    );
  } finally {
    await short.close();
  }
});

test("the job page shows the result, the progress and each attempt's log lines, redacted and escaped", async () => {
  const logs = [
    {
      attempt: 1,
      worker: "w1",
      startedAt: "2026-01-01T00:00:00.000Z",
      endedAt: "2026-01-01T00:00:01.000Z",
      outcome: "failed",
      error: "Error: <b>nope</b>",
      lines: [{ at: "2026-01-01T00:00:00.500Z", level: "info", msg: "fetching <page>", token: "tok-secret-9" }],
      dropped: 2,
    },
  ];
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at,
                                           created_at, finished_at, result, progress, attempt_logs)
     VALUES (nextval(pg_get_serial_sequence('"${t.schema}".jobs', 'id')), 'default', 'report', '{}', 'completed', 0, 2,
             3, now(), now(), now(), $1, $2, $3) RETURNING id`,
    [
      JSON.stringify({ url: "<s3://bucket/r.pdf>", apiKey: "sk-result-1" }),
      JSON.stringify({ done: 3, total: 3 }),
      JSON.stringify(logs),
    ],
  );
  const page = await (await get(`/jobs/${rows[0].id}`, { authorization: `Bearer ${TOKEN}` })).text();
  expect(page).toContain('<pre id="result">');
  expect(page).toContain("&lt;s3://bucket/r.pdf&gt;");
  expect(page).not.toContain("sk-result-1");
  expect(page).toContain("{&quot;done&quot;:3,&quot;total&quot;:3}");
  expect(page).toContain("attempt 1 on w1, 2026-01-01T00:00:00.000Z → 2026-01-01T00:00:01.000Z: failed");
  expect(page).toContain("fetching &lt;page&gt;");
  expect(page).toContain("… 2 more line(s) not kept");
  expect(page).toContain("error: Error: &lt;b&gt;nope&lt;/b&gt;");
  expect(page).not.toContain("tok-secret-9");
});

test("a client that hangs up halfway through a form body is not logged as a server error", async () => {
  const errors: unknown[] = [];
  const debug: string[] = [];
  const dashboard = await startDashboard({
    skipq: t.skipq,
    port: 0,
    auth: { token: TOKEN },
    env: {},
    logger: { ...quiet, debug: (_o: unknown, msg: string) => debug.push(msg), error: (o: unknown) => errors.push(o) },
  });
  try {
    const { port } = new URL(dashboard.url);
    const socket = net.connect(Number(port), "127.0.0.1");
    await new Promise<void>((resolve) => socket.once("connect", resolve));
    socket.write(
      "POST /login HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\ntoken=",
    );
    await new Promise<void>((resolve) => socket.write("", () => resolve()));
    socket.destroy();
    await until("the dashboard notices the hang-up", () => debug.length + errors.length > 0);
    expect(errors).toEqual([]);
    expect(debug).toEqual(["skipq dashboard: client closed the connection mid-request"]);
  } finally {
    await dashboard.close();
  }
});
