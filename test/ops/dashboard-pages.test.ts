/**
 * The dashboard's views of what skipq runs: a job's timeline, the workers
 * with their in-flight jobs, cron schedules (last and next tick, run now,
 * pause), a queue's limits and paused keys, edited with validation, and the
 * jobs list's state tabs with their counts.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, type RunningDashboard, Scheduler, startDashboard } from "../../src/index.js";
import { insertRawJob, until, useTestQueue } from "../helpers.js";
import { dashboardSession, signIn } from "./dashboardSession.js";

const TOKEN = "pages-token-0123456789";
const t = useTestQueue("dashboard_pages");
let d: RunningDashboard;
let admin: Admin;
let csrf: string;
const browser = dashboardSession(() => d.url);
const { get, post } = browser;

beforeAll(async () => {
  admin = new Admin(t.skipq);
  d = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, env: {} });
  ({ csrf } = await signIn(browser, { token: TOKEN }));
});
afterAll(async () => {
  await d.close();
});

const flash = (res: Response) => decodeURIComponent(res.headers.get("set-cookie") ?? "");

test("a job's timeline: enqueued, the last attempt's start on its worker, its end with the error", async () => {
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, locked_at,
                                           locked_by, last_error, created_at, finished_at)
     VALUES (nextval(pg_get_serial_sequence('"${t.schema}".jobs', 'id')), 'mail', 'send', '{}', 'dead', 0, 3, 3,
             now() - interval '50 seconds', now() - interval '40 seconds', 'host:1:abc', 'Error: <smtp> refused',
             now() - interval '2 minutes', now() - interval '30 seconds') RETURNING id::text`,
  );
  const page = await (await get(`jobs/${rows[0].id}`)).text();
  const timeline = /<ol id="timeline"[^>]*>([\s\S]*?)<\/ol>/.exec(page)?.[1] ?? "";
  expect(timeline).toContain("<strong>Enqueued</strong>");
  expect(timeline).toContain('Attempts 1–2: see <a href="#attempts">Attempts</a>');
  expect(timeline).toMatch(
    /Attempt 3 started<\/strong> <time[^>]*>[^<]*<\/time> on <code>host:1:abc<\/code> · waited 10 s/,
  );
  expect(timeline).toMatch(/Failed for good \(dead\)<\/strong> <time[^>]*>[^<]*<\/time> · ran 10 s/);
  expect(timeline).toContain("Error: &lt;smtp&gt; refused");
});

test("the job page lists every attempt, newest first: start, end, worker, outcome and error, escaped", async () => {
  const worker = t.skipq
    .worker({ queues: ["flaky"], pollInterval: "50ms", workerId: "w<flaky>", backoff: { baseMs: 1, jitter: 0 } })
    .register("flaky", (payload, ctx) => {
      const { password } = payload as { password: string };
      if (ctx.attempt <= 2) throw new Error(`<b>refused</b> attempt ${ctx.attempt} password=${password}`);
    });
  await worker.start();
  try {
    const { id } = await t.skipq.enqueue("flaky", { password: "pw-sekr1t-77" }, { queue: "flaky" });
    await until("completed", async () => (await admin.getJob(id))?.status === "completed");
    const page = await (await get(`jobs/${id}`)).text();
    const table = /<table id="attempts">([\s\S]*?)<\/table>/.exec(page)?.[1] ?? "";
    const rows = [...table.matchAll(/<tr data-attempt="(\d+)" data-source="(\w+)">([\s\S]*?)<\/tr>/g)];
    expect(rows.map((r) => [r[1], r[2]])).toEqual([
      ["3", "row"],
      ["2", "recorded"],
      ["1", "recorded"],
    ]);
    const [done, second, first] = rows.map((r) => r[3] as string) as [string, string, string];
    expect(done).toContain('<td data-f="outcome">completed</td>');
    expect(second).toContain('<td data-f="outcome">failed</td>');
    expect(second).toContain("&lt;b&gt;refused&lt;/b&gt; attempt 2");
    expect(first).toContain("&lt;b&gt;refused&lt;/b&gt; attempt 1");
    for (const row of [done, second, first]) {
      expect(row).toContain("<code>w&lt;flaky&gt;</code>");
      expect(row.match(/<time datetime=/g)?.length).toBe(2);
    }
    expect(page).not.toContain("pw-sekr1t-77");
    expect(page).not.toContain("<b>refused");
    expect(page).not.toContain('id="attempts-unrecorded"');
  } finally {
    await worker.stop();
  }
});

test("the job page says how many attempts have no record (a row written before attempts were recorded)", async () => {
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at,
                                           created_at, finished_at, attempt_logs)
     VALUES (nextval(pg_get_serial_sequence('"${t.schema}".jobs', 'id')), 'mail', 'send', '{}', 'dead', 0, 4, 4, now(),
             now(), now(), '[{"attempt": 4, "worker": "w1", "startedAt": "2026-01-01T00:00:00Z",
                              "endedAt": "2026-01-01T00:00:01Z", "outcome": "failed", "error": "boom", "lines": [], "dropped": 0}]')
     RETURNING id::text`,
  );
  const page = await (await get(`jobs/${rows[0].id}`)).text();
  expect(page).toMatch(/<tr data-attempt="4" data-source="recorded">/);
  expect(page).toMatch(/<p class="muted" id="attempts-unrecorded">3 attempt\(s\) have no record/);
});

test("the workers page lists each live worker with the jobs it runs now", async () => {
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const worker = t.skipq
    .worker({ queues: ["slow"], pollInterval: "50ms", presenceInterval: "1s", maintenance: false })
    .register("long", () => held);
  await worker.start();
  try {
    const { id } = await t.skipq.enqueue("long", {}, { queue: "slow" });
    await until("running", async () => (await admin.getJob(id))?.status === "running");
    const page = await until("listed with its job", async () => {
      const text = await (await get("workers")).text();
      return text.includes(`href="/jobs/${id}">long #${id}</a>`) ? text : undefined;
    });
    expect(page).toContain('<table id="workers">');
    expect(page).toContain('data-live="workers"');
  } finally {
    release();
    await worker.stop();
  }
});

test("cron: last and next tick shown; pause skips ticks, run now enqueues once, resume runs again", async () => {
  const scheduler = new Scheduler(t.skipq).add("0 * * * *", "hourly-report", { report: true });
  await scheduler.runOnce({ now: new Date("2026-02-01T00:30:00Z") });
  const page = await (await get("cron")).text();
  expect(page).toMatch(/<tr data-cron="hourly-report">/);
  expect(page).toContain("<code>0 * * * *</code>");
  expect(page).toContain("2026-02-01 00:30:00Z");

  expect(flash(await post("cron/hourly-report/pause", { _csrf: csrf, back: "/cron" }))).toContain("is paused");
  expect(await scheduler.runOnce({ now: new Date("2026-02-01T01:05:00Z") })).toEqual([]);
  const paused = (await admin.cronSchedules()).find((c) => c.name === "hourly-report");
  expect(paused?.pausedAt).not.toBeNull();
  expect(paused?.lastTick.toISOString()).toBe("2026-02-01T01:00:00.000Z");
  expect(await (await get("cron")).text()).toContain("<strong>paused</strong>");

  expect(flash(await post("cron/hourly-report/run", { _csrf: csrf, back: "/cron" }))).toContain("runs once");
  const [manual] = await scheduler.runOnce({ now: new Date("2026-02-01T01:10:00Z") });
  expect(manual?.jobIds).toHaveLength(1);
  const job = await admin.getJob(manual?.jobIds[0] as string);
  expect(job?.payload).toEqual({ report: true });
  expect(await scheduler.runOnce({ now: new Date("2026-02-01T01:10:00Z") })).toEqual([]);

  await post("cron/hourly-report/resume", { _csrf: csrf, back: "/cron" });
  const [resumed] = await scheduler.runOnce({ now: new Date("2026-02-01T02:05:00Z") });
  expect(resumed?.ticks.map((x) => x.toISOString())).toEqual(["2026-02-01T02:00:00.000Z"]);
  expect(flash(await post("cron/no-such/run", { _csrf: csrf, back: "/cron" }))).toContain(
    "There is no schedule no-such",
  );
  expect((await post("cron/hourly-report/run", { back: "/cron" })).status).toBe(403);
});

test("limits and paused keys are edited on the queue's page, and bad input changes nothing", async () => {
  const ok = await post("queues/limited/limits", {
    _csrf: csrf,
    back: "/queues/limited",
    concurrency: "5",
    keyConcurrency: "",
    rateLimit: "100",
    rateWindow: "1m",
    ratePerKey: "true",
  });
  expect(flash(ok)).toContain("Limits of limited saved.");
  expect(ok.headers.get("location")).toBe("/queues/limited");
  const saved = await admin.getQueueLimits("limited");
  expect(saved[0]).toMatchObject({
    concurrency: 5,
    keyConcurrency: null,
    rate: { limit: 100, window: 60_000, perKey: true },
  });
  const page = await (await get("queues/limited")).text();
  expect(page).toMatch(/name="concurrency" type="number"[^>]*value="5"/);
  expect(saved[0]?.fairness).toBeNull();
  expect(page).toContain('value="60000ms"');

  for (const [bad, message] of [
    [{ concurrency: "0" }, "concurrency"],
    [{ concurrency: "-3" }, "concurrency must be a whole number"],
    [{ rateLimit: "10", rateWindow: "" }, "needs both"],
    [{ rateLimit: "10", rateWindow: "soon" }, "rate.window"],
    [{ fair: "true", weights: "acme=0" }, "fairness.weights"],
    [{ fair: "true", weights: "acme=two" }, "must be key=number"],
    [{ fair: "false", weights: "acme=2" }, "set Fair to yes"],
  ] as Array<[Record<string, string>, string]>) {
    const res = await post("queues/limited/limits", { _csrf: csrf, back: "/queues/limited", ...bad });
    expect(flash(res), JSON.stringify(bad)).toContain(message);
    expect((await admin.getQueueLimits("limited"))[0], JSON.stringify(bad)).toEqual(saved[0]);
  }
  const fair = await post("queues/limited/limits", {
    _csrf: csrf,
    back: "/queues/limited",
    concurrency: "5",
    fair: "true",
    weights: "acme=2, globex=0.5",
  });
  expect(flash(fair)).toContain("Limits of limited saved.");
  expect((await admin.getQueueLimits("limited"))[0]?.fairness).toEqual({ weights: { acme: 2, globex: 0.5 } });
  expect(await (await get("queues/limited")).text()).toContain('value="acme=2, globex=0.5"');
  await admin.setQueueLimits("limited", { concurrency: 5, rate: { limit: 100, window: "1m", perKey: true } });

  expect(
    flash(await post("queues/limited/keys/pause", { _csrf: csrf, back: "/queues/limited", key: "acme", for: "10m" })),
  ).toContain("Key acme of limited is paused until");
  expect(await (await get("queues/limited")).text()).toMatch(/<table id="paused-keys">[\s\S]*<td>acme<\/td>/);
  expect(
    flash(await post("queues/limited/keys/pause", { _csrf: csrf, back: "/queues/limited", key: "x", for: "forever" })),
  ).toContain("err:");
  expect((await admin.pausedKeys("limited")).map((k) => k.key)).toEqual(["acme"]);
  expect(
    flash(await post("queues/limited/keys/resume", { _csrf: csrf, back: "/queues/limited", key: "acme" })),
  ).toContain("resumed");
  expect(await admin.pausedKeys("limited")).toEqual([]);
});

test("the outbox page shows the backlog per key, failing keys first, and retries a key now", async () => {
  const s = `"${t.schema}"`;
  await t.db.query(
    `INSERT INTO ${s}.outbox (topic, key, event, attempts, run_at, last_error, created_at)
     VALUES ('orders', 'order-1', '{}', 0, now(), NULL, now() - interval '5 minutes'),
            ('orders', 'order-1', '{}', 0, now(), NULL, now() - interval '4 minutes'),
            ('orders', 'order-2', '{}', 3, now() + interval '1 hour', 'Error: broker <down> password=hunter2', now() - interval '2 minutes')`,
  );
  const page = await (await get("outbox")).text();
  expect(page).toContain("3 undelivered event(s) over 2 key(s); 1 failed at least once");
  const rows = [...page.matchAll(/<tr data-key="([^"]+)">/g)].map((m) => m[1]);
  expect(rows).toEqual(["order-2", "order-1"]);
  expect(page).toContain("Error: broker &lt;down&gt;");
  const retried = await post("outbox/retry", { _csrf: csrf, topic: "orders", key: "order-2", back: "/outbox" });
  expect(flash(retried)).toContain("1 event(s) of key order-2 are due now.");
  const { rows: due } = await t.db.query(`SELECT run_at <= now() AS due FROM ${s}.outbox WHERE key = 'order-2'`);
  expect(due[0].due).toBe(true);
  expect((await post("outbox/retry", { _csrf: csrf, topic: "orders", key: "", back: "/outbox" })).status).toBe(400);
});

test("the jobs list's state tabs count each state for the queue and kind filter, the current one marked", async () => {
  const live = (status: string, kind: string, extra: Record<string, string> = {}) =>
    insertRawJob(t, { queue: "tabs", kind, status, ...extra });
  const done = (status: string, kind: string) => insertRawJob(t, { queue: "tabs", kind, status }, { history: true });
  await live("waiting", "count");
  for (let i = 0; i < 3; i++) await live("pending", "count");
  await live("pending", "count", { run_at: new Date(Date.now() + 3_600_000).toISOString() });
  for (let i = 0; i < 2; i++)
    await live("running", "count", { locked_by: "w", lease: "1", lease_expires_at: "infinity" });
  for (let i = 0; i < 4; i++) await done("completed", "count");
  for (let i = 0; i < 2; i++) await done("dead", "count");
  await done("cancelled", "count");
  await live("pending", "other");
  await done("completed", "other");
  await done("dead", "other");
  await live("pending", "count-elsewhere"); // in another queue below
  await t.db.query(`UPDATE "${t.schema}".jobs SET queue = 'tabs-other' WHERE kind = 'count-elsewhere'`);

  const real = async (kind?: string) => {
    const { rows } = await t.db.query(
      `SELECT status, count(*)::int AS n FROM "${t.schema}".all_jobs WHERE queue = 'tabs' AND ($1::text IS NULL OR kind = $1)
        GROUP BY status`,
      [kind ?? null],
    );
    const counts: Record<string, number> = { waiting: 0, pending: 0, running: 0, completed: 0, dead: 0, cancelled: 0 };
    for (const r of rows) counts[r.status] = r.n;
    return { ...counts, all: Object.values(counts).reduce((a, b) => a + b, 0) };
  };
  const tabs = (page: string) => {
    const nav = /<nav class="tabs states" id="states" aria-label="Job states">([\s\S]*?)<\/nav>/.exec(page)?.[1] ?? "";
    const counts = Object.fromEntries(
      [...nav.matchAll(/data-f="count-(\w+)">([^<]*)</g)].map((m) => [m[1], Number(m[2])]),
    );
    const current = [...nav.matchAll(/data-state="(\w+)" aria-current="page"/g)].map((m) => m[1]);
    return { nav, counts, current };
  };

  const all = tabs(await (await get("jobs?queue=tabs")).text());
  expect(all.counts).toEqual(await real());
  expect(all.counts).toMatchObject({
    waiting: 1,
    pending: 5,
    running: 2,
    completed: 5,
    dead: 3,
    cancelled: 1,
    all: 17,
  });
  expect(all.current).toEqual(["all"]);

  const dead = tabs(await (await get("jobs?queue=tabs&kind=count&status=dead")).text());
  expect(dead.counts).toEqual(await real("count"));
  expect(dead.counts).toMatchObject({ pending: 4, dead: 2, all: 14 });
  expect(dead.current).toEqual(["dead"]);
  // Each tab keeps the queue and kind and changes the state only.
  expect(dead.nav).toContain('href="/jobs?queue=tabs&amp;kind=count&amp;status=running" data-state="running"');
  expect(dead.nav).toContain('href="/jobs?queue=tabs&amp;kind=count" data-state="all"');

  // The history's states are counted up to 1000: beyond, the tab says so.
  await t.db.query(
    `INSERT INTO "${t.schema}".job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at)
     SELECT nextval(pg_get_serial_sequence('"${t.schema}".jobs', 'id')), 'tabs-many', 'k', '{}', 'completed', 0, 1, 1, now(), now(), now()
       FROM generate_series(1, 1001)`,
  );
  const many = await (await get("jobs?queue=tabs-many")).text();
  expect(many).toContain('data-f="count-completed">1000+<');
  expect(many).toContain('data-f="count-all">1000+<');
  // A filter beyond queue and kind: the counts say what they count.
  expect(await (await get("jobs?queue=tabs&q=boom")).text()).toContain('id="states-note"');
});

test("on a phone: every page has a viewport meta tag, every table scrolls inside its own wrapper, and nav and forms wrap", async () => {
  await admin.pauseKey("phone", "tenant-1", "10m");
  const parent = await t.skipq.enqueue("phone.parent", {}, { queue: "phone" });
  const child = await t.skipq.enqueue("phone.child", {}, { queue: "phone", dependsOn: [parent.id] });
  const signIn = await (await fetch(new URL("login", d.url))).text();
  const pages = ["", "jobs", `jobs/${child.id}`, "queues/phone", "workers", "cron", "dead", "outbox", "audit"];
  let tables = 0;
  for (const page of [signIn, ...(await Promise.all(pages.map(async (p) => (await get(p)).text())))]) {
    expect(page).toContain('<meta name="viewport" content="width=device-width,initial-scale=1">');
    for (const m of page.matchAll(/<table\b/g)) {
      tables++;
      const before = page.slice(0, m.index);
      // The nearest opening <div> before the table is its scroll wrapper, and nothing closed it in between.
      const open = before.lastIndexOf("<div");
      expect(before.slice(open), page.slice(m.index, m.index + 40)).toMatch(
        /^<div class="scroll" tabindex="0" role="region" aria-label="[^"]+">$/,
      );
    }
  }
  expect(tables).toBeGreaterThanOrEqual(6); // queues (overview and the queue), jobs, workflow, paused keys, audit
  // The stylesheet as written (client/dashboard.css, formatted), its whitespace and last semicolons dropped.
  const css = (/<style>([\s\S]*?)<\/style>/.exec(signIn)?.[1] ?? "")
    .replace(/\/\*[\s\S]*?\*\//g, "")
    .replace(/\s*([{}:;,()])\s*/g, "$1")
    .replace(/;}/g, "}");
  expect(css).toContain(".scroll{overflow-x:auto}");
  expect(css).toMatch(/header\{[^}]*flex-wrap:wrap/);
  expect(css).toMatch(/header nav\{[^}]*flex-wrap:wrap/);
  expect(css).toMatch(/\.filters\{[^}]*flex-wrap:wrap/);
  expect(css).toMatch(/\.states\{[^}]*flex-wrap:wrap/);
  expect(css).toContain("minmax(min(320px,100%),1fr)");
});

test("the real sign-in page names where its token is configured and shows no secret", async () => {
  const page = await (await fetch(new URL("login", d.url))).text();
  expect(page).toContain('id="signin-hint"');
  expect(page).toContain("<code>SKIPQ_DASHBOARD_TOKEN</code>");
  expect(page).not.toContain("SKIPQ_DASHBOARD_PASSWORD"); // this dashboard takes a token only
  expect(page).not.toContain(TOKEN);
});
