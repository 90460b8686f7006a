/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core):
 * sign in, see the queues, open a dead job, retry it and watch a running
 * worker complete it; without credentials every page answers 401. Saves a
 * screenshot to docs/dashboard.png and .ci-artifacts/.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { type BrowserContext, chromium } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  defineJob,
  FailPermanently,
  type RunningDashboard,
  silentLogger,
  startDashboard,
  type Worker,
} from "../../src/index.js";
import { Rollup } from "../../src/maintenance/rollup.js";
import { type TestQueue, testQueue, until } from "../helpers.js";

const CHROMIUM = process.env.CHROMIUM_PATH ?? "/usr/bin/chromium";
const ARGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-quic",
  "--no-first-run",
  "--disable-component-update",
  "--disable-sync",
];
const TOKEN = "browser-test-token-0123456789";
const invoice = defineJob<{ customer: string; amount: number; apiKey?: string }>("send-invoice", { queue: "billing" });

let t: TestQueue;
let dashboard: RunningDashboard;
let worker: Worker;
let browser: BrowserContext;
let profile: string;
let brokenCustomer = "globex";

beforeAll(async () => {
  t = await testQueue("browser");
  worker = t.skipq
    .worker({ queues: ["billing", "email"], concurrency: 4, pollInterval: "100ms", presenceInterval: "1s" })
    .register(invoice, async ({ customer }) => {
      if (customer === brokenCustomer)
        throw new FailPermanently(`PDF renderer rejected invoice for ${customer}: font <Helvetica> missing`);
    })
    .register("welcome-email", async () => undefined);
  await worker.start();
  // History for the throughput chart: completions spread over the last hour.
  await t.db.query(
    `INSERT INTO "${t.schema}".job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at,
                                           created_at, finished_at)
     SELECT nextval(pg_get_serial_sequence('"${t.schema}".jobs', 'id')), q, 'welcome-email', '{}', 'completed', 0, 1, 10, c, c, c
       FROM generate_series(1, 900) g,
            LATERAL (SELECT CASE WHEN g % 3 = 0 THEN 'billing' ELSE 'email' END AS q,
                            now() - (((g * 37) % 60) || ' minutes')::interval
                                  - ((g % 7) * (60 - (g * 37) % 60) || ' seconds')::interval AS c) x`,
  );
  // The charts read the maintainer's per-minute rollup: one pass over that history now.
  await new Rollup({ store: t.skipq.store, intervalMs: 60_000, logger: silentLogger }).runOnce();
  await t.skipq.enqueue("welcome-email", {}, { queue: "email", delay: "1h" });
  await t.skipq.enqueue(invoice, { customer: "acme", amount: 1200, apiKey: "sk-live-secret" });
  await t.skipq.enqueue(invoice, { customer: "globex", amount: 340, apiKey: "sk-live-secret" });
  await until("one invoice dead", async () => {
    const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE status = 'dead'`);
    return rows[0].n === 1;
  });
  dashboard = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, env: {} });
  profile = mkdtempSync(path.join(os.tmpdir(), "skipq-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ARGS,
    headless: true,
    viewport: { width: 1280, height: 900 },
  });
});

afterAll(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await dashboard?.close();
  await worker?.stop();
  await t?.cleanup();
});

test("sign in, see the queues, retry a dead job and watch it complete", async () => {
  const page = await browser.newPage();
  const first = await page.goto(dashboard.url);
  expect(first?.status()).toBe(401);

  await page.fill('input[name="token"]', "not-the-token-at-all");
  await page.click('button[type="submit"]');
  await expect.poll(() => page.textContent("[role=alert]")).toContain("Wrong credentials");

  await page.fill('input[name="token"]', TOKEN);
  await page.click('button[type="submit"]');
  await page.waitForSelector("table#queues");
  const billing = page.locator('tr[data-queue="billing"]');
  await expect.poll(() => billing.textContent()).toContain("billing");
  expect(await page.locator('tr[data-queue="email"]').textContent()).toContain("email");
  expect(await page.locator("#chart-throughput rect").count()).toBeGreaterThan(30);

  // Live: a job enqueued by another process shows up in the count without a reload.
  await expect.poll(() => page.textContent("#live")).toBe("live");
  const scheduledCell = page.locator('tr[data-queue="email"] [data-f="scheduled"]');
  const scheduledBefore = Number(await scheduledCell.textContent());
  const navigations: string[] = [];
  page.on("framenavigated", (frame) => navigations.push(frame.url()));
  const started = Date.now();
  await promisify(execFile)(
    process.execPath,
    ["bin/skipq.js", "enqueue", "welcome-email", "--queue", "email", "--delay", "1h", "--schema", t.schema],
    { env: { ...process.env } },
  );
  await expect
    .poll(async () => Number(await scheduledCell.textContent()), { timeout: 5000, interval: 50 })
    .toBe(scheduledBefore + 1);
  console.log(`live count updated ${Date.now() - started} ms after the enqueue command started`);
  expect(navigations).toEqual([]);

  mkdirSync(".ci-artifacts", { recursive: true });
  await page.screenshot({ path: ".ci-artifacts/dashboard-overview.png", fullPage: true });
  if (!process.env.CI) await page.screenshot({ path: "docs/dashboard.png", fullPage: false });

  await page.click('a[href="/dead"]');
  await page.waitForSelector("table#dead");
  expect(await page.textContent("table#dead")).toContain("font <Helvetica> missing");
  await page.click("table#dead td:nth-child(6) a");
  await page.waitForSelector("dl#job");
  expect(await page.textContent("#job-status")).toContain("dead");
  expect(await page.textContent("#payload")).toContain("[redacted]");
  expect(await page.textContent("#payload")).not.toContain("sk-live-secret");
  expect(await page.textContent("#last-error")).toContain("PDF renderer rejected invoice for globex");
  await page.screenshot({ path: ".ci-artifacts/dashboard-dead-job.png", fullPage: true });

  brokenCustomer = "nobody"; // the fix is deployed
  await page.click('button:has-text("Retry")');
  await expect.poll(() => page.textContent("[role=status]")).toContain("pending again");
  await expect
    .poll(
      async () => {
        await page.reload();
        return page.textContent("#job-status");
      },
      { timeout: 20_000, interval: 250 },
    )
    .toContain("completed");
  await page.screenshot({ path: ".ci-artifacts/dashboard-retried-job.png", fullPage: true });
  await page.close();
});

test("without credentials every page answers 401, /metrics included", async () => {
  const fresh = await chromium.launch({ executablePath: CHROMIUM, args: ARGS, headless: true });
  try {
    const page = await fresh.newPage();
    for (const p of ["", "jobs", "dead", "metrics", "jobs/1"]) {
      const res = await page.goto(new URL(p, dashboard.url).toString());
      expect(res?.status(), p).toBe(401);
    }
    expect(await page.content()).not.toContain("skipq_queue_jobs");
  } finally {
    await fresh.close();
  }
});
