/**
 * The Next.js route handler of docs/dashboard.md, examples/nextjs/app/ops/skipq/[[...path]]/route.ts,
 * imported as Next.js would import it and driven with real Requests (Next.js itself stays out of CI: the
 * file imports nothing from it): signed out 401, the sign-in form, a page, a CSRF-checked action; the
 * client address is the proxy's X-Forwarded-For value only (what a client put before it is never read,
 * and without the header nothing is answered).
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { useTestQueue } from "../helpers.js";

const TOKEN = "nextjs-route-token-0123456789";
const ORIGIN = "https://app.example";
const BASE = `${ORIGIN}/ops/skipq`;
type RouteHandler = (request: Request) => Promise<Response>;
const t = useTestQueue("nextjs_route");
let route: { GET: RouteHandler; POST: RouteHandler; runtime: string; dynamic: string };
const saved = { schema: process.env.SKIPQ_SCHEMA, token: process.env.SKIPQ_DASHBOARD_TOKEN };

beforeAll(async () => {
  // What the route reads, as a deployment would set it.
  process.env.SKIPQ_SCHEMA = t.schema;
  process.env.SKIPQ_DASHBOARD_TOKEN = TOKEN;
  route = await import("../../examples/nextjs/app/ops/skipq/[[...path]]/route.js");
});
afterAll(async () => {
  await (globalThis as { skipqDashboard?: { close(): Promise<void> } }).skipqDashboard?.close();
  process.env.SKIPQ_SCHEMA = saved.schema;
  process.env.SKIPQ_DASHBOARD_TOKEN = saved.token;
  if (saved.schema === undefined) delete process.env.SKIPQ_SCHEMA;
  if (saved.token === undefined) delete process.env.SKIPQ_DASHBOARD_TOKEN;
});

/** A request as the proxy in front hands it to Next: `peer` is what it wrote into X-Forwarded-For. */
function proxied(path: string, peer: string | undefined, init: RequestInit = {}): Request {
  const headers = new Headers(init.headers);
  if (peer !== undefined) headers.set("x-forwarded-for", peer);
  return new Request(`${BASE}${path}`, { ...init, headers, redirect: "manual" });
}

const form = (fields: Record<string, string>, extra: Record<string, string> = {}): RequestInit => ({
  method: "POST",
  headers: { "content-type": "application/x-www-form-urlencoded", origin: ORIGIN, ...extra },
  body: new URLSearchParams(fields).toString(),
});

test("the route runs on Node.js, uncached, and exports GET and POST", () => {
  expect(route.runtime).toBe("nodejs");
  expect(route.dynamic).toBe("force-dynamic");
  expect(typeof route.GET).toBe("function");
  expect(typeof route.POST).toBe("function");
});

test("through the route: 401 signed out, sign-in, a page, and a CSRF-checked cancel", async () => {
  const peer = "198.51.100.20";
  expect((await route.GET(proxied("/", peer))).status).toBe(401);
  expect((await route.GET(proxied("/jobs", peer))).status).toBe(401);

  const signIn = await route.POST(proxied("/login", peer, form({ token: TOKEN, next: "/ops/skipq/jobs" })));
  expect(signIn.status).toBe(303);
  expect(signIn.headers.get("location")).toBe("/ops/skipq/jobs");
  expect(signIn.headers.get("set-cookie")).toContain("Path=/ops/skipq");
  const cookie = (signIn.headers.get("set-cookie") ?? "").split(";")[0] as string;

  const { id } = await t.skipq.enqueue("report", {}, { queue: "next" });
  const page = await route.GET(proxied("/jobs?queue=next", peer, { headers: { cookie } }));
  expect(page.status).toBe(200);
  const html = await page.text();
  expect(html).toContain(`href="/ops/skipq/jobs/${id}"`);
  const csrf = /name="_csrf" value="([^"]+)"/.exec(html)?.[1] as string;
  expect(csrf).toBeTruthy();

  // Without the CSRF token the action changes nothing; with it the job is cancelled.
  const forged = await route.POST(proxied(`/jobs/${id}/cancel`, peer, form({ back: "/ops/skipq/jobs" }, { cookie })));
  expect(forged.status).toBe(403);
  expect((await new Admin(t.skipq).getJob(id))?.status).toBe("pending");
  const cancel = await route.POST(
    proxied(`/jobs/${id}/cancel`, peer, form({ _csrf: csrf, back: "/ops/skipq/jobs" }, { cookie })),
  );
  expect(cancel.status).toBe(303);
  expect(cancel.headers.get("location")).toBe("/ops/skipq/jobs");
  expect((await new Admin(t.skipq).getJob(id))?.status).toBe("cancelled");
});

test("the client address is the proxy's value only: a forged X-Forwarded-For prefix never picks the throttle bucket", async () => {
  const stranger = "203.0.113.50";
  // Ten wrong guesses, each with a different address the client wrote before the one the proxy appended.
  for (let i = 0; i < 10; i++) {
    const guess = proxied("/", `10.0.${i}.1, ${stranger}`, {
      headers: { authorization: `Bearer wrong-${i}-0123456789` },
    });
    expect((await route.GET(guess)).status).toBe(401);
  }
  // The stranger is throttled whatever it forges; the admin, behind another address, is not.
  const again = proxied("/", `192.0.2.99, ${stranger}`, { headers: { authorization: `Bearer ${TOKEN}` } });
  expect((await route.GET(again)).status).toBe(429);
  const admin = proxied("/", "198.51.100.21", { headers: { authorization: `Bearer ${TOKEN}` } });
  expect((await route.GET(admin)).status).toBe(200);
});

test("a request that did not come through the proxy (no X-Forwarded-For) is answered with nothing but a 500", async () => {
  const res = await route.GET(proxied("/", undefined, { headers: { authorization: `Bearer ${TOKEN}` } }));
  expect(res.status).toBe(500);
  const text = await res.text();
  expect(text).toContain("remoteAddress");
  expect(text).not.toContain("<table");
});
