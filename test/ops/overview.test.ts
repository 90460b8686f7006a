import { expect, test } from "vitest";
import { Admin, startDashboard } from "../../src/index.js";
import { testQueue } from "../helpers.js";

test("overview counts live jobs per queue and completions of the last hour only; throughput buckets them by minute", async () => {
  const t = await testQueue("overview");
  const admin = new Admin(t.skipq);
  const jobs = `"${t.schema}".jobs`;
  try {
    await t.db.query(
      `INSERT INTO ${jobs} (queue, kind, run_at) VALUES ('a', 'k', now() - interval '90 seconds'), ('a', 'k', now() + interval '1 hour')`,
    );
    await t.db.query(
      `INSERT INTO ${jobs} (queue, kind, status, lease, locked_at, lease_expires_at) VALUES ('a', 'k', 'running', 1, now(), now() + interval '30 seconds')`,
    );
    const history = `"${t.schema}".job_history`;
    const id = `nextval(pg_get_serial_sequence('${jobs}', 'id'))`;
    const cols = "id, queue, kind, payload, status, priority, attempts, max_attempts, run_at, created_at, finished_at";
    await t.db.query(`INSERT INTO ${history} (${cols}) VALUES
                        (${id}, 'b', 'k', '{}', 'dead', 0, 1, 1, now(), now(), now()),
                        (${id}, 'b', 'k', '{}', 'cancelled', 0, 1, 1, now(), now(), now())`);
    await t.db.query(
      `INSERT INTO ${history} (${cols}) VALUES
         (${id}, 'a', 'k', '{}', 'completed', 0, 1, 1, now(), now(), now() - interval '30 seconds'),
         (${id}, 'a', 'k', '{}', 'completed', 0, 1, 1, now(), now(), now() - interval '5 minutes 10 seconds'),
         (${id}, 'b', 'k', '{}', 'completed', 0, 1, 1, now(), now(), now() - interval '5 minutes 20 seconds'),
         (${id}, 'b', 'k', '{}', 'completed', 0, 1, 1, now(), now(), now() - interval '2 hours')`,
    );
    await admin.pauseQueue("idle");

    const overview = await admin.overview();
    expect(overview.map((q) => q.queue)).toEqual(["a", "b", "idle"]);
    const [a, b, idle] = overview;
    expect(a).toMatchObject({ pending: 1, scheduled: 1, running: 1, dead: 0, completedLastHour: 2, paused: false });
    expect(a?.oldestPendingSeconds).toBeGreaterThanOrEqual(89);
    expect(b).toMatchObject({
      pending: 0,
      scheduled: 0,
      running: 0,
      dead: 1,
      completedLastHour: 1,
      oldestPendingSeconds: null,
    });
    expect(idle).toMatchObject({ pending: 0, dead: 0, completedLastHour: 0, paused: true });

    const all = await admin.throughput();
    expect(all).toHaveLength(60);
    expect(all[59]).toBe(1);
    expect(all[54]).toBe(2);
    expect(all.reduce((x, y) => x + y, 0)).toBe(3);
    const onlyB = await admin.throughput("b");
    expect(onlyB[54]).toBe(1);
    expect(onlyB.reduce((x, y) => x + y, 0)).toBe(1);
  } finally {
    await t.cleanup();
  }
});

test("the overview page shows health warnings, such as a pending kind no live worker handles", async () => {
  const t = await testQueue("overview_health");
  const token = "overview-token-0123456789";
  const d = await startDashboard({ skipq: t.skipq, port: 0, auth: { token }, health: { unhandledAfter: 0 }, env: {} });
  try {
    await t.skipq.enqueue("nobody-handles-this", {});
    const page = await (await fetch(d.url, { headers: { authorization: `Bearer ${token}` } })).text();
    expect(page).toContain('data-check="unhandled-kind"');
    expect(page).toContain("nobody-handles-this");
  } finally {
    await d.close();
    await t.cleanup();
  }
});
