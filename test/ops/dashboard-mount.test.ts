/**
 * createDashboard() mounted under a base path in Express, Fastify and Hono,
 * each a real server on loopback: signed out every page answers 401; the
 * sign-in form sets a session; a page, a CSRF-checked action and the live
 * event stream work through the framework; paths outside the base path are
 * the framework's own.
 */
import type http from "node:http";
import type { AddressInfo } from "node:net";
import { serve } from "@hono/node-server";
import express from "express";
import Fastify from "fastify";
import { Hono } from "hono";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, createDashboard, type Dashboard } from "../../src/index.js";
import { until, useTestQueue } from "../helpers.js";

const TOKEN = "mount-token-0123456789";
const t = useTestQueue("dashboard_mount");
let dashboard: Dashboard;

beforeAll(async () => {
  dashboard = createDashboard({ skipq: t.skipq, auth: { token: TOKEN }, env: {}, basePath: "/ops/skipq" });
});
afterAll(async () => {
  await dashboard.close();
});

/** Walks the dashboard through a server at `origin`: 401, sign-in, a page, an action, the event stream, a foreign path. */
async function walk(origin: string, foreign: string) {
  const base = `${origin}/ops/skipq`;
  expect((await fetch(`${base}/`)).status).toBe(401);
  expect((await fetch(`${base}/jobs`)).status).toBe(401);
  const signIn = await fetch(`${base}/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", origin },
    body: new URLSearchParams({ token: TOKEN, next: "/ops/skipq/jobs" }).toString(),
    redirect: "manual",
  });
  expect(signIn.status).toBe(303);
  expect(signIn.headers.get("location")).toBe("/ops/skipq/jobs");
  const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0] as string;
  expect(signIn.headers.get("set-cookie")).toContain("Path=/ops/skipq");

  const { id } = await t.skipq.enqueue("mounted", {}, { queue: "mount" });
  const page = await fetch(`${base}/jobs?queue=mount`, { headers: { cookie } });
  expect(page.status).toBe(200);
  expect(page.headers.get("content-security-policy")).toContain("script-src 'self'");
  const html = await page.text();
  expect(html).toContain(`href="/ops/skipq/jobs/${id}"`);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] as string;

  // An event stream through the framework: the cancel below shows up in it.
  const events = await fetch(`${base}/events?jobs=${id}`, { headers: { cookie } });
  expect(events.headers.get("content-type")).toContain("text/event-stream");
  const reader = (events.body as ReadableStream<Uint8Array>).getReader();
  let text = "";
  const read = (async () => {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return;
      text += new TextDecoder().decode(value);
    }
  })().catch(() => undefined);
  await until("the job's state arrives", () => text.includes('"status":"pending"'));

  const cancel = await fetch(`${base}/jobs/${id}/cancel`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin },
    body: new URLSearchParams({ _csrf: csrf, back: "/ops/skipq/jobs" }).toString(),
    redirect: "manual",
  });
  expect(cancel.status).toBe(303);
  expect(cancel.headers.get("location")).toBe("/ops/skipq/jobs");
  expect((await new Admin(t.skipq).getJob(id))?.status).toBe("cancelled");
  await until("the stream shows it cancelled", () => text.includes('"status":"cancelled"'));
  await reader.cancel();
  await read;

  // No CSRF token: refused.
  const forged = await fetch(`${base}/queues/mount/pause`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie, origin },
    body: "",
    redirect: "manual",
  });
  expect(forged.status).toBe(403);
  // Outside the base path: the framework's own route.
  expect(await (await fetch(`${origin}${foreign}`)).text()).toBe("framework route");
  await until("streams closed", () => dashboard.live?.size === 0);
}

async function listening(server: http.Server): Promise<string> {
  if (!server.listening) await new Promise<void>((resolve) => server.once("listening", () => resolve()));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

test("Express: app.use(basePath, dashboard.handle)", async () => {
  const app = express();
  app.use("/ops/skipq", dashboard.handle);
  app.get("/health", (_req, res) => {
    res.send("framework route");
  });
  const server = app.listen(0, "127.0.0.1");
  try {
    await walk(await listening(server), "/health");
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test("Express with express.urlencoded() mounted before the dashboard: every POST, sign-in included, uses the body it parsed", async () => {
  for (const extended of [false, true]) {
    const app = express();
    app.use(express.urlencoded({ extended }));
    app.use("/ops/skipq", dashboard.handle);
    app.get("/health", (_req, res) => {
      res.send("framework route");
    });
    const server = app.listen(0, "127.0.0.1");
    try {
      const origin = await listening(server);
      // The body stream was read by the parser: a sign-in that waited for it would hang, so give it 5 s.
      const signIn = await fetch(`${origin}/ops/skipq/login`, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", origin },
        body: new URLSearchParams({ token: TOKEN, next: "/ops/skipq/jobs" }).toString(),
        redirect: "manual",
        signal: AbortSignal.timeout(5000),
      });
      expect(signIn.status, `extended: ${extended}`).toBe(303);
      await walk(origin, "/health");
    } finally {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
    }
  }
});

test("Fastify: a hijacked route handing request.raw and reply.raw to dashboard.handle", async () => {
  const app = Fastify();
  // Leave form bodies unread: the dashboard reads them itself.
  app.addContentTypeParser("application/x-www-form-urlencoded", (_req, _payload, done) => done(null));
  const mount = (request: { raw: http.IncomingMessage }, reply: { hijack(): void; raw: http.ServerResponse }) => {
    reply.hijack();
    dashboard.handle(request.raw, reply.raw);
  };
  app.all("/ops/skipq", mount);
  app.all("/ops/skipq/*", mount);
  app.get("/health", async () => "framework route");
  await app.listen({ port: 0, host: "127.0.0.1" });
  try {
    await walk(await listening(app.server), "/health");
  } finally {
    app.server.closeAllConnections();
    await app.close();
  }
});

test("Hono on @hono/node-server: dashboard.fetch with the client's address", async () => {
  const app = new Hono<{ Bindings: { incoming: http.IncomingMessage } }>();
  const mount = (c: { req: { raw: Request }; env: { incoming: http.IncomingMessage } }) =>
    dashboard.fetch(c.req.raw, {
      remoteAddress: c.env.incoming.socket.remoteAddress ?? "",
      localAddress: c.env.incoming.socket.localAddress,
      localPort: c.env.incoming.socket.localPort,
    });
  app.all("/ops/skipq", mount);
  app.all("/ops/skipq/*", mount);
  app.get("/health", (c) => c.text("framework route"));
  const server = serve({ fetch: app.fetch, port: 0, hostname: "127.0.0.1" }) as http.Server;
  try {
    await walk(await listening(server), "/health");
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});
