/**
 * The live feed: server-sent events at <base>/events, fed by one hub per
 * dashboard. A count changes on an enqueue, a watched job's status on its
 * outcome, and 50 open streams cost the database what one costs: one listener
 * session, and the same statements per second (counted on the dashboard's own
 * pool and in pg_stat_activity).
 */
import http from "node:http";
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, createDashboard, type Dashboard, Skipq, silentLogger } from "../../src/index.js";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

const TOKEN = "live-test-token-0123456789";
const t = useTestQueue("dashboard_live");
let pool: pg.Pool;
let statements = 0;
let viewer: Skipq;
let dashboard: Dashboard;
let server: http.Server;
let origin: string;
let cookie: string;

beforeAll(async () => {
  // The dashboard's own pool, counting every statement it sends.
  pool = new pg.Pool({ connectionString: DATABASE_URL, max: 4, application_name: "skipq-live-test-dashboard" });
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    statements++;
    return query(...args);
  };
  viewer = new Skipq({ pool, schema: t.schema, logger: silentLogger });
  dashboard = createDashboard({ skipq: viewer, auth: { token: TOKEN }, env: {}, basePath: "/ops" });
  server = http.createServer((req, res) => dashboard.handle(req, res));
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  origin = `http://127.0.0.1:${port}`;
  const res = await fetch(`${origin}/ops/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token: TOKEN, next: "/ops/" }).toString(),
    redirect: "manual",
  });
  cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
});

afterAll(async () => {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
  await dashboard.close();
  await pool.end();
});

const listenerName = () => `skipq:live:${t.schema}`.slice(0, 63);

interface Stream {
  events: Array<{ event: string; data: string }>;
  close(): void;
}

/** An event-stream client: collects every event it is sent. */
function open(query: string, headers: Record<string, string> = { cookie }): Promise<Stream & { status: number }> {
  return new Promise((resolve, reject) => {
    const events: Stream["events"] = [];
    const req = http.get(`${origin}/ops/events?${query}`, { headers }, (res) => {
      let buffer = "";
      res.setEncoding("utf8");
      res.on("data", (chunk: string) => {
        buffer += chunk;
        for (let end = buffer.indexOf("\n\n"); end >= 0; end = buffer.indexOf("\n\n")) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(end + 2);
          const event = /^event: (.*)$/m.exec(block)?.[1];
          const data = /^data: (.*)$/m.exec(block)?.[1];
          if (event && data !== undefined) events.push({ event, data });
        }
      });
      res.on("error", () => undefined);
      resolve({ status: res.statusCode ?? 0, events, close: () => req.destroy() });
    });
    req.on("error", reject);
  });
}

const last = (s: Stream, event: string) =>
  s.events
    .filter((e) => e.event === event)
    .map((e) => JSON.parse(e.data))
    .at(-1);

test("the feed answers 401 without a session, and refuses bad job ids", async () => {
  const anonymous = await open("topics=queues", {});
  expect(anonymous.status).toBe(401);
  anonymous.close();
  const bad = await open("jobs=1,abc");
  expect(bad.status).toBe(400);
  bad.close();
});

test("a count changes within about a second of an enqueue from another client, and a watched job's status with its outcome", async () => {
  const stream = await open("topics=queues");
  expect(stream.status).toBe(200);
  await until("first snapshot", () => last(stream, "queues") !== undefined);
  const started = Date.now();
  const { id } = await t.skipq.enqueue("report", { n: 1 }, { queue: "live-q" });
  await until("live-q shows one pending", () => {
    const queues = last(stream, "queues") as Array<{ queue: string; pending: number }> | undefined;
    return queues?.find((q) => q.queue === "live-q")?.pending === 1;
  });
  expect(Date.now() - started).toBeLessThan(1500);
  expect(stream.events.some((e) => e.event === "enqueued" && JSON.parse(e.data).queue === "live-q")).toBe(true);

  const watch = await open(`jobs=${id}`);
  await until("the job's first state", () => last(watch, "job")?.status === "pending");
  const cancelledAt = Date.now();
  await new Admin(t.skipq).cancelJob(id);
  await until("the job shows cancelled", () => last(watch, "job")?.status === "cancelled");
  expect(Date.now() - cancelledAt).toBeLessThan(1500);
  stream.close();
  watch.close();
  await until("streams closed", () => dashboard.live?.size === 0);
});

test("50 open streams cost the database what one costs: one listener session, the same statements per second", async () => {
  const window = 3000;
  const measure = async (n: number) => {
    const streams = await Promise.all(Array.from({ length: n }, () => open("topics=queues,workers")));
    await until(`${n} streams have a snapshot`, () => streams.every((s) => last(s, "queues") !== undefined));
    const { rows } = await t.db.query(
      `SELECT application_name, count(*)::int AS n FROM pg_stat_activity
        WHERE application_name IN ($1, 'skipq-live-test-dashboard') GROUP BY 1`,
      [listenerName()],
    );
    const sessions = Object.fromEntries(
      rows.map((r) => [r.application_name === listenerName() ? "listener" : "pool", r.n]),
    );
    const before = statements;
    const ticks = dashboard.live?.ticks ?? 0;
    // A steady load: enqueues keep arriving while the streams are open.
    const deadline = Date.now() + window;
    while (Date.now() < deadline) {
      await t.skipq.enqueue("report", {}, { queue: "live-load" });
      await new Promise((r) => setTimeout(r, 100));
    }
    const perSecond = ((statements - before) * 1000) / window;
    const snapshots = (((dashboard.live?.ticks ?? 0) - ticks) * 1000) / window;
    const received = streams.map((s) => s.events.length);
    for (const s of streams) s.close();
    await until("streams closed", () => dashboard.live?.size === 0);
    return { perSecond, snapshots, sessions, received: Math.min(...received) };
  };
  const one = await measure(1);
  const fifty = await measure(50);
  console.log(
    `live feed cost: 1 viewer ${one.perSecond.toFixed(1)} statements/s (${one.snapshots.toFixed(1)} snapshots/s); ` +
      `50 viewers ${fifty.perSecond.toFixed(1)} statements/s (${fifty.snapshots.toFixed(1)} snapshots/s); sessions ${JSON.stringify(fifty.sessions)}`,
  );
  expect(one.sessions.listener).toBe(1);
  expect(fifty.sessions.listener).toBe(1);
  expect(fifty.sessions.pool ?? 0).toBeLessThanOrEqual(4);
  // Every viewer was kept up to date, and 50 of them cost at most a little more than one (ticks vary with the enqueues' timing).
  expect(fifty.received).toBeGreaterThan(1);
  expect(fifty.perSecond).toBeLessThanOrEqual(one.perSecond * 1.5 + 2);
  // After the last stream closes, the hub lets its listener go.
  await until("listener gone", async () => {
    const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = $1`, [
      listenerName(),
    ]);
    return rows[0].n === 0;
  });
});

test("pages load the live script from 'self' only, carry no inline script, and still refresh without it", async () => {
  const page = await fetch(`${origin}/ops/`, { headers: { cookie } });
  const csp = page.headers.get("content-security-policy") ?? "";
  expect(csp).toContain("script-src 'self'");
  expect(csp).toContain("connect-src 'self'");
  expect(csp).not.toContain("unsafe-inline");
  const text = await page.text();
  expect(text).toContain('<script src="/ops/assets/live.js" defer></script>');
  expect(text.match(/<script[^>]*>/g)).toEqual(['<script src="/ops/assets/live.js" defer>']);
  expect(text).toContain('<noscript><meta http-equiv="refresh" content="10"></noscript>');
  expect((await fetch(`${origin}/ops/assets/live.js`)).status).toBe(401);
  const script = await fetch(`${origin}/ops/assets/live.js`, { headers: { cookie } });
  expect(script.headers.get("content-type")).toContain("text/javascript");
  expect(await script.text()).toContain("EventSource");
});

test("a queue's page draws throughput, failures, depth and wait from the rollup over 1h, 24h and 7d", async () => {
  await t.db.query(
    `INSERT INTO "${t.schema}".queue_stats_minute (queue, bucket, completed, failed, depth, running, wait_p50_ms, wait_p95_ms, closed)
     VALUES ('charts', date_trunc('minute', now()) - interval '5 minutes', 42, 3, 7, 2, 120, 900, true)`,
  );
  for (const range of ["1h", "24h", "7d"]) {
    const res = await fetch(`${origin}/ops/queues/charts?range=${range}`, { headers: { cookie } });
    expect(res.status, range).toBe(200);
    const text = await res.text();
    for (const id of ["chart-throughput", "chart-failures", "chart-depth", "chart-wait"])
      expect(text).toContain(`id="${id}"`);
    // One minute has a row; every other bucket of the range is a gap (no data), said in the summary.
    expect(text).toMatch(/aria-label="Throughput: 42 completed; no data for (59 of 60|143 of 144|167 of 168) buckets"/);
    expect(text).toMatch(/aria-label="Failures: 3 dead, 0 cancelled; no data for \d+ of \d+ buckets"/);
    expect(text).toContain("p95 peak 900 ms");
  }
  const fragment = await fetch(`${origin}/ops/charts?queue=charts&range=24h`, { headers: { cookie } });
  expect(await fragment.text()).toMatch(/^<div data-charts="range=24h&amp;queue=charts"><div class="charts">/);
  expect((await fetch(`${origin}/ops/queues/charts?range=2d`, { headers: { cookie } })).status).toBe(400);
  expect((await fetch(`${origin}/ops/charts?queue=${encodeURIComponent("<x>")}`, { headers: { cookie } })).status).toBe(
    400,
  );
});

test("a worker joining shows in the workers feed with its in-flight job; signing out ends the session's streams", async () => {
  const stream = await open("topics=workers");
  let release: () => void = () => undefined;
  const held = new Promise<void>((r) => {
    release = r;
  });
  const worker = t.skipq
    .worker({ queues: ["live-w"], pollInterval: "50ms", presenceInterval: "1s", maintenance: false })
    .register("hold", () => held);
  await worker.start();
  try {
    const { id } = await t.skipq.enqueue("hold", {}, { queue: "live-w" });
    await until("the worker and its job in the feed", () => {
      const workers = last(stream, "workers") as Array<{ id: string; inFlight: Array<{ id: string }> }> | undefined;
      return workers?.find((w) => w.id === worker.id)?.inFlight.some((j) => j.id === id);
    });
  } finally {
    release();
    await worker.stop();
  }
  await until("the worker gone from the feed", () => {
    const workers = last(stream, "workers") as Array<{ id: string }> | undefined;
    return workers !== undefined && !workers.some((w) => w.id === worker.id);
  });

  // Sign out (a fresh session, so the suite's own stays valid): its open stream ends at once.
  const res = await fetch(`${origin}/ops/login`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: new URLSearchParams({ token: TOKEN, next: "/ops/" }).toString(),
    redirect: "manual",
  });
  const other = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
  const csrf = /name="_csrf" value="([^"]+)"/.exec(
    await (await fetch(`${origin}/ops/`, { headers: { cookie: other } })).text(),
  )?.[1];
  const mine = await open("topics=queues", { cookie: other });
  await until("its stream is open", () => dashboard.live?.size === 2);
  await fetch(`${origin}/ops/logout`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded", cookie: other },
    body: new URLSearchParams({ _csrf: csrf as string }).toString(),
    redirect: "manual",
  });
  await until("only the other stream is left", () => dashboard.live?.size === 1);
  mine.close();
  stream.close();
});
