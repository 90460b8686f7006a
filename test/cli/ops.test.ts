/**
 * `skipq dashboard` and `skipq worker --metrics-port` as real processes: the
 * dashboard answers 401 without the token and serves the schema with it, and
 * refuses a non-loopback host without credentials; the worker's metrics port
 * serves skipq_* metrics counting the jobs it ran.
 */
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { expect, test } from "vitest";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";
import { skipq, start } from "./run.js";

const t = useTestQueue("cli-ops");

test("skipq dashboard serves the schema behind the token and stops on SIGTERM", async () => {
  await t.skipq.enqueue("send-email", { to: "ada@example.com" }, { queue: "cli-dash" });
  const token = "cli-dashboard-token-0123456789";
  const d = start(["dashboard", "--port", "0"], { DATABASE_URL, SKIPQ_SCHEMA: t.schema, SKIPQ_DASHBOARD_TOKEN: token });
  const url = (await until("listening", () => /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(d.stderr())?.[1], 30_000)) as string;
  expect((await fetch(url)).status).toBe(401);
  const page = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
  expect(page.status).toBe(200);
  expect(await page.text()).toContain('data-queue="cli-dash"');
  d.child.kill("SIGTERM");
  const result = await d.exited;
  expect(result.code, result.stderr).toBe(0);
  expect(result.stderr).not.toContain(token);
});

test("skipq dashboard refuses a non-loopback host without credentials", async () => {
  const result = await skipq(["dashboard", "--host", "0.0.0.0", "--port", "0"], {
    DATABASE_URL,
    SKIPQ_SCHEMA: t.schema,
  });
  expect(result.code).not.toBe(0);
  expect(result.stderr).toContain("without credentials");
});

test("skipq dashboard on loopback without credentials prints a one-time token that signs in", async () => {
  const d = start(["dashboard", "--port", "0"], { DATABASE_URL, SKIPQ_SCHEMA: t.schema });
  const url = (await until("listening", () => /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(d.stderr())?.[1], 30_000)) as string;
  const token = (await until("token printed", () => /one-time token (\S+)/.exec(d.stderr())?.[1], 10_000)) as string;
  expect((await fetch(url, { headers: { authorization: `Bearer ${token}` } })).status).toBe(200);
  d.child.kill("SIGTERM");
  expect((await d.exited).code).toBe(0);
});

/** Starts `skipq dashboard` with these flags and environment; resolves with its URL and the running process. */
async function dashboard(flags: string[], env: Record<string, string> = {}) {
  const d = start(["dashboard", "--port", "0", ...flags], {
    DATABASE_URL,
    SKIPQ_SCHEMA: t.schema,
    SKIPQ_DASHBOARD_TOKEN: "cli-proxy-token-0123456789",
    ...env,
  });
  const url = (await until("listening", () => /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(d.stderr())?.[1], 30_000)) as string;
  const signIn = (headers: Record<string, string> = {}) =>
    fetch(new URL("login", url), {
      method: "POST",
      headers: { "content-type": "application/x-www-form-urlencoded", ...headers },
      body: new URLSearchParams({ token: "cli-proxy-token-0123456789" }).toString(),
      redirect: "manual",
    });
  const stop = async () => {
    d.child.kill("SIGTERM");
    const result = await d.exited;
    expect(result.code, result.stderr).toBe(0);
    return result;
  };
  return { url, signIn, stop };
}

test("skipq dashboard --trust-proxy sets a Secure cookie for a sign-in that reached the proxy over HTTPS", async () => {
  const d = await dashboard(["--trust-proxy"]);
  try {
    const viaTls = await d.signIn({ "x-forwarded-proto": "https" });
    expect(viaTls.status).toBe(303);
    expect(viaTls.headers.get("set-cookie")).toMatch(/; Secure/);
    const plain = await d.signIn({ "x-forwarded-proto": "http" });
    expect(plain.headers.get("set-cookie")).not.toMatch(/; Secure/);
  } finally {
    await d.stop();
  }
  // Without the flag the header is the client's word, and is ignored.
  const untrusted = await dashboard([]);
  try {
    const res = await untrusted.signIn({ "x-forwarded-proto": "https" });
    expect(res.headers.get("set-cookie")).not.toMatch(/; Secure/);
  } finally {
    await untrusted.stop();
  }
});

test("skipq dashboard --secure-cookies marks every cookie Secure", async () => {
  const d = await dashboard(["--secure-cookies"]);
  try {
    expect((await d.signIn()).headers.get("set-cookie")).toMatch(/HttpOnly; SameSite=Strict; .*Secure/);
  } finally {
    await d.stop();
  }
});

test("with SKIPQ_DASHBOARD_SESSION_SECRET or --session-secret-file, a session outlives a restart", async () => {
  const secret = "cli-session-secret-0123456789abcdef0123";
  const dir = mkdtempSync(path.join(os.tmpdir(), "skipq-secret-"));
  const file = path.join(dir, "secret");
  writeFileSync(file, `${secret}\n`, { mode: 0o600 });
  try {
    const first = await dashboard([], { SKIPQ_DASHBOARD_SESSION_SECRET: secret });
    const cookie = ((await first.signIn()).headers.get("set-cookie") ?? "").split(";")[0] as string;
    const result = await first.stop();
    expect(result.stderr).not.toContain(secret);
    const second = await dashboard(["--session-secret-file", file]);
    try {
      expect((await fetch(second.url, { headers: { cookie } })).status).toBe(200);
    } finally {
      await second.stop();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

test("skipq dashboard refuses a short session secret and a missing secret file, saying what to do", async () => {
  const short = await skipq(["dashboard", "--port", "0"], {
    DATABASE_URL,
    SKIPQ_SCHEMA: t.schema,
    SKIPQ_DASHBOARD_SESSION_SECRET: "too-short",
  });
  expect(short.code).toBe(2);
  expect(short.stderr).toContain("at least 32 characters");
  const missing = await skipq(["dashboard", "--port", "0", "--session-secret-file", "/nonexistent/secret"], {
    DATABASE_URL,
    SKIPQ_SCHEMA: t.schema,
  });
  expect(missing.code).toBe(2);
  expect(missing.stderr).toContain("--session-secret-file");
});

test("skipq worker --metrics-port serves skipq_* metrics for the jobs it ran", async () => {
  await t.skipq.enqueueMany(
    Array.from({ length: 3 }, (_, i) => ({
      job: "send-email",
      payload: { to: `m${i}@example.com` },
      queue: "cli-metrics",
    })),
  );
  const w = start(["worker", "--tasks", "examples/tasks.mjs", "--queue", "cli-metrics", "--metrics-port", "0"], {
    DATABASE_URL,
    SKIPQ_SCHEMA: t.schema,
  });
  const url = (await until(
    "metrics listening",
    () => /(http:\/\/127\.0\.0\.1:\d+\/metrics)/.exec(w.stderr())?.[1],
    30_000,
  )) as string;
  const text = await until(
    "three completed",
    async () => {
      const body = await (await fetch(url)).text();
      return body.includes('skipq_jobs_completed_total{queue="cli-metrics",kind="send-email"} 3') && body;
    },
    30_000,
  );
  expect(text).toContain("skipq_listener_connected");
  w.child.kill("SIGTERM");
  expect((await w.exited).code).toBe(0);
});

test("skipq stats prints health warnings first, and lists them under health in --json", async () => {
  // A pending job that was already tried, of a kind no live worker handles.
  await t.db.query(`INSERT INTO "${t.schema}".jobs (queue, kind, attempts) VALUES ('cli-health', 'orphan-kind', 1)`);
  const env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  const text = await skipq(["stats"], env);
  expect(text.code, text.stderr).toBe(0);
  expect(text.stdout).toMatch(/^warning \(unhandled-kind\): .*"orphan-kind"/m);
  const json = await skipq(["stats", "--json"], env);
  const parsed = JSON.parse(json.stdout) as { health: Array<{ check: string; message: string }> };
  expect(parsed.health.some((w) => w.check === "unhandled-kind" && w.message.includes("orphan-kind"))).toBe(true);
});
