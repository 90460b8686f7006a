/**
 * The dashboard's client files reach the browser as written: the live script
 * and the stylesheet are real files (src/ops/dashboard/client/, linted by
 * biome) built into clientAssets.ts by scripts/dashboard-assets.mjs, and the
 * Content-Security-Policy's style hash is the served stylesheet's. A stale
 * build of the module, or a hash that is not the text served, fails here.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { afterAll, beforeAll, expect, test } from "vitest";
import { createDashboard, type Dashboard } from "../../src/index.js";
import { CSS, CSS_SHA256, LIVE_JS } from "../../src/ops/dashboard/clientAssets.js";
import { useTestQueue } from "../helpers.js";

const TOKEN = "assets-token-0123456789abcdef";
const client = (name: string) =>
  readFileSync(new URL(`../../src/ops/dashboard/client/${name}`, import.meta.url), "utf8");

const t = useTestQueue("dashboard_assets");
let dashboard: Dashboard;

beforeAll(async () => {
  dashboard = createDashboard({ skipq: t.skipq, auth: { token: TOKEN }, env: {} });
});
afterAll(async () => {
  await dashboard.close();
});

const get = (path: string, signedIn = true) =>
  dashboard.fetch(
    new Request(`http://127.0.0.1${path}`, { headers: signedIn ? { authorization: `Bearer ${TOKEN}` } : {} }),
    { remoteAddress: "127.0.0.1" },
  );

test("clientAssets.ts is what scripts/dashboard-assets.mjs builds from the client files as they are now", () => {
  // Exits 1, naming the module, when what it would write differs from what is there.
  execFileSync(process.execPath, [new URL("../../scripts/dashboard-assets.mjs", import.meta.url).pathname, "--check"]);
  expect(LIVE_JS).toBe(client("live.js"));
  expect(CSS).toBe(client("dashboard.css"));
  expect(CSS_SHA256).toBe(createHash("sha256").update(CSS).digest("base64"));
});

test("the served script is client/live.js byte for byte", async () => {
  const res = await get("/assets/live.js");
  expect(res.status).toBe(200);
  expect(res.headers.get("content-type")).toBe("text/javascript; charset=utf-8");
  expect(await res.text()).toBe(client("live.js"));
});

test("every page's one stylesheet is client/dashboard.css, and the policy allows it by its hash", async () => {
  for (const [path, signedIn] of [
    ["/", true],
    ["/jobs", true],
    ["/login", false],
  ] as const) {
    const res = await get(path, signedIn);
    const text = await res.text();
    const styles = [...text.matchAll(/<style>([\s\S]*?)<\/style>/g)].map((m) => m[1]);
    expect(styles, path).toEqual([client("dashboard.css")]);
    const hash = createHash("sha256")
      .update(styles[0] ?? "")
      .digest("base64");
    expect(res.headers.get("content-security-policy"), path).toContain(`style-src 'sha256-${hash}';`);
  }
});
