/**
 * Who a dashboard answers, decided by the connection and never by a header:
 * with `auth: false` only a loopback peer whose Host names loopback on the
 * server's port (or an allowed host) is answered, so a DNS-rebinding page
 * cannot read the CSRF token or act; `dashboard.fetch` takes the peer address
 * only from its caller and refuses without one, so no client shares another's
 * sign-in throttle bucket and auth: false never answers a remote client.
 */
import http from "node:http";
import { expect, test } from "vitest";
import { createDashboard, startDashboard } from "../../src/index.js";
import { useTestQueue } from "../helpers.js";

const quiet = { debug() {}, info() {}, warn() {}, error() {} };
const t = useTestQueue("dashboard_boundary");

/** One request to 127.0.0.1:port with a Host header of our choosing, as a rebinding browser sends it. */
function request(
  port: number,
  path: string,
  options: { host: string; method?: string; headers?: Record<string, string>; body?: string },
): Promise<{ status: number; body: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    const req = http.request({
      host: "127.0.0.1",
      port,
      path,
      method: options.method ?? "GET",
      agent: false,
      headers: { host: options.host, ...options.headers },
    });
    req.on("error", reject);
    req.on("response", (res) => {
      let body = "";
      res.on("data", (c: Buffer) => {
        body += c.toString();
      });
      res.on("end", () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.end(options.body);
  });
}

test("with auth: false, a request whose Host is not a loopback name with the server's port is refused (DNS rebinding)", async () => {
  const d = await startDashboard({ skipq: t.skipq, port: 0, auth: false, env: {}, logger: quiet });
  const port = Number(new URL(d.url).port);
  try {
    for (const host of [`127.0.0.1:${port}`, `localhost:${port}`, `LOCALHOST:${port}`, `[::1]:${port}`]) {
      expect((await request(port, "/", { host })).status, host).toBe(200);
    }
    for (const host of [
      `evil.example:${port}`,
      "evil.example",
      `127.0.0.1:${port + 1}`,
      `127.0.0.1.evil.example:${port}`,
      "127.0.0.1",
    ]) {
      const res = await request(port, "/", { host });
      expect(res.status, host).toBe(403);
      expect(res.body, host).not.toContain("_csrf");
    }
    // The rebinding page's own form, with its own Origin and the token it could not read: refused before anything runs.
    const { id } = await t.skipq.enqueue("rebound", {}, { queue: "boundary" });
    const post = await request(port, `/jobs/${id}/cancel`, {
      host: `evil.example:${port}`,
      method: "POST",
      headers: { origin: `http://evil.example:${port}`, "content-type": "application/x-www-form-urlencoded" },
      body: "",
    });
    expect(post.status).toBe(403);
    const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
    expect(rows[0].status).toBe("pending");
  } finally {
    await d.close();
  }
});

test("with auth: false, allowedHosts names the other Host values answered; with credentials it is refused as meaningless", async () => {
  const d = await startDashboard({
    skipq: t.skipq,
    port: 0,
    auth: false,
    allowedHosts: ["dev.internal", "proxy.internal:8080"],
    env: {},
    logger: quiet,
  });
  const port = Number(new URL(d.url).port);
  try {
    expect((await request(port, "/", { host: `dev.internal:${port}` })).status).toBe(200);
    expect((await request(port, "/", { host: "proxy.internal:8080" })).status).toBe(200);
    expect((await request(port, "/", { host: `proxy.internal:${port}` })).status).toBe(403);
    expect((await request(port, "/", { host: `other.internal:${port}` })).status).toBe(403);
  } finally {
    await d.close();
  }
  expect(() =>
    createDashboard({ skipq: t.skipq, auth: { token: "boundary-token-0123456789" }, allowedHosts: ["x"], env: {} }),
  ).toThrow(/auth: false only/);
  expect(() => createDashboard({ skipq: t.skipq, auth: false, allowedHosts: ["not a host/"], env: {} })).toThrow(
    /allowedHosts must be/,
  );
});

test("dashboard.fetch with auth: false answers only a loopback peer its caller passes, whatever the URL's host says", async () => {
  const dashboard = createDashboard({ skipq: t.skipq, auth: false, env: {}, logger: quiet });
  try {
    const page = (remoteAddress: string) =>
      dashboard.fetch(new Request("http://127.0.0.1:4680/"), { remoteAddress, localPort: 4680 });
    expect((await page("127.0.0.1")).status).toBe(200);
    expect((await page("::ffff:127.0.0.1")).status).toBe(200);
    // A remote client that sends Host: 127.0.0.1:4680 (the Request URL's host is its Host header).
    expect((await page("203.0.113.9")).status).toBe(403);
    // No localPort: the Host's port cannot be checked, so nothing is answered.
    expect((await dashboard.fetch(new Request("http://127.0.0.1:4680/"), { remoteAddress: "127.0.0.1" })).status).toBe(
      403,
    );
    // No peer at all: refused with what to pass.
    const none = await (dashboard.fetch as (r: Request) => Promise<Response>)(new Request("http://127.0.0.1:4680/"));
    expect(none.status).toBe(500);
    expect(await none.text()).toContain("remoteAddress");
  } finally {
    await dashboard.close();
  }
});

test("dashboard.fetch without remoteAddress checks no credential, so a stranger's guesses never share the admin's throttle bucket", async () => {
  const token = "boundary-token-0123456789";
  const dashboard = createDashboard({ skipq: t.skipq, auth: { token }, env: {}, logger: quiet });
  const call = (auth: string, context?: { remoteAddress: string }) =>
    (dashboard.fetch as (r: Request, c?: { remoteAddress: string }) => Promise<Response>)(
      new Request("http://dashboard.example/", { headers: { authorization: `Bearer ${auth}` } }),
      context,
    );
  try {
    for (let i = 0; i < 12; i++) {
      const res = await call(`wrong-${i}-0123456789abcdef`);
      expect(res.status).toBe(500);
      expect(await res.text()).toContain("remoteAddress");
    }
    // With peers passed, the stranger is throttled on its own and the admin is not.
    for (let i = 0; i < 10; i++)
      expect((await call(`wrong-${i}-0123456789abcdef`, { remoteAddress: "203.0.113.9" })).status).toBe(401);
    expect((await call(token, { remoteAddress: "203.0.113.9" })).status).toBe(429);
    expect((await call(token, { remoteAddress: "198.51.100.7" })).status).toBe(200);
  } finally {
    await dashboard.close();
  }
});
