/**
 * The dashboard's live feed, explorer and roles from code: an admin and a
 * read-only credential, the event stream a page subscribes to, a count
 * changing on an enqueue, and the explorer's payload filter.
 * Run: DATABASE_URL=… node --import tsx examples/dashboard-live.ts
 */
import type { AddressInfo } from "node:net";
import { Admin, Skipq, startDashboard } from "skipq";

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
const admin = "admin-token-change-me-0123456789";
const viewer = "viewer-token-change-me-0123456789";
const running = await startDashboard({ skipq, port: 0, auth: { token: admin, viewer: { token: viewer } } });
const base = `http://127.0.0.1:${(running.server.address() as AddressInfo).port}`;

// What a page's script does: subscribe to the queue counts.
const events = await fetch(`${base}/events?topics=queues`, { headers: { authorization: `Bearer ${viewer}` } });
const reader = (events.body as ReadableStream<Uint8Array>).getReader();
await skipq.enqueue("invoice", { customer: { id: 42 } }, { queue: "billing" });
let text = "";
while (!/"queue":"billing","pending":1/.test(text)) text += new TextDecoder().decode((await reader.read()).value);
console.log("live: billing shows 1 pending");
await reader.cancel();

// The read-only credential reads but cannot act.
const refused = await fetch(`${base}/queues/billing/pause`, {
  method: "POST",
  headers: { authorization: `Bearer ${viewer}`, "content-type": "application/x-www-form-urlencoded" },
});
console.log(`viewer pausing a queue: ${refused.status}`);

// The explorer's filters, from code: jobs whose payload has customer.id 42.
const found = await new Admin(skipq).searchJobs({ queue: "billing", payloadPath: "customer.id", payloadValue: "42" });
console.log(`jobs with customer.id 42: ${found.length}`);

await running.close();
await skipq.close();
