/**
 * Mount the skipq dashboard into your own Node HTTP server, under /ops/skipq.
 * Credentials come from SKIPQ_DASHBOARD_TOKEN (or SKIPQ_DASHBOARD_USER and
 * SKIPQ_DASHBOARD_PASSWORD); without them createDashboard refuses to start.
 * Run: DATABASE_URL=… SKIPQ_DASHBOARD_TOKEN=$(openssl rand -hex 24) node --import tsx examples/dashboard.ts
 * (set EXAMPLE_EXIT=1 to make one signed-in request and stop, as CI does).
 */
import http from "node:http";
import type { AddressInfo } from "node:net";
import { createDashboard, Skipq } from "skipq";

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
await skipq.enqueue("send-email", { to: "ada@example.com" });

const dashboard = createDashboard({ skipq, basePath: "/ops/skipq" });
const server = http.createServer((req, res) => {
  // Requests outside /ops/skipq fall through to your application.
  dashboard.handle(req, res, () => res.end("your application\n"));
});
await new Promise<void>((resolve) => server.listen(Number(process.env.PORT ?? 3000), "127.0.0.1", resolve));
const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/ops/skipq/`;
console.log(`dashboard at ${url}`);

if (process.env.EXAMPLE_EXIT) {
  const anonymous = await fetch(url);
  const signedIn = await fetch(url, { headers: { authorization: `Bearer ${process.env.SKIPQ_DASHBOARD_TOKEN}` } });
  const page = await signedIn.text();
  console.log(`without credentials: ${anonymous.status}; with the token: ${signedIn.status}`);
  console.log(page.includes('data-queue="default"') ? "the default queue is listed" : "queue missing");
  server.closeAllConnections();
  server.close();
  await skipq.close();
}
