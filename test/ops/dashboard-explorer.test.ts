/**
 * The jobs explorer: filters (queue, kind, state, time range, error text,
 * payload path and value), keyset pages whose plans walk the id indexes in
 * order (EXPLAIN on a large history), and bulk actions on a selection or a
 * whole filter, each showing its count before it runs, CSRF-checked.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, type RunningDashboard, startDashboard } from "../../src/index.js";
import { useTestQueue } from "../helpers.js";
import { dashboardSession, signIn } from "./dashboardSession.js";

const TOKEN = "explorer-token-0123456789";
const t = useTestQueue("dashboard_explorer");
let d: RunningDashboard;
let s: string;
let admin: Admin;
let csrf: string;
const browser = dashboardSession(() => d.url);
const { get, post } = browser;

beforeAll(async () => {
  s = `"${t.schema}"`;
  admin = new Admin(t.skipq);
  d = await startDashboard({ skipq: t.skipq, port: 0, auth: { token: TOKEN }, env: {}, basePath: "/q" });
  ({ csrf } = await signIn(browser, { token: TOKEN }, "/q/"));
});
afterAll(async () => {
  await d.close();
});

const ids = (html: string) => [...html.matchAll(/data-watch-job="(\d+)"/g)].map((m) => m[1] as string);

async function history(
  status: string,
  queue: string,
  kind: string,
  payload: unknown,
  error: string | null,
  createdAgo = "1 hour",
) {
  const { rows } = await t.db.query(
    `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, last_error,
                                   created_at, finished_at)
     VALUES (nextval(pg_get_serial_sequence('${s}.jobs', 'id')), $1, $2, $3, $4, 0, 3, 3, now(), $5,
             now() - $6::interval, now()) RETURNING id::text`,
    [queue, kind, JSON.stringify(payload), status, error, createdAgo],
  );
  return rows[0].id as string;
}

test("filters by queue, kind, state, time range, error text and payload path or value", async () => {
  const a = await history("dead", "billing", "invoice", { customer: { id: 42, name: "acme" } }, "Error: card declined");
  const b = await history("dead", "billing", "invoice", { customer: { id: 7 } }, "Error: timeout", "3 days");
  const c = await history("completed", "email", "welcome", { to: "ada" }, null);
  const { id: p } = await t.skipq.enqueue("invoice", { customer: { id: 42 } }, { queue: "billing", delay: "1h" });

  expect(ids(await (await get("jobs?queue=billing")).text())).toEqual([p, b, a]);
  expect(ids(await (await get("jobs?queue=billing&status=dead")).text())).toEqual([b, a]);
  expect(ids(await (await get("jobs?kind=welcome")).text())).toEqual([c]);
  expect(ids(await (await get("jobs?q=DECLINED")).text())).toEqual([a]);
  expect(ids(await (await get("jobs?path=customer.id&value=42")).text())).toEqual([p, a]);
  expect(ids(await (await get("jobs?path=customer.name")).text())).toEqual([a]);
  expect(ids(await (await get("jobs?path=to&value=ada")).text())).toEqual([c]);
  const from = new Date(Date.now() - 2 * 86_400_000).toISOString().slice(0, 16);
  expect(ids(await (await get(`jobs?queue=billing&from=${from}`)).text())).toEqual([p, a]);
  expect(ids(await (await get(`jobs?queue=billing&to=${from}`)).text())).toEqual([b]);

  for (const bad of [
    "status=lost",
    "path=a..b",
    "path=a%20b",
    "value=1",
    "from=yesterday",
    "queue=%3Cx%3E",
    "before=abc",
  ]) {
    const res = await get(`jobs?${bad}`);
    expect(res.status, bad).toBe(400);
  }
  // What was typed comes back escaped into the form.
  const echoed = await (await get(`jobs?q=${encodeURIComponent('"><script>x</script>')}`)).text();
  expect(echoed).not.toContain("<script>x");
});

test("keyset pages cover every job once, newest first", async () => {
  await t.db.query(
    `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at)
     SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')), 'paged', 'k', '{}', 'completed', 0, 1, 1, now(), now(), now()
       FROM generate_series(1, 120)`,
  );
  const seen: string[] = [];
  let next = "jobs?queue=paged";
  for (let i = 0; i < 5 && next; i++) {
    const html = await (await get(next)).text();
    seen.push(...ids(html));
    next = /href="\/q\/(jobs\?[^"]*before=\d+)" rel="next"/.exec(html)?.[1]?.replaceAll("&amp;", "&") ?? "";
  }
  expect(seen).toHaveLength(120);
  expect(new Set(seen).size).toBe(120);
  expect(seen).toEqual([...seen].sort((x, y) => Number(y) - Number(x)));
});

test("a page's plan walks the id indexes backwards and stops at the page, on a large history", async () => {
  await t.db.query(
    `INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, last_error,
                                   created_at, finished_at)
     SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')), 'q' || (g % 20), 'k' || (g % 7), jsonb_build_object('n', g),
            CASE WHEN g % 50 = 0 THEN 'dead' ELSE 'completed' END, 0, 1, 1, now(), CASE WHEN g % 50 = 0 THEN 'Error: x' END,
            now() - (g || ' seconds')::interval, now() - (g || ' seconds')::interval
       FROM generate_series(1, 200000) g`,
  );
  await t.db.query(`ANALYZE ${s}.job_history`);
  const text = t.skipq.store.sql.admin.jobSearch.text;
  const plan = async (params: unknown[]) => {
    const { rows } = await t.db.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
    return rows[0]["QUERY PLAN"][0];
  };
  const none = [null, null, null, null, null, null, null, null, null];
  const walk = (node: { "Node Type": string; Plans?: unknown[] }, out: string[] = []): string[] => {
    out.push(
      node["Node Type"] +
        ("Scan Direction" in node ? `:${(node as { "Scan Direction": string })["Scan Direction"]}` : ""),
    );
    for (const child of node.Plans ?? []) walk(child as typeof node, out);
    return out;
  };
  for (const [label, params] of [
    ["newest page", [...none, null, 50]],
    ["older page", [...none, "100000", 50]],
    ["one queue", [null, "q3", ...none.slice(2), null, 50]],
    ["dead only", ["dead", ...none.slice(1), null, 50]],
  ] as Array<[string, unknown[]]>) {
    const p = await plan(params);
    const nodes = walk(p.Plan);
    console.log(`explorer plan, ${label}: ${p["Execution Time"].toFixed(2)} ms: ${nodes.join(" > ")}`);
    expect(
      nodes.some((n) => n.endsWith(":Backward")),
      `${label}: ${nodes.join(" ")}`,
    ).toBe(true);
    expect(nodes, label).not.toContain("Sort");
    expect(
      nodes.some((n) => n.startsWith("Seq Scan")),
      `${label}: ${nodes.join(" ")}`,
    ).toBe(false);
    expect(p["Execution Time"], label).toBeLessThan(200);
  }
});

test("bulk actions show their count first, then change only the jobs in the states they apply to", async () => {
  const d1 = await history("dead", "bulk", "k", {}, "Error: a");
  const d2 = await history("dead", "bulk", "k", {}, "Error: b");
  const done = await history("completed", "bulk", "k", {}, null);
  // Selected: two dead and one completed; retry applies to the two dead only.
  const confirm = await post("jobs/bulk", { _csrf: csrf, action: "retry", scope: "selected", ids: [d1, d2, done] });
  expect(confirm.status).toBe(200);
  const page = await confirm.text();
  expect(page).toMatch(
    /on 3 selected job\(s\): this touches <strong data-f="applicable">2<\/strong> job\(s\); the other 1/,
  );
  expect((await admin.getJob(d1))?.status).toBe("dead");
  const ran = await post("jobs/bulk", {
    _csrf: csrf,
    action: "retry",
    scope: "selected",
    ids: [d1, d2, done],
    confirm: "2",
  });
  expect(ran.status).toBe(303);
  expect((await admin.getJob(d1))?.status).toBe("pending");
  expect((await admin.getJob(d2))?.status).toBe("pending");
  expect((await admin.getJob(done))?.status).toBe("completed");

  // Whole filter: priority, run now, cancel, delete.
  const { id: later } = await t.skipq.enqueue("k", {}, { queue: "bulk", delay: "1h" });
  const filterCount = await (
    await post("jobs/bulk", { _csrf: csrf, action: "priority", scope: "filter", queue: "bulk", priority: "7" })
  ).text();
  expect(filterCount).toContain("every job matching the filter (4)");
  expect(filterCount).toMatch(/this touches <strong data-f="applicable">3<\/strong>/);
  await post("jobs/bulk", {
    _csrf: csrf,
    action: "priority",
    scope: "filter",
    queue: "bulk",
    priority: "7",
    confirm: "3",
  });
  expect((await admin.getJob(later))?.priority).toBe(7);
  await post("jobs/bulk", { _csrf: csrf, action: "run-now", scope: "filter", queue: "bulk", confirm: "1" });
  expect(new Date((await admin.getJob(later))?.run_at as Date).getTime()).toBeLessThan(Date.now() + 1000);
  await post("jobs/bulk", {
    _csrf: csrf,
    action: "cancel",
    scope: "filter",
    queue: "bulk",
    status: "pending",
    confirm: "3",
  });
  expect((await admin.getJob(later))?.status).toBe("cancelled");
  const del = await post("jobs/bulk", { _csrf: csrf, action: "delete", scope: "filter", queue: "bulk", confirm: "4" });
  expect(del.status).toBe(303);
  expect(decodeURIComponent(del.headers.get("set-cookie") ?? "")).toContain("delete: 4 job(s) changed.");
  expect(del.headers.get("location")).toBe("/q/jobs?queue=bulk");
  expect(await admin.searchJobs({ queue: "bulk" })).toEqual([]);

  // CSRF, and bad input changes nothing.
  const { id: kept } = await t.skipq.enqueue("k", {}, { queue: "bulk2" });
  expect((await post("jobs/bulk", { action: "delete", scope: "filter", queue: "bulk2", confirm: "1" })).status).toBe(
    403,
  );
  expect((await post("jobs/bulk", { _csrf: csrf, action: "explode", scope: "filter", confirm: "1" })).status).toBe(400);
  expect(
    (
      await post("jobs/bulk", {
        _csrf: csrf,
        action: "priority",
        scope: "filter",
        queue: "bulk2",
        priority: "99999",
        confirm: "1",
      })
    ).status,
  ).toBe(400);
  expect(
    (await post("jobs/bulk", { _csrf: csrf, action: "delete", scope: "selected", ids: ["x"], confirm: "1" })).status,
  ).toBe(400);
  expect((await admin.getJob(kept))?.status).toBe("pending");
});
