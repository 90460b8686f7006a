/**
 * Outbox: publish events in the same transaction as your business write, and
 * let a relay deliver them to a webhook, at least once and in order per key.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/outbox.ts
 */
import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { Outbox, SIGNATURE_HEADER, Skipq, TIMESTAMP_HEADER, verifyWebhook, webhookSink } from "skipq";

const SECRET = "a-long-shared-secret-for-hmac";
const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
const outbox = new Outbox(skipq);

// A receiving service: checks the signature, prints what arrives.
const received: string[] = [];
const server = http.createServer(async (req, res) => {
  let body = "";
  for await (const chunk of req) body += chunk;
  const ok = verifyWebhook(SECRET, String(req.headers[TIMESTAMP_HEADER]), body, String(req.headers[SIGNATURE_HEADER]));
  if (!ok) return void res.writeHead(401).end();
  const { key, event } = JSON.parse(body);
  received.push(`${key}:${event.status}`);
  res.writeHead(204).end();
});
server.listen(0, "127.0.0.1");
await once(server, "listening");

// 1. Business write + event, one transaction: both commit, or neither.
const client = await skipq.pool.connect();
try {
  await client.query("BEGIN");
  // … UPDATE orders SET status = 'paid' WHERE id = 42 …
  await outbox.publish(client, "orders.status", "order-42", { status: "paid" });
  await outbox.publish(client, "orders.status", "order-42", { status: "shipped" });
  await client.query("COMMIT");
} finally {
  client.release();
}
await outbox.publish(skipq.pool, "orders.status", "order-7", { status: "paid" });

// 2. A relay delivers them (run it in a long-lived process: relay.start()).
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/events`;
const relay = outbox.relay({ sink: webhookSink({ url, secret: SECRET, timeout: "5s" }) });
while ((await relay.runOnce()) > 0);
await relay.stop();

console.log(`delivered: ${received.join(", ")}`);
server.close();
await skipq.close();
