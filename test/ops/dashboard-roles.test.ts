/**
 * Roles and audit: a read-only credential beside the admin one sees every
 * page, gets no action forms and a 403 for every action; every action of the
 * admin (and every sign-in and sign-out) is an audit row — who, what, when,
 * from where — shown on the audit page.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { createDashboard, type DashboardOptions, type RunningDashboard, startDashboard } from "../../src/index.js";
import { useTestQueue } from "../helpers.js";
import { dashboardSession, signIn } from "./dashboardSession.js";

const ADMIN = "admin-token-0123456789";
const VIEWER = "viewer-token-0123456789";
const t = useTestQueue("dashboard_roles");
let d: RunningDashboard;

beforeAll(async () => {
  d = await startDashboard({
    skipq: t.skipq,
    port: 0,
    auth: { token: ADMIN, viewer: { token: VIEWER, user: "watcher", password: "look but no touch" } },
    env: {},
  });
});
afterAll(async () => {
  await d.close();
});

/** A browser of its own (its user agent shows in the audit rows), not signed in. */
const browser = () => dashboardSession(() => d.url, { "user-agent": "roles-test/1.0" });
const { post } = browser();

test("the read-only credential sees every page without action forms, and every action answers 403", async () => {
  const { id } = await t.skipq.enqueue("k", {}, { queue: "roles" });
  const viewer = await signIn(browser(), { user: "watcher", password: "look but no touch" });
  for (const path of ["", "jobs", `jobs/${id}`, "dead", "workers", "cron", "audit", "outbox", "queues/roles"]) {
    const res = await viewer.get(path);
    expect(res.status, path).toBe(200);
    const html = await res.text();
    expect(html, path).toContain("read-only");
    // The only form that posts is sign-out.
    expect(html.match(/method="post"/g), path).toEqual(['method="post"']);
  }
  for (const [path, form] of [
    [`jobs/${id}/cancel`, {}],
    ["queues/roles/pause", {}],
    ["jobs/bulk", { action: "delete", scope: "filter", confirm: "1" }],
    ["queues/roles/limits", { concurrency: "1" }],
    ["cron/x/pause", {}],
    ["outbox/retry", { topic: "t", key: "k" }],
  ] as Array<[string, Record<string, string>]>) {
    const res = await viewer.post(path, { _csrf: viewer.csrf, ...form });
    expect(res.status, path).toBe(403);
  }
  expect((await post(`jobs/${id}/cancel`, {}, { authorization: `Bearer ${VIEWER}` })).status).toBe(403);
  const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".jobs WHERE id = $1`, [id]);
  expect(rows[0].status).toBe("pending");
  // Signing out works for both roles.
  expect((await viewer.post("logout", { _csrf: viewer.csrf })).status).toBe(303);
});

test("every admin action is an audit row (who, what, when, from where), shown on the audit page", async () => {
  const admin = await signIn(browser(), { token: ADMIN });
  await admin.post("queues/audited/pause", { _csrf: admin.csrf, back: "/" });
  await admin.post("queues/audited/limits", {
    _csrf: admin.csrf,
    back: "/",
    concurrency: "3",
    rateLimit: "",
    rateWindow: "",
  });
  await admin.post("jobs/bulk", {
    _csrf: admin.csrf,
    action: "priority",
    scope: "filter",
    queue: "audited",
    priority: "2",
    confirm: "0",
  });
  const { rows } = await t.db.query(
    `SELECT principal, role, action, target, detail, client, user_agent, at > now() - interval '1 minute' AS recent
       FROM "${t.schema}".dashboard_audit WHERE principal = 'token' ORDER BY id`,
  );
  expect(rows.map((r) => [r.action, r.target])).toEqual([
    ["sign-in", null],
    ["queue pause", "queue audited"],
    ["queue limits", "queue audited"],
    ["bulk priority", "jobs matching a filter"],
  ]);
  expect(rows[2].detail).toEqual({ limits: { concurrency: 3, keyConcurrency: null, rate: null, fairness: null } });
  expect(rows[3].detail).toEqual({ filter: { queue: "audited" }, jobs: 0, priority: 2 });
  for (const r of rows)
    expect(r).toMatchObject({ role: "admin", client: "127.0.0.1", user_agent: "roles-test/1.0", recent: true });
  const viewerRows = await t.db.query(
    `SELECT role, action FROM "${t.schema}".dashboard_audit WHERE principal = 'viewer:user:watcher' ORDER BY id`,
  );
  expect(viewerRows.rows).toEqual([
    { role: "viewer", action: "sign-in" },
    { role: "viewer", action: "sign-out" },
  ]);
  const page = await (await admin.get("audit")).text();
  expect(page).toMatch(/<td>token<\/td><td>admin<\/td><td>queue limits<\/td><td>queue audited<\/td>/);
  expect(page).toContain("roles-test/1.0");
});

test("viewer credentials are validated like the admin's and need an admin beside them", () => {
  const make = (auth: DashboardOptions["auth"]) => () => createDashboard({ skipq: t.skipq, auth, env: {} });
  expect(make({ viewer: { token: VIEWER } })).toThrow(/needs an admin one beside it/);
  expect(make({ token: ADMIN, viewer: { token: "short" } })).toThrow(/viewer token must be at least 16/);
  expect(make({ token: ADMIN, viewer: { token: ADMIN } })).toThrow(/must differ from the admin token/);
  expect(make({ token: ADMIN, viewer: { user: "x" } })).toThrow(/viewer auth needs both a user and a password/);
  expect(() =>
    createDashboard({ skipq: t.skipq, env: { SKIPQ_DASHBOARD_TOKEN: ADMIN, SKIPQ_DASHBOARD_VIEWER_TOKEN: VIEWER } }),
  ).not.toThrow();
});
