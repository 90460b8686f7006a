/**
 * Concurrency and rate limits, enforced in the claim across 10 real worker
 * processes racing on the same queues. Every handler records its start and
 * end on the database clock in a ledger; the limits are checked on it.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { statusCounts, until, useTestQueue } from "../helpers.js";
import { createLedger, startWorkerProcesses, type WorkerProcess } from "../processes.js";

const t = useTestQueue("limits");
let workers: WorkerProcess[] = [];

beforeAll(async () => {
  await createLedger(t.db, t.schema);
  // Every claim's time, as the claim set it: locked_at moves on later heartbeats, so record it at the claim.
  await t.db.query(`
    CREATE TABLE "${t.schema}".claims (job_id bigint, queue text, key text, at timestamptz);
    CREATE FUNCTION "${t.schema}".log_claim() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO "${t.schema}".claims VALUES (NEW.id, NEW.queue, NEW.concurrency_key, NEW.locked_at);
        RETURN NULL;
      END $$;
    CREATE TRIGGER log_claim AFTER UPDATE ON "${t.schema}".jobs FOR EACH ROW
      WHEN (OLD.status = 'pending' AND NEW.status = 'running') EXECUTE FUNCTION "${t.schema}".log_claim();`);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

/** Most handlers of one group (queue, or queue + key) running at the same instant, from the ledger. */
async function maxOverlap(where: string, byKey: boolean): Promise<number> {
  const group = byKey ? "a.queue = b.queue AND a.key = b.key" : "a.queue = b.queue";
  const { rows } = await t.db.query(
    `SELECT COALESCE(max(n), 0)::int AS n FROM (
       SELECT (SELECT count(*) FROM "${t.schema}".ledger b
                WHERE ${group} AND b.started <= a.started AND b.ended > a.started) AS n
         FROM "${t.schema}".ledger a WHERE ${where}) x`,
  );
  return rows[0].n;
}

/** Most claims of one group inside any window of `ms`, from the claim times the claims recorded. */
async function maxStartsInWindow(queue: string, ms: number, byKey: boolean): Promise<number> {
  const group = byKey ? "AND a.key = b.key" : "";
  const { rows } = await t.db.query(
    `SELECT COALESCE(max(n), 0)::int AS n FROM (
       SELECT (SELECT count(*) FROM "${t.schema}".claims b
                WHERE b.queue = a.queue ${group}
                  AND b.at >= a.at AND b.at < a.at + $2 * interval '1 millisecond') AS n
         FROM "${t.schema}".claims a WHERE a.queue = $1) x`,
    [queue, ms],
  );
  return rows[0].n;
}

test("concurrency and rate limits are never exceeded with 10 processes racing", async () => {
  const admin = new Admin(t.skipq);
  await admin.setQueueLimits("conc", { concurrency: 6, keyConcurrency: 2 });
  await admin.setQueueLimits("rate", { rate: { limit: 8, window: "500ms" } });
  await admin.setQueueLimits("keyrate", { rate: { limit: 3, window: "500ms", perKey: true } });
  const items = [
    ...Array.from({ length: 90 }, (_, i) => ({
      job: "ledgered",
      payload: { ms: 30 + (i % 4) * 10 },
      queue: "conc",
      concurrencyKey: `customer-${i % 5}`,
    })),
    ...Array.from({ length: 32 }, () => ({ job: "ledgered", payload: { ms: 5 }, queue: "rate" })),
    ...Array.from({ length: 24 }, (_, i) => ({
      job: "ledgered",
      payload: { ms: 5 },
      queue: "keyrate",
      concurrencyKey: `k${i % 3}`,
    })),
  ];
  // Frequent heartbeats too: they must not disturb the counts (they move locked_at, not the claim log).
  workers = startWorkerProcesses(10, {
    SKIPQ_SCHEMA: t.schema,
    QUEUES: "conc,rate,keyrate",
    CONCURRENCY: "4",
    HEARTBEAT_MS: "100",
  });
  await Promise.all(workers.map((w) => w.ready));
  await t.skipq.enqueueMany(items);
  await until("every job completed", async () => (await statusCounts(t)).completed === items.length, 60_000);
  await Promise.all(workers.map((w) => w.stop()));

  // Each job was claimed once (no failures here, so no retries).
  const claims = await t.db.query(
    `SELECT count(*)::int AS n, count(DISTINCT job_id)::int AS d FROM "${t.schema}".claims`,
  );
  expect(claims.rows[0]).toEqual({ n: items.length, d: items.length });
  // The handlers really ran in parallel, across processes...
  const { rows } = await t.db.query(`SELECT count(DISTINCT pid)::int AS n FROM "${t.schema}".ledger`);
  expect(rows[0].n).toBeGreaterThan(1);
  expect(await maxOverlap("a.queue = 'conc'", false)).toBeGreaterThanOrEqual(3);
  // ...but never beyond the limits.
  expect(await maxOverlap("a.queue = 'conc'", false)).toBeLessThanOrEqual(6);
  expect(await maxOverlap("a.queue = 'conc'", true)).toBeLessThanOrEqual(2);
  expect(await maxStartsInWindow("rate", 500, false)).toBeLessThanOrEqual(8);
  expect(await maxStartsInWindow("keyrate", 500, true)).toBeLessThanOrEqual(3);
  // The rate limits bit: 32 starts at 8 per 500 ms cannot finish in under 1.5 s.
  const span = await t.db.query(
    `SELECT EXTRACT(EPOCH FROM max(at) - min(at)) * 1000 AS ms FROM "${t.schema}".claims WHERE queue = 'rate'`,
  );
  expect(Number(span.rows[0].ms)).toBeGreaterThanOrEqual(1500);
});
