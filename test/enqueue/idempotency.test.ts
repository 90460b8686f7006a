/**
 * Idempotency keys across the live table and history: of many concurrent
 * enqueuers of one key exactly one creates a job — while it is pending, after
 * it finished (its row moved to history, or is gone), and from plain SQL too
 * (where a taken key is a unique violation) — until the key's retention ends,
 * when exactly one new job is created.
 */
import pg from "pg";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Pruner, Skipq, silentLogger } from "../../src/index.js";
import { clearJobs, DATABASE_URL, finishJobs, useTestQueue } from "../helpers.js";

const t = useTestQueue("idempotency");
let clients: Skipq[];
beforeAll(async () => {
  // Separate clients: separate pools, so the enqueues really race in separate transactions.
  clients = Array.from(
    { length: 10 },
    () => new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger: silentLogger, poolSize: 5 }),
  );
});
afterAll(async () => {
  await Promise.all(clients.map((c) => c.close()));
});

/** 50 concurrent enqueues of `key`, 5 per client, singles and bulk mixed. */
function race(key: string) {
  return Promise.all(
    clients.flatMap((c, i) =>
      Array.from({ length: 5 }, (_, j) =>
        (i + j) % 2 === 0
          ? c.enqueue("charge", { i, j }, { idempotencyKey: key })
          : c
              .enqueueMany([{ job: "charge", payload: { i, j }, idempotencyKey: key }])
              .then((r) => r[0] as { id: string; created: boolean }),
      ),
    ),
  );
}

async function jobsWithKey(key: string): Promise<string[]> {
  const { rows } = await t.db.query(`SELECT id FROM "${t.schema}".all_jobs WHERE idempotency_key = $1 ORDER BY id`, [
    key,
  ]);
  return rows.map((r) => String(r.id));
}

test("50 concurrent enqueuers of one key get one job, before and after it finished, until the key's retention ends", async () => {
  await clearJobs(t.db, t.schema);
  const first = await race("order-7");
  const created = first.filter((r) => r.created);
  expect(created).toHaveLength(1);
  const id = created[0]?.id as string;
  expect(new Set(first.map((r) => r.id))).toEqual(new Set([id]));
  expect(await jobsWithKey("order-7")).toEqual([id]);

  // The job finishes: its row leaves the live table; the key stays taken.
  await finishJobs(t.db, t.schema, [id], "completed");
  const again = await race("order-7");
  expect(again.every((r) => r.id === id && !r.created)).toBe(true);

  // Even with its history row gone (retention dropped it), the key holds for keyRetention.
  await t.db.query(`DELETE FROM "${t.schema}".job_history WHERE id = $1`, [id]);
  expect((await race("order-7")).every((r) => r.id === id && !r.created)).toBe(true);

  // Past keyRetention the key is released, and exactly one new job takes it.
  await t.db.query(`UPDATE "${t.schema}".job_keys SET finished_at = now() - interval '2 days' WHERE key = 'order-7'`);
  await new Pruner(t.skipq, { keyRetention: "1d" }).runOnce();
  const later = await race("order-7");
  expect(later.filter((r) => r.created)).toHaveLength(1);
  expect(await jobsWithKey("order-7")).toHaveLength(1);
});

test("plain SQL inserts honour keys too: a taken key fails with 23505, as a unique index would, and of 20 racers one wins", async () => {
  await clearJobs(t.db, t.schema);
  const { id } = await t.skipq.enqueue("charge", {}, { idempotencyKey: "sql-1" });
  const sql = (key: string) =>
    `INSERT INTO "${t.schema}".jobs (kind, idempotency_key) VALUES ('charge', '${key}') RETURNING id`;
  await expect(t.db.query(sql("sql-1"))).rejects.toMatchObject({ code: "23505" });
  const conns = await Promise.all(Array.from({ length: 20 }, () => new pg.Client({ connectionString: DATABASE_URL })));
  await Promise.all(conns.map((c) => c.connect()));
  try {
    const results = await Promise.allSettled(conns.map((c) => c.query(sql("sql-2"))));
    expect(results.filter((r) => r.status === "fulfilled")).toHaveLength(1);
    for (const r of results) if (r.status === "rejected") expect((r.reason as { code?: string }).code).toBe("23505");
  } finally {
    await Promise.all(conns.map((c) => c.end()));
  }
  expect(await jobsWithKey("sql-1")).toEqual([id]);
  expect(await jobsWithKey("sql-2")).toHaveLength(1);
  // The API still answers a taken key with the job that holds it.
  expect(await t.skipq.enqueue("charge", {}, { idempotencyKey: "sql-2" })).toMatchObject({ created: false });
});
