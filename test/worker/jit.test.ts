/**
 * JIT never compiles a statement of the hot path, whatever its cost
 * estimate (SPEC §9): the session is told to compile everything
 * (jit_above_cost = 0), and EXPLAIN (ANALYZE) of every claim, outcome,
 * heartbeat, reaper and waiter statement — on a connection made the way skipq
 * makes its own — shows no JIT section, with 300,000 runnable jobs parked in
 * another queue and a long history. The SQL protocol's functions run their
 * bodies with jit off whoever calls them: auto_explain shows every nested
 * statement's plan, and none has a JIT section.
 */
import type pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { createPool, resolveSessionSettings } from "../../src/db/pool.js";
import { silentLogger } from "../../src/index.js";
import { DATABASE_URL, useTestQueue } from "../helpers.js";

const t = useTestQueue("jit");
let s: string;
let pool: pg.Pool;
let jitAvailable = false;

beforeAll(async () => {
  s = `"${t.schema}"`;
  // The bench's big shapes: a parked backlog in another queue, a long history, and the hot queue's jobs.
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, payload)
                    SELECT 'parked', 'k', '{}' FROM generate_series(1, 300000)`);
  await t.db.query(`INSERT INTO ${s}.jobs (queue, kind, payload, priority)
                    SELECT 'hot', 'k', '{}', i % 3 FROM generate_series(1, 2000) i`);
  await t.db.query(`INSERT INTO ${s}.job_history (id, queue, kind, payload, status, priority, attempts, max_attempts,
                                                 run_at, created_at, finished_at)
                    SELECT nextval(pg_get_serial_sequence('${s}.jobs', 'id')), 'hot', 'k', '{}',
                           CASE WHEN i % 10 = 0 THEN 'dead' ELSE 'completed' END, 0, 1, 1, now(), now(), now()
                      FROM generate_series(1, 200000) i`);
  await t.db.query(`ANALYZE ${s}.jobs`);
  await t.db.query(`ANALYZE ${s}.job_history`);
  // A pool as skipq makes its own (client and worker pools): the default session settings.
  pool = createPool(DATABASE_URL, 2, silentLogger, "jit-test", { session: resolveSessionSettings(undefined) });
  jitAvailable = (await t.db.query("SELECT pg_jit_available() AS a")).rows[0].a;
});
afterAll(async () => {
  await pool?.end();
});

/** EXPLAIN (ANALYZE) of `text` with `values` on `client`, in a transaction rolled back; the plan as JSON text. */
async function explain(client: pg.PoolClient, text: string, values: unknown[]): Promise<string> {
  await client.query("BEGIN");
  try {
    const { rows } = await client.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, values);
    return JSON.stringify(rows[0]["QUERY PLAN"]);
  } finally {
    await client.query("ROLLBACK");
  }
}

async function forceJit(client: pg.PoolClient): Promise<void> {
  await client.query("SET jit_above_cost = 0; SET jit_inline_above_cost = 0; SET jit_optimize_above_cost = 0");
}

async function running(n: number): Promise<{ ids: string[]; leases: string[] }> {
  const { rows } = await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [["hot"], n, "jit", 60_000]);
  return { ids: rows.map((r) => r.id), leases: rows.map((r) => r.lease) };
}

test("no statement of the TypeScript hot path JIT-compiles on skipq's connections, even with jit_above_cost = 0", async () => {
  const sql = t.skipq.store.sql;
  const { ids, leases } = await running(20);
  const n = ids.length;
  const statements: Array<[string, string, unknown[]]> = [
    ["claim", sql.jobs.jobClaimBatch.text, [["hot", "parked"], 10, "w", 60_000]],
    ["claim with aging", sql.jobs.jobClaimBatchAged.text, [["hot", "parked"], 10, "w", 60_000, 1000]],
    [
      "claim from floors",
      sql.jobs.jobClaimFrom.text,
      [["hot"], 10, "w", 60_000, null, ["hot"], [0], ["-infinity"], ["0"]],
    ],
    ["complete", sql.jobs.jobCompleteMany.text, [ids, leases]],
    [
      "complete with results",
      sql.features.jobCompleteManyWithResults.text,
      [ids, leases, ids.map(() => '{"ok":true}')],
    ],
    [
      "settle (retry, dead)",
      sql.jobs.jobSettleMany.text,
      [
        ids,
        leases,
        ids.map((_, i) => (i % 2 ? "retry" : "dead")),
        ids.map(() => "boom"),
        ids.map(() => 1000),
        ids.map(() => "f"),
        ids.map(
          (_, i) =>
            `{"attempt":1,"worker":"w","startedAt":null,"endedAt":null,"outcome":"failed","error":"boom","lines":[{"n":${i}}],"dropped":0}`,
        ),
      ],
    ],
    ["heartbeat", sql.jobs.jobHeartbeatMany.text, [ids, leases, 60_000]],
    ["heartbeat with progress", sql.features.jobHeartbeatProgressMany.text, [ids, leases, 60_000, ids.map(() => "1")]],
    ["reaper", sql.maintenance.jobReapExpired.text, [1000]],
    ["wait mark", sql.features.jobWaitMark.text, [ids[0]]],
    ["wait read", sql.features.jobWaitRead.text, [ids]],
  ];
  expect(n).toBe(20);
  const client = await pool.connect();
  try {
    await forceJit(client);
    const { rows } = await client.query("SHOW jit");
    expect(rows[0].jit).toBe("off");
    for (const [name, text, values] of statements) {
      const plan = await explain(client, text, values);
      expect(plan, `${name}: no JIT section`).not.toContain('"JIT"');
    }
  } finally {
    client.release();
  }
  // Without skipq's session settings (a plain connection) the same claim does JIT-compile: the test can fail.
  const plain = await t.db.connect();
  try {
    await forceJit(plain);
    const plan = await explain(plain, sql.jobs.jobClaimBatch.text, [["hot"], 10, "w", 60_000]);
    expect(plan.includes('"JIT"')).toBe(jitAvailable);
  } finally {
    plain.release();
  }
});

test("the SQL protocol's functions never JIT-compile their statements, whoever calls them and with what settings", async () => {
  const { ids, leases } = await running(6);
  const calls: Array<[string, string, unknown[]]> = [
    ["skipq_claim", `SELECT * FROM ${s}.skipq_claim(ARRAY['hot', 'parked'], 10, 'py', 60000)`, []],
    ["skipq_complete", `SELECT ${s}.skipq_complete($1, $2)`, [ids[0], leases[0]]],
    ["skipq_complete with a result", `SELECT ${s}.skipq_complete($1, $2, '{"ok":1}')`, [ids[1], leases[1]]],
    ["skipq_fail", `SELECT ${s}.skipq_fail($1, $2, 'boom', 10)`, [ids[2], leases[2]]],
    ["skipq_heartbeat", `SELECT ${s}.skipq_heartbeat($1, $2, 60000)`, [ids[3], leases[3]]],
    ["skipq_release", `SELECT ${s}.skipq_release($1, $2)`, [ids[4], leases[4]]],
  ];
  // A worker in another language: a plain session, JIT forced, every nested plan sent back by auto_explain.
  const client = await t.db.connect();
  const plans: string[] = [];
  const onNotice = (n: { message?: string }) => {
    if (n.message?.includes("Plan")) plans.push(n.message);
  };
  client.on("notice", onNotice);
  try {
    await forceJit(client);
    await client.query(`LOAD 'auto_explain'`);
    await client.query(`SET auto_explain.log_min_duration = 0; SET auto_explain.log_analyze = on;
                        SET auto_explain.log_nested_statements = on; SET auto_explain.log_level = notice;
                        SET auto_explain.log_format = json`);
    for (const [name, text, values] of calls) {
      plans.length = 0;
      await client.query("BEGIN");
      try {
        await client.query(text, values);
      } finally {
        await client.query("ROLLBACK");
      }
      // The last plan is the caller's own statement (its cost is a function scan's); every other is the function's.
      const nested = plans.slice(0, -1);
      expect(nested.length, `${name}: auto_explain saw its statements`).toBeGreaterThan(0);
      for (const plan of nested) expect(plan, `${name}: a nested statement has no JIT section`).not.toContain('"JIT"');
    }
  } finally {
    client.off("notice", onNotice);
    await client.query("RESET ALL").catch(() => undefined);
    client.release();
  }
});
