/**
 * One truth for the SQL protocol: the functions other languages call
 * (skipq_claim, skipq_complete, skipq_fail, skipq_heartbeat, skipq_release)
 * and the TypeScript worker's statements (src/db/sql/jobs.ts), run on the
 * same states, leave the same rows — status, attempts, error and its
 * fingerprint, run_at, lease, and which table the job is in — and accept or
 * refuse the same outcomes. Random operation sequences (fast-check) drive both.
 */
import fc from "fast-check";
import { beforeAll, expect, test } from "vitest";
import { errorFingerprint } from "../../src/index.js";
import { clearJobs, useTestQueue } from "../helpers.js";

const t = useTestQueue("parity");
let s: string;
beforeAll(async () => {
  s = `"${t.schema}"`;
});

type Op =
  | { op: "claim" }
  | { op: "complete"; stale: boolean }
  | { op: "fail"; error: string; delayMs: number; stale: boolean }
  | { op: "heartbeat"; stale: boolean }
  | { op: "release"; stale: boolean };

const message = fc.oneof(
  fc.string({ maxLength: 40 }).map((x) => x.replaceAll("\u0000", "")),
  fc.constantFrom(
    "Error: order 42 failed",
    'TypeError: cannot read "price" of undefined',
    "timeout after 3000 ms on 0xdeadbeef",
    "request 1b4e28ba-2fa1-11d2-883f-0016d3cca427 refused\nstack line 2",
    "ValueError: 'abc' is not 7",
  ),
);
const ops: fc.Arbitrary<Op> = fc.oneof(
  fc.constant({ op: "claim" as const }),
  fc.record({ op: fc.constant("complete" as const), stale: fc.boolean() }),
  fc.record({
    op: fc.constant("fail" as const),
    error: message,
    delayMs: fc.constantFrom(0, 1000, 60_000),
    stale: fc.boolean(),
  }),
  fc.record({ op: fc.constant("heartbeat" as const), stale: fc.boolean() }),
  fc.record({ op: fc.constant("release" as const), stale: fc.boolean() }),
);

interface Side {
  queue: string;
  id: string;
  lease: string | null;
}

/** What must be equal between the two sides (run_at as an offset from now, in whole seconds). */
async function state(side: Side) {
  const { rows } = await t.db.query(
    `SELECT status, attempts, max_attempts, last_error, error_fingerprint, lease IS NOT NULL AS leased,
            round(EXTRACT(EPOCH FROM run_at - now())) AS run_in_s,
            EXISTS (SELECT 1 FROM ${s}.jobs WHERE id = $1) AS live
       FROM ${s}.all_jobs WHERE id = $1`,
    [side.id],
  );
  return rows[0];
}

async function apply(side: Side, op: Op, protocol: boolean): Promise<unknown> {
  const jobs = t.skipq.store.sql.jobs;
  // A stale outcome presents a lease the job never had.
  const lease = "stale" in op && op.stale ? "1" : (side.lease ?? "1");
  switch (op.op) {
    case "claim": {
      const { rows } = protocol
        ? await t.db.query(`SELECT id, lease, attempts FROM ${s}.skipq_claim($1, 1, 'w', 30000)`, [[side.queue]])
        : await t.db.query(jobs.jobClaimBatch.text, [[side.queue], 1, "w", 30000]);
      if (rows[0]) side.lease = String(rows[0].lease);
      return rows.map((r) => r.attempts);
    }
    case "complete":
      return protocol
        ? (await t.db.query(`SELECT ${s}.skipq_complete($1, $2) AS ok`, [side.id, lease])).rows[0].ok
        : (await t.db.query(jobs.jobCompleteMany.text, [[side.id], [lease]])).rowCount === 1;
    case "fail":
      return protocol
        ? (await t.db.query(`SELECT ${s}.skipq_fail($1, $2, $3, $4) AS status`, [side.id, lease, op.error, op.delayMs]))
            .rows[0].status
        : ((
            await t.db.query(jobs.jobSettleMany.text, [
              [side.id],
              [lease],
              ["retry"],
              [op.error],
              [op.delayMs],
              [errorFingerprint("parity", op.error)],
              [null],
            ])
          ).rows[0]?.status ?? null);
    case "heartbeat":
      return protocol
        ? (await t.db.query(`SELECT ${s}.skipq_heartbeat($1, $2, 30000) AS ok`, [side.id, lease])).rows[0].ok
        : (await t.db.query(jobs.jobHeartbeatMany.text, [[side.id], [lease], 30000])).rowCount === 1;
    case "release":
      return protocol
        ? (await t.db.query(`SELECT ${s}.skipq_release($1, $2) AS ok`, [side.id, lease])).rows[0].ok
        : (await t.db.query(jobs.jobSettleMany.text, [[side.id], [lease], ["released"], [null], [0], [null], [null]]))
            .rowCount === 1;
  }
}

test("the protocol functions and the TypeScript statements leave the same rows and accept the same outcomes", async () => {
  await fc.assert(
    fc.asyncProperty(
      fc.array(ops, { minLength: 1, maxLength: 12 }),
      fc.integer({ min: 1, max: 3 }),
      async (script, max) => {
        await clearJobs(t.db, t.schema);
        const ts: Side = { queue: "ts", id: "", lease: null };
        const sql: Side = { queue: "sql", id: "", lease: null };
        for (const side of [ts, sql]) {
          const { id } = await t.skipq.enqueue("parity", { n: 1 }, { queue: side.queue, maxAttempts: max });
          side.id = id;
        }
        for (const op of script) {
          const a = await apply(ts, op, false);
          const b = await apply(sql, op, true);
          expect({ op, result: b }).toEqual({ op, result: a });
          // run_at as an offset from now: the two sides' jobs were made and moved moments apart (seconds apart
          // on a loaded machine), so within 2 s; every other column exactly.
          const [x, y] = [await state(sql), await state(ts)];
          expect(Math.abs(Number(x.run_in_s) - Number(y.run_in_s)), "run_at, from now").toBeLessThanOrEqual(2);
          expect({ ...x, run_in_s: 0 }).toEqual({ ...y, run_in_s: 0 });
        }
      },
    ),
    { numRuns: 60 },
  );
});

test("skipq_error_fingerprint is errorFingerprint: failures from any language group together", async () => {
  await fc.assert(
    fc.asyncProperty(message, fc.constantFrom("send-email", "a.b:c-d"), async (text, kind) => {
      const { rows } = await t.db.query(`SELECT ${s}.skipq_error_fingerprint($1, $2) AS f`, [kind, text]);
      expect(rows[0].f).toBe(errorFingerprint(kind, text));
    }),
    { numRuns: 200 },
  );
});

test("skipq_fail refuses a negative, NaN or infinite delay and changes nothing", async () => {
  await clearJobs(t.db, t.schema);
  await t.skipq.enqueue("parity", {}, { queue: "sql" });
  const { rows } = await t.db.query(`SELECT id, lease FROM ${s}.skipq_claim(ARRAY['sql'], 1, 'w', 30000)`);
  const before = await t.db.query(`SELECT * FROM ${s}.jobs WHERE id = $1`, [rows[0].id]);
  for (const delay of [-1, -1e12, "NaN", "Infinity"]) {
    await expect(
      t.db.query(`SELECT ${s}.skipq_fail($1, $2, 'boom', $3::float8)`, [rows[0].id, rows[0].lease, delay]),
    ).rejects.toMatchObject({ code: "22023" });
  }
  const after = await t.db.query(`SELECT * FROM ${s}.jobs WHERE id = $1`, [rows[0].id]);
  expect(after.rows).toEqual(before.rows);
});

test("skipq_claim takes jobs in the TypeScript claim's order across several queues", async () => {
  await clearJobs(t.db, t.schema);
  const plan = [
    { q: "one", priority: 0 },
    { q: "two", priority: 5 },
    { q: "one", priority: 5 },
    { q: "two", priority: -1 },
    { q: "one", priority: 9 },
  ];
  const sides = { ts: [] as string[], sql: [] as string[] };
  for (const p of plan)
    for (const side of ["ts", "sql"] as const)
      sides[side].push((await t.skipq.enqueue("parity", {}, { queue: `${side}-${p.q}`, priority: p.priority })).id);
  const position = (ids: string[], id: string) => ids.indexOf(id);
  const tsClaimed = await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [["ts-one", "ts-two"], 4, "w", 30000]);
  const sqlClaimed = await t.db.query(`SELECT id FROM ${s}.skipq_claim(ARRAY['sql-one', 'sql-two'], 4, 'w', 30000)`);
  // RETURNING keeps no order: the worker sorts (inClaimOrder); the function returns claim order itself.
  const tsOrder = tsClaimed.rows
    .map((r) => ({ id: String(r.id), p: r.priority, run: r.run_at.getTime() }))
    .sort((a, b) => b.p - a.p || a.run - b.run || Number(a.id) - Number(b.id))
    .map((r) => position(sides.ts, r.id));
  expect(sqlClaimed.rows.map((r) => position(sides.sql, String(r.id)))).toEqual(tsOrder);
});
