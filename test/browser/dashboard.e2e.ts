/**
 * The dashboard in a real browser (Debian's Chromium through playwright-core):
 * sign in, watch a count change live after an enqueue from another process,
 * open a queue and edit a limit, filter the jobs, bulk-retry a dead one, follow
 * its page live to completed, visit every page (axe-core: no serious or
 * critical violation, light and dark; the sign-in page none of any impact), try the keyboard, sign out; without
 * credentials every page answers 401. Times are shown in the browser's zone (Asia/Tokyo here), and at 375 px
 * no page scrolls sideways. Screenshots of every page go to
 * .ci-artifacts/ and, outside CI, docs/.
 */
import { execFile } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import os from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { type BrowserContext, chromium, type Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  Admin,
  defineJob,
  FailPermanently,
  type RunningDashboard,
  Scheduler,
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
const AXE = readFileSync(createRequire(import.meta.url).resolve("axe-core/axe.min.js"), "utf8");
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
  await new Scheduler(t.skipq).add("0 6 * * *", "nightly-report", { full: true }, { queue: "email" }).runOnce();
  dashboard = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, env: {} });
  profile = mkdtempSync(path.join(os.tmpdir(), "skipq-chromium-"));
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    args: ARGS,
    headless: true,
    viewport: { width: 1280, height: 900 },
    // A zone without daylight saving, so the local times are UTC + 9 h all year.
    timezoneId: "Asia/Tokyo",
  });
});

afterAll(async () => {
  await browser?.close();
  if (profile) rmSync(profile, { recursive: true, force: true });
  await dashboard?.close();
  await worker?.stop();
  await t?.cleanup();
});

/**
 * axe-core in the page (through the DevTools protocol, so the page's CSP stays as it is): serious and critical
 * violations, or with `every` violations of any impact (landmark rules such as landmark-one-main and region
 * are "moderate").
 */
async function accessibility(page: Page, label: string, every = false): Promise<void> {
  await page.evaluate(AXE);
  // A string, evaluated in the page: this file is typed without the DOM library.
  const violations =
    (await page.evaluate(`axe.run(document, { runOnly: ["wcag2a", "wcag2aa", "best-practice"] }).then((r) =>
    r.violations.filter((v) => ${every} || v.impact === "serious" || v.impact === "critical")
      .map((v) => v.id + " (" + v.impact + "): " + v.nodes.slice(0, 3).map((n) => n.target.join(" ")).join(", ")))`)) as string[];
  expect(violations, label).toEqual([]);
}

/**
 * The page's timestamps as the script left them: each <time> shows its datetime in Tokyo time, zone named, with
 * the server's UTC text in its title. Returns how many it checked.
 */
async function localTimes(page: Page, scope: string): Promise<number> {
  const times =
    (await page.evaluate(`Array.from(document.querySelectorAll(${JSON.stringify(`${scope} time[datetime]`)}))
    .map((el) => ({ iso: el.getAttribute("datetime"), text: el.textContent, title: el.getAttribute("title") || "", local: el.hasAttribute("data-local") }))`)) as Array<{
      iso: string;
      text: string;
      title: string;
      local: boolean;
    }>;
  for (const t of times) {
    const tokyo = new Date(new Date(t.iso).getTime() + 9 * 3_600_000).toISOString();
    const utc = `${t.iso.slice(0, 10)} ${t.iso.slice(11, 19)}Z`;
    expect(t, scope).toEqual({ ...t, local: true, text: `${tokyo.slice(0, 10)} ${tokyo.slice(11, 19)} GMT+9` });
    expect(t.title.startsWith(utc), `${scope}: ${t.title}`).toBe(true);
  }
  return times.length;
}

/** At a phone's width, the document is no wider than the viewport (tables scroll inside their own wrappers). */
async function fitsWidth(page: Page, label: string): Promise<void> {
  const { scrollWidth, innerWidth } = (await page.evaluate(
    "({ scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth })",
  )) as { scrollWidth: number; innerWidth: number };
  expect(scrollWidth, `${label}: document ${scrollWidth} px wide in a ${innerWidth} px viewport`).toBeLessThanOrEqual(
    innerWidth,
  );
}

/** A screenshot into .ci-artifacts/ and, outside CI, docs/ (the docs show these). */
async function shot(page: Page, name: string, fullPage = false): Promise<void> {
  mkdirSync(".ci-artifacts", { recursive: true });
  await page.screenshot({ path: `.ci-artifacts/${name}.png`, fullPage: true });
  if (!process.env.CI) await page.screenshot({ path: `docs/${name}.png`, fullPage });
}

test("sign in, watch counts live, filter, bulk-retry, follow a job's timeline, edit a limit, every page accessible, sign out", async () => {
  const page = await browser.newPage();
  const first = await page.goto(dashboard.url);
  expect(first?.status()).toBe(401);
  // The sign-in page: its content in a <main> landmark, and no violation of any impact.
  expect(await page.locator("main h1 + form, main > form").count()).toBe(1);
  await accessibility(page, "sign-in", true);

  await page.fill('input[name="token"]', "not-the-token-at-all");
  await page.click('button[type="submit"]');
  await expect.poll(() => page.textContent("[role=alert]")).toContain("Wrong credentials");
  await accessibility(page, "sign-in, wrong credentials", true);

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
  const onNavigate = (frame: { url(): string }) => navigations.push(frame.url());
  page.on("framenavigated", onNavigate);
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
  page.off("framenavigated", onNavigate);
  await accessibility(page, "overview");
  await shot(page, "dashboard");

  // Keyboard: the first Tab lands on the skip link, visibly focused.
  await page.keyboard.press("Tab");
  expect(await page.evaluate("document.activeElement.textContent")).toBe("Skip to content");
  expect(await page.evaluate("getComputedStyle(document.activeElement).outlineStyle")).not.toBe("none");

  // Phone width and dark mode.
  await page.setViewportSize({ width: 390, height: 844 });
  await shot(page, "dashboard-phone");
  await page.emulateMedia({ colorScheme: "dark" });
  await accessibility(page, "overview, dark");
  await shot(page, "dashboard-dark");
  await page.emulateMedia({ colorScheme: "light" });
  await page.setViewportSize({ width: 1280, height: 900 });

  // A queue: charts, and a limit edited.
  await page.click('tr[data-queue="billing"] a[href="/queues/billing"]');
  await page.waitForSelector("#chart-depth");
  await page.fill('#limits input[name="concurrency"]', "3");
  await page.click('#limits button[type="submit"]');
  await expect.poll(() => page.textContent("[role=status]")).toContain("Limits of billing saved.");
  expect((await new Admin(t.skipq).getQueueLimits("billing"))[0]?.concurrency).toBe(3);
  // The browser refuses 0 itself (min="1"); the server refuses what the form cannot check: a rate without a window.
  await page.fill('#limits input[name="rateLimit"]', "10");
  await page.click('#limits button[type="submit"]');
  await expect.poll(() => page.textContent("[role=status]")).toContain("needs both a number of starts and a window");
  expect((await new Admin(t.skipq).getQueueLimits("billing"))[0]?.rate).toBeNull();
  await accessibility(page, "queue");
  await shot(page, "dashboard-queue");

  // Dead jobs by fingerprint.
  await page.click('a[href="/dead"]');
  await page.waitForSelector("table#dead");
  expect(await page.textContent("table#dead")).toContain("font <Helvetica> missing");
  // A page with nothing live loads the script too, for its times.
  expect(await localTimes(page, "table#dead")).toBe(1);
  await accessibility(page, "dead");
  await shot(page, "dashboard-dead");

  // The explorer: filter, select, bulk-retry with the count shown first.
  brokenCustomer = "nobody"; // the fix is deployed
  await page.click('nav a[href="/jobs"]');
  await page.fill('form[role=search] input[name="queue"]', "billing");
  await page.selectOption('form[role=search] select[name="status"]', "dead");
  await page.click('form[role=search] button[type="submit"]');
  await expect.poll(() => page.locator("#jobs tbody tr").count()).toBe(1);
  // The state tabs: the current one marked, its count the list's.
  expect(await page.textContent('#states a[aria-current="page"]')).toBe("dead 1");
  await accessibility(page, "jobs");
  await shot(page, "dashboard-jobs");
  const deadId = (await page.getAttribute("#jobs tbody tr", "data-watch-job")) as string;
  await page.check(`input[name=ids][value="${deadId}"]`);
  await page.selectOption('#bulk select[name="action"]', "retry");
  await page.click('#bulk button[value="selected"]');
  await expect.poll(() => page.textContent("#bulk-count")).toContain("this touches 1 job(s)");
  await accessibility(page, "bulk confirm");
  await shot(page, "dashboard-bulk");
  await page.click("#bulk-confirm");
  await expect.poll(() => page.textContent("[role=status]")).toContain("retry: 1 job(s) changed.");

  // The job's page follows it live to completed (no reload), timeline and redaction included.
  await page.goto(new URL(`jobs/${deadId}`, dashboard.url).toString());
  await expect.poll(() => page.textContent("#job-status"), { timeout: 20_000, interval: 100 }).toContain("completed");
  expect(await page.textContent("#payload")).toContain("[redacted]");
  expect(await page.textContent("#payload")).not.toContain("sk-live-secret");
  expect(await page.textContent("#timeline")).toMatch(/Attempt 1 started/);
  expect(await page.textContent("#timeline")).toMatch(/Completed/);
  // Every attempt, newest first: the retried run that completed, then the one that died, with its error.
  await page.reload();
  await expect.poll(() => page.locator("#attempts tbody tr").count()).toBe(2);
  expect(await page.locator('#attempts tbody tr:nth-child(1) [data-f="outcome"]').textContent()).toBe("completed");
  expect(await page.locator('#attempts tbody tr:nth-child(2) [data-f="outcome"]').textContent()).toBe("dead");
  expect(await page.locator("#attempts tbody tr:nth-child(2)").textContent()).toContain("font <Helvetica> missing");
  // Every time on the page is shown in the browser's zone, named, the UTC text in its title.
  expect(await localTimes(page, "main")).toBeGreaterThan(5);
  await accessibility(page, "job");
  await shot(page, "dashboard-job");

  for (const [link, name, selector] of [
    ["/workers", "dashboard-workers", "table#workers"],
    ["/cron", "dashboard-cron", "table#cron"],
    ["/outbox", "dashboard-outbox", "#outbox-summary"],
    ["/audit", "dashboard-audit", "table#audit"],
  ] as const) {
    await page.click(`nav a[href="${link}"]`);
    await page.waitForSelector(selector);
    await accessibility(page, name);
    await shot(page, name);
  }
  expect(await page.textContent("table#audit")).toMatch(/bulk retry[\s\S]*queue limits[\s\S]*sign-in/);

  // Charts: the x axis' times are local too; bars only where the rollup has data.
  await page.click('nav a[href="/"]');
  await page.waitForSelector("#chart-throughput");
  expect(await page.textContent("#chart-throughput text.x-end")).toMatch(/^\d{2}:\d{2} GMT\+9$/);
  expect(await page.locator("#chart-throughput text.y-max").count()).toBe(1);

  // A phone (375 px): no page scrolls sideways.
  await page.setViewportSize({ width: 375, height: 812 });
  for (const p of [
    "",
    "jobs",
    "jobs?queue=billing&status=dead",
    `jobs/${deadId}`,
    "queues/billing",
    "dead",
    "workers",
    "cron",
    "outbox",
    "audit",
  ]) {
    await page.goto(new URL(p, dashboard.url).toString());
    await fitsWidth(page, p || "overview");
  }
  await page.setViewportSize({ width: 1280, height: 900 });

  await page.click('button:has-text("Sign out")');
  await page.waitForSelector('input[name="token"]');
  expect(await page.textContent("#signin-hint")).toContain("SKIPQ_DASHBOARD_TOKEN");
  await page.setViewportSize({ width: 375, height: 812 });
  await fitsWidth(page, "sign-in");
  await page.setViewportSize({ width: 1280, height: 900 });
  expect((await page.goto(dashboard.url))?.status()).toBe(401);
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
