/**
 * Outcome batches under trouble: a batch that meets a deadlock is retried
 * whole and every outcome in it is recorded; a batch the database refuses for
 * one row's data is split until that row is alone, so one job's outcome never
 * costs the other jobs of its batch theirs.
 */
import { afterAll, expect, test } from "vitest";
import { defineJob, type Logger, type Worker } from "../../src/index.js";
import { gate, until, useTestQueue } from "../helpers.js";

const logged: Array<{ level: string; obj: Record<string, unknown>; msg?: string }> = [];
const logger: Logger = {
  debug() {},
  info() {},
  warn: (obj, msg) => void logged.push({ level: "warn", obj, msg }),
  error: (obj, msg) => void logged.push({ level: "error", obj, msg }),
};

// deadlock_timeout on the workers' sessions is short, so in a cycle with the test's session (10 s) the
// worker's statement is the one PostgreSQL aborts.
const t = useTestQueue("outcomes", { logger, sessionSettings: { deadlock_timeout: 1000 } });
const workers: Worker[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

const step = defineJob<{ n: number }>("step");

async function statuses(ids: string[]): Promise<string[]> {
  const { rows } = await t.db.query(
    `SELECT id::text, status FROM "${t.schema}".all_jobs WHERE id = ANY($1) ORDER BY id`,
    [ids],
  );
  return rows.map((r) => r.status);
}

test("an outcome batch aborted by a deadlock is retried, and every outcome in it is recorded", async () => {
  const done = gate();
  let running = 0;
  const w = t.skipq.worker({ queues: ["deadlock"], concurrency: 2, pollInterval: 50 }).register(step, async () => {
    running++;
    await done.promise;
  });
  workers.push(w);
  const a = await t.skipq.enqueue(step, { n: 1 }, { queue: "deadlock" });
  const b = await t.skipq.enqueue(step, { n: 2 }, { queue: "deadlock" });
  await w.start();
  await until("both running", async () => running === 2);
  const s = `"${t.schema}"`;
  const other = await t.db.connect();
  try {
    await other.query("BEGIN");
    await other.query("SET LOCAL deadlock_timeout = '10s'");
    await other.query(`SELECT 1 FROM ${s}.jobs WHERE id = $1 FOR UPDATE`, [b.id]);
    done.open(); // one completeMany for both: it takes A's row, then waits for B's
    await until(
      "the outcome batch waits for the row the test holds",
      async () => {
        const { rows } = await t.db.query(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%DELETE FROM%jobs%'",
        );
        return rows[0].n > 0;
      },
      10_000,
      5,
    );
    // The test now waits for A, which the batch holds: a cycle, and the batch's statement is aborted (40P01).
    await other.query(`SELECT 1 FROM ${s}.jobs WHERE id = $1 FOR UPDATE`, [a.id]);
    await other.query("ROLLBACK");
  } finally {
    other.release();
  }
  await until("both completed", async () => (await statuses([a.id, b.id])).every((x) => x === "completed"));
  expect(logged.some((l) => (l.obj.err as { code?: string } | undefined)?.code === "40P01")).toBe(true);
  expect(w.stats.completed).toBe(2);
  expect(w.stats.staleOutcomes).toBe(0);
});

test("a batch the database refuses for one job's outcome records every other outcome of it", async () => {
  const s = `"${t.schema}"`;
  // A rule of the application's refusing one row (a trigger raising, a constraint): SQLSTATE P0001.
  await t.db.query(`CREATE FUNCTION ${s}.refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN IF OLD.payload->>'n' = '3' THEN RAISE EXCEPTION 'job 3 may not finish'; END IF; RETURN OLD; END $$`);
  await t.db.query(
    `CREATE TRIGGER refuse_poison BEFORE DELETE ON ${s}.jobs FOR EACH ROW EXECUTE FUNCTION ${s}.refuse_poison()`,
  );
  try {
    const done = gate();
    let running = 0;
    const w = t.skipq
      .worker({ queues: ["poison"], concurrency: 6, pollInterval: 50 })
      .register(step, async (payload) => {
        running++;
        await done.promise;
        if (payload.n % 2 === 0) throw new Error(`job ${payload.n} failed`);
      });
    workers.push(w);
    const jobs: string[] = [];
    for (let n = 1; n <= 6; n++)
      jobs.push((await t.skipq.enqueue(step, { n }, { queue: "poison", maxAttempts: 1 })).id);
    await w.start();
    await until("all six running", async () => running === 6);
    done.open(); // six outcomes, one flush: three successes (one refused), three deaths
    await until("every outcome but job 3's recorded", async () => {
      const got = await statuses(jobs);
      return got.filter((x) => x !== "running").length === 5;
    });
    expect(await statuses(jobs)).toEqual(["completed", "dead", "running", "dead", "completed", "dead"]);
    expect(logged.some((l) => l.level === "error" && l.obj.job === jobs[2])).toBe(true);
  } finally {
    await t.db.query(`DROP TRIGGER refuse_poison ON ${s}.jobs`);
  }
});
