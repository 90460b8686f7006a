/**
 * Fair claims across real worker processes: one key holding 50,000 jobs and
 * nine holding 500 each (arriving behind it), drained by 4 processes. Every
 * claim is logged in claim order by a trigger; the shares, the small keys'
 * first start (in claims, not wall time) and the queue's concurrency limit
 * are checked on that log and on the handlers' ledger. One process is killed
 * (SIGKILL) mid-run: the others keep claiming, and its jobs come back.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, silentLogger } from "../../src/index.js";
import { Reaper } from "../../src/maintenance/reaper.js";
import { until, useTestQueue } from "../helpers.js";
import { createLedger, startWorkerProcesses, type WorkerProcess } from "../processes.js";

const t = useTestQueue("fair_procs");
let workers: WorkerProcess[] = [];
const SMALL = Array.from({ length: 9 }, (_, i) => `small-${i}`);
const WEIGHTS = { big: 3 } as const;
/** Claims per round: the big key's weight plus one per small key. */
const ROUND = WEIGHTS.big + SMALL.length;

beforeAll(async () => {
  await createLedger(t.db, t.schema);
  await t.db.query(`
    CREATE TABLE "${t.schema}".claims (seq bigserial PRIMARY KEY, job_id bigint, key text, worker text);
    CREATE FUNCTION "${t.schema}".log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO "${t.schema}".claims (job_id, key, worker) VALUES (NEW.id, NEW.concurrency_key, NEW.locked_by);
        RETURN NULL;
      END $$;
    CREATE TRIGGER log_claim AFTER UPDATE ON "${t.schema}".jobs FOR EACH ROW
      WHEN (OLD.status = 'pending' AND NEW.status = 'running') EXECUTE FUNCTION "${t.schema}".log_claim();`);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

async function claimCount(): Promise<number> {
  const { rows } = await t.db.query(`SELECT COALESCE(max(seq), 0)::int AS n FROM "${t.schema}".claims`);
  return rows[0].n;
}

test("keys share a fair queue's claims by weight across 4 processes, within its limits, after a SIGKILL", async () => {
  await new Admin(t.skipq).setQueueLimits("fair", { concurrency: 12, fairness: { weights: WEIGHTS } });
  await t.db.query(`INSERT INTO "${t.schema}".jobs (kind, queue, payload, concurrency_key)
                    SELECT 'ledgered', 'fair', '{"ms": 1}', 'big' FROM generate_series(1, 50000)`);
  workers = startWorkerProcesses(4, { SKIPQ_SCHEMA: t.schema, QUEUES: "fair", CONCURRENCY: "4", POLL_MS: "20" });
  await Promise.all(workers.map((w) => w.ready));
  // The big key alone for a while, then the small keys arrive behind its backlog.
  await until("the big key is being drained", async () => (await claimCount()) >= 200, 60_000);
  await t.db.query(
    `INSERT INTO "${t.schema}".jobs (kind, queue, payload, concurrency_key)
                    SELECT 'ledgered', 'fair', '{"ms": 1}', k FROM unnest($1::text[]) k, generate_series(1, 500)`,
    [SMALL],
  );
  const arrived = await claimCount();

  // Mid-run, one process dies without a word; the others must keep claiming (no claim lock left behind).
  await until("claims go on after the small keys arrive", async () => (await claimCount()) >= arrived + 1500, 60_000);
  const victim = workers[0] as WorkerProcess;
  victim.child.kill("SIGKILL");
  await new Promise((resolve) => victim.child.once("exit", resolve));
  const killedAt = await claimCount();
  await until("the other processes keep claiming", async () => (await claimCount()) >= killedAt + 1500, 60_000);
  // The killed worker's jobs: their leases run out (back-dated here) and the reaper returns them. Again at
  // every poll: the killed process's server session may still commit a claim it had under way.
  const reaper = new Reaper({ store: t.skipq.store, intervalMs: 1000, logger: silentLogger });
  await until(
    "every small key's job completed",
    async () => {
      await t.db.query(
        `UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 second'
          WHERE status = 'running' AND locked_by LIKE 'p0:%'`,
      );
      await reaper.runOnce();
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE concurrency_key <> 'big' AND status = 'completed'`,
      );
      return rows[0].n === SMALL.length * 500;
    },
    240_000,
  );
  await Promise.all(workers.map((w) => w.stop()));

  // First start, in claims: every small key's first job within two rounds of claims (and the claims already
  // under way in the 4 processes) after they arrived.
  const first = await t.db.query(
    `SELECT key, min(seq)::int AS seq FROM "${t.schema}".claims WHERE key <> 'big' GROUP BY key ORDER BY key`,
  );
  expect(first.rows.map((r) => r.key)).toEqual(SMALL);
  for (const r of first.rows) expect(r.seq - arrived, r.key).toBeLessThanOrEqual(2 * ROUND + 4 * 4);

  // Shares while every key is backlogged: the claims from one round after arrival, for 300 rounds (small keys
  // hold 500 each, so all are still backlogged at the end of them). Reclaims after the reaper are outside.
  const window = await t.db.query(
    `SELECT key, count(*)::int AS n FROM "${t.schema}".claims
      WHERE seq > $1 AND seq <= $1 + $2 GROUP BY key`,
    [arrived + ROUND, 300 * ROUND],
  );
  const total = 300 * ROUND;
  const shares = Object.fromEntries(window.rows.map((r) => [r.key, r.n / total]));
  for (const key of ["big", ...SMALL]) {
    const expected = (key === "big" ? WEIGHTS.big : 1) / ROUND;
    expect(shares[key] ?? 0, `${key}: ${JSON.stringify(shares)}`).toBeGreaterThanOrEqual(expected * 0.95);
    expect(shares[key] ?? 0, `${key}: ${JSON.stringify(shares)}`).toBeLessThanOrEqual(expected * 1.05);
  }

  // The queue's concurrency limit held across the processes (16 slots, limit 12), from the handlers' ledger
  // (the killed process's unfinished handlers have no end: left out, their jobs counted as running meanwhile).
  const overlap = await t.db.query(
    `SELECT COALESCE(max(n), 0)::int AS n FROM (
       SELECT (SELECT count(*) FROM "${t.schema}".ledger b
                WHERE b.started <= a.started AND b.ended > a.started) AS n
         FROM "${t.schema}".ledger a WHERE a.ended IS NOT NULL) x`,
  );
  expect(overlap.rows[0].n).toBeLessThanOrEqual(12);
  expect(overlap.rows[0].n).toBeGreaterThanOrEqual(4);
}, 420_000);
