/**
 * The maintainer's leader lease across real processes: one leader at a time,
 * and when the leader is killed (SIGKILL, no clean stop) another process takes
 * over within one lease and does the leader's work (reaping).
 */
import { afterEach, beforeAll, expect, test } from "vitest";
import { until, useTestQueue } from "../helpers.js";
import { createLedger, startWorkerProcesses, type WorkerProcess } from "../processes.js";

const LEASE_MS = 1500;
const t = useTestQueue("leader");
let processes: WorkerProcess[] = [];

beforeAll(async () => {
  await createLedger(t.db, t.schema);
});
afterEach(async () => {
  await Promise.all(processes.map((p) => p.stop()));
  processes = [];
});

async function leader(): Promise<{ holder: string; expires_at: Date } | undefined> {
  const { rows } = await t.db.query(
    `SELECT holder, expires_at FROM "${t.schema}".leaders WHERE name = 'maintainer' AND expires_at > now()`,
  );
  return rows[0];
}

test("when the leader is killed, another process becomes leader within one lease and reaps", async () => {
  processes = startWorkerProcesses(2, {
    SKIPQ_SCHEMA: t.schema,
    MAINTENANCE: "1",
    LEADER_LEASE_MS: String(LEASE_MS),
    REAPER_MS: "100",
  });
  await Promise.all(processes.map((p) => p.ready));
  const first = await until("a leader", leader);
  // Exactly one holder, and it stays while it lives.
  const victim = processes.find((p) => first.holder.endsWith(`:${p.child.pid}`));
  expect(victim).toBeDefined();
  const survivor = processes.find((p) => p !== victim) as WorkerProcess;

  victim?.child.kill("SIGKILL");
  const killedAt = Date.now();
  const next = await until(
    "the other process leads",
    async () => {
      const l = await leader();
      return l && l.holder !== first.holder ? l : undefined;
    },
    10_000,
    25,
  );
  const tookMs = Date.now() - killedAt;
  expect(next.holder).toBe(`p${processes.indexOf(survivor)}:${survivor.child.pid}`);
  // Within one lease (plus a renewal interval and the machine's scheduling noise).
  expect(tookMs).toBeLessThan(LEASE_MS + LEASE_MS / 3 + 1500);

  // The new leader does the leader's work: a job stranded with an expired lease comes back.
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".jobs (kind, status, attempts, lease, lease_expires_at, locked_at, locked_by)
     VALUES ('k', 'running', 1, 1, now() - interval '1 second', now() - interval '1 minute', 'gone') RETURNING id`,
  );
  await until("the stranded job is reaped", async () => {
    const r = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [rows[0].id]);
    return r.rows[0]?.status === "pending";
  });
});

test("a leader that stops cleanly hands the lease over at once", async () => {
  processes = startWorkerProcesses(1, {
    SKIPQ_SCHEMA: t.schema,
    MAINTENANCE: "1",
    LEADER_LEASE_MS: "60000",
  });
  await Promise.all(processes.map((p) => p.ready));
  const pid = processes[0]?.child.pid;
  await until("this process leads", async () => (await leader())?.holder === `p0:${pid}`);
  expect(await processes[0]?.stop()).toBe(0);
  expect(await leader()).toBeUndefined();
});
