/**
 * The skipq dashboard as a Next.js App Router route handler, mounted at /ops/skipq (docs/dashboard.md,
 * "Next.js"): GET and POST hand every request to `dashboard.fetch`. It imports nothing from Next.js (a
 * route handler is a function from a web Request to a Response), so test/docs/nextjs-route.test.ts drives
 * this very file with real Requests against PostgreSQL.
 *
 * Only behind a reverse proxy you run that writes X-Forwarded-For (nginx `proxy_set_header
 * X-Forwarded-For $remote_addr;`), with Next listening on loopback only (`next start -H 127.0.0.1`): a
 * route handler sees no socket, and Next.js keeps an X-Forwarded-For a client sent itself. The header's
 * last value is then the address the proxy saw, the one value here a client cannot choose; whatever a
 * client put before it is never read. A request without the header gets 500 from `dashboard.fetch`
 * (no client address), never a page. Credentials come from SKIPQ_DASHBOARD_TOKEN (or _USER and
 * _PASSWORD); the dashboard is created on the first request, so `next build` needs no database.
 */
import { createDashboard, type Dashboard } from "skipq";

export const runtime = "nodejs";
export const dynamic = "force-dynamic";

// One dashboard per process, kept on globalThis: `next dev` re-evaluates this module on every change, and a
// dashboard per evaluation would leave a connection pool behind each time.
const held = globalThis as typeof globalThis & { skipqDashboard?: Dashboard };

function handle(request: Request): Promise<Response> {
  held.skipqDashboard ??= createDashboard({
    connectionString: process.env.DATABASE_URL,
    schema: process.env.SKIPQ_SCHEMA ?? "skipq",
    basePath: "/ops/skipq",
  });
  // The last X-Forwarded-For value: written by the proxy in front (it overwrites or appends the header).
  const peer = request.headers.get("x-forwarded-for")?.split(",").at(-1)?.trim() ?? "";
  return held.skipqDashboard.fetch(request, { remoteAddress: peer });
}

export { handle as GET, handle as POST };
