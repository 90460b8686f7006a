/**
 * The webhook sink's SSRF guards, against real local HTTP servers: it never
 * follows a redirect (a 3xx is a failed delivery, and the redirect target
 * receives nothing), it POSTs only to allowed hosts when `allowedHosts` is
 * set, and with `allowPrivateAddresses: false` it refuses loopback and private
 * addresses, checked on the address it connects to (after DNS).
 */
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { expect, test } from "vitest";
import { createDashboard, Outbox, type OutboxEvent, Skipq, ValidationError, webhookSink } from "../../src/index.js";
import { DATABASE_URL, useTestQueue } from "../helpers.js";
import { SECRET, webhookServer } from "./helpers.js";

const t = useTestQueue("webhook");

const event: OutboxEvent = {
  id: "1",
  topic: "orders.created",
  key: "order-1",
  event: { n: 1 },
  headers: {},
  attempt: 1,
  createdAt: new Date(),
};

/** A server that answers every request with `status` and a Location to `location`. */
async function redirector(status: number, location: string) {
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests++;
    req.resume();
    res.writeHead(status, { location }).end();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`,
    requests: () => requests,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}

test("a redirect is a failed delivery: the signed body never reaches the redirect target", async () => {
  const target = await webhookServer();
  const outbox = new Outbox(t.skipq);
  for (const status of [301, 302, 303, 307, 308]) {
    const hop = await redirector(status, target.url);
    try {
      const sink = webhookSink({ url: hop.url, secret: SECRET, headers: { authorization: "Bearer receiver-only" } });
      await expect(sink.deliver(event, new AbortController().signal)).rejects.toThrow(
        new RegExp(`answered ${status} .*redirects are not followed`),
      );
      await t.db.query(`DELETE FROM "${t.schema}".outbox`);
      await outbox.publish(t.skipq.pool, "orders.created", "order-1", { n: 1 });
      const relay = outbox.relay({ sink });
      await relay.runOnce();
      await relay.stop();
      const { rows } = await t.db.query(`SELECT delivered_at, last_error FROM "${t.schema}".outbox`);
      expect(rows[0].delivered_at).toBeNull();
      expect(rows[0].last_error).toContain(`answered ${status}`);
      expect(hop.requests()).toBe(2);
    } finally {
      await hop.close();
    }
  }
  expect(target.received).toEqual([]);
  await target.close();
});

test("with allowedHosts, a URL on any other host fails without a request", async () => {
  const hook = await webhookServer();
  const port = new URL(hook.url).port;
  try {
    const allowed = webhookSink({ url: hook.url, secret: SECRET, allowedHosts: ["127.0.0.1"] });
    await allowed.deliver(event, new AbortController().signal);
    expect(hook.received).toHaveLength(1);
    const byEvent = webhookSink({
      url: () => `http://localhost:${port}/hook`,
      secret: SECRET,
      allowedHosts: ["hooks.example.com", "*.example.org"],
    });
    await expect(byEvent.deliver(event, new AbortController().signal)).rejects.toThrow(
      /host localhost is not in allowedHosts/,
    );
    expect(hook.received).toHaveLength(1);
    expect(() => webhookSink({ url: hook.url, secret: SECRET, allowedHosts: ["hooks.example.com"] })).toThrow(
      ValidationError,
    );
    expect(() => webhookSink({ url: hook.url, secret: SECRET, allowedHosts: ["https://x.example"] })).toThrow(
      /host names/,
    );
  } finally {
    await hook.close();
  }
});

test("with allowPrivateAddresses false, loopback is refused by address and by a name that resolves to it", async () => {
  const hook = await webhookServer();
  const port = new URL(hook.url).port;
  try {
    for (const url of [
      hook.url,
      `http://localhost:${port}/hook`,
      `http://[::ffff:127.0.0.1]:${port}/hook`,
      "http://169.254.169.254/latest/meta-data/",
      "http://10.1.2.3/",
      "https://192.168.0.1/",
      "http://0.0.0.0/",
      "http://[::1]/",
      "http://[fd00::1]/",
      "http://[fe80::1]/",
    ]) {
      const sink = webhookSink({ url: () => url, secret: SECRET, allowPrivateAddresses: false });
      await expect(sink.deliver(event, new AbortController().signal), url).rejects.toThrow(
        /private or loopback address/,
      );
    }
    expect(hook.received).toEqual([]);
    // The default allows them (receivers on an internal network are common).
    await webhookSink({ url: hook.url, secret: SECRET }).deliver(event, new AbortController().signal);
    expect(hook.received).toHaveLength(1);
  } finally {
    await hook.close();
  }
});

test("only http and https URLs are accepted", async () => {
  expect(() => webhookSink({ url: "file:///etc/passwd", secret: SECRET })).toThrow(/http or https/);
  const sink = webhookSink({ url: () => "ftp://example.com/", secret: SECRET });
  await expect(sink.deliver(event, new AbortController().signal)).rejects.toThrow(/http or https/);
});

test("a webhook URL's path (where Slack, Discord and Teams keep the token) is never stored, logged or shown", async () => {
  const TOKEN_PATH = "/services/T0TEAM/B0HOOK/XyZsecretWebhookToken";
  const answering = (status: number, location?: string) =>
    http.createServer((req, res) => {
      req.resume();
      res.writeHead(status, location ? { location } : {}).end();
    });
  const logged: unknown[] = [];
  const logger = { debug() {}, info() {}, warn: (obj: unknown, msg: string) => logged.push(obj, msg), error() {} };
  const skipq = new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger });
  const servers = [answering(500), answering(302, `https://elsewhere.example${TOKEN_PATH}?sig=1`)];
  const dashboard = createDashboard({
    skipq,
    auth: { token: "admin-token-0123456789", viewer: { token: "viewer-token-0123456789" } },
    env: {},
  });
  try {
    const urls: string[] = [];
    for (const server of servers) {
      server.listen(0, "127.0.0.1");
      await once(server, "listening");
      urls.push(`http://127.0.0.1:${(server.address() as AddressInfo).port}${TOKEN_PATH}?token=qs-secret`);
    }
    // And a url function that returns no URL at all: its text is described, never quoted.
    urls.push(`not a url ${TOKEN_PATH}`);
    const outbox = new Outbox(skipq);
    for (const [i, url] of urls.entries()) {
      await t.db.query(`DELETE FROM "${t.schema}".outbox`);
      await outbox.publish(skipq.pool, "orders.created", `order-${i}`, { n: 1 });
      const relay = outbox.relay({ sink: webhookSink({ url: () => url, secret: SECRET }) });
      await relay.runOnce();
      await relay.stop();
      const { rows } = await t.db.query(`SELECT last_error FROM "${t.schema}".outbox`);
      expect(rows[0].last_error, url).toBeTruthy();
      expect(rows[0].last_error, url).not.toMatch(/XyZsecretWebhookToken|qs-secret|T0TEAM/);
      const page = await dashboard.fetch(
        new Request("http://127.0.0.1/outbox", {
          headers: { authorization: "Bearer viewer-token-0123456789" },
        }),
        { remoteAddress: "127.0.0.1" },
      );
      expect(page.status).toBe(200);
      expect(await page.text()).not.toMatch(/XyZsecretWebhookToken|qs-secret|T0TEAM/);
    }
    expect(logged.length).toBeGreaterThan(0);
    const log = JSON.stringify(logged, (_k, v) => (v instanceof Error ? { message: v.message, stack: v.stack } : v));
    expect(log).not.toMatch(/XyZsecretWebhookToken|qs-secret|T0TEAM/);
    expect(log).toContain("http://127.0.0.1:");
  } finally {
    await dashboard.close();
    for (const server of servers) server.close();
    await skipq.close();
  }
});

test("an outbox error stored before webhook URLs were described shows no path on the outbox page", async () => {
  await t.db.query(`DELETE FROM "${t.schema}".outbox`);
  await new Outbox(t.skipq).publish(t.skipq.pool, "orders.created", "old-1", { n: 1 });
  await t.db.query(
    `UPDATE "${t.schema}".outbox SET attempts = 1, last_error = 'Error: webhook https://hooks.slack.com/services/T0/B0/OldStoredToken answered 500'`,
  );
  const dashboard = createDashboard({ skipq: t.skipq, auth: { token: "admin-token-0123456789" }, env: {} });
  try {
    const page = await dashboard.fetch(
      new Request("http://127.0.0.1/outbox", {
        headers: { authorization: "Bearer admin-token-0123456789" },
      }),
      { remoteAddress: "127.0.0.1" },
    );
    const text = await page.text();
    expect(text).toContain("https://hooks.slack.com/");
    expect(text).not.toContain("OldStoredToken");
  } finally {
    await dashboard.close();
  }
});
