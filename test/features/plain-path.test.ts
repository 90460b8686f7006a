/**
 * The plain path pays nothing for docs/jobs.md's features: a worker draining
 * jobs that use none of them runs none of their statements (only the claim,
 * complete and heartbeat it ran before), and those jobs' history rows carry
 * none of the new columns.
 */
import pg from "pg";
import { expect, test } from "vitest";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("plain-path");

test("a drain of plain jobs runs only the claim path's statements and writes none of the new columns", async () => {
  const pool = new pg.Pool({ connectionString: DATABASE_URL, max: 20 });
  const texts: string[] = [];
  const query = pool.query.bind(pool) as (...args: unknown[]) => unknown;
  (pool as unknown as { query: (...args: unknown[]) => unknown }).query = (...args: unknown[]) => {
    const config = args[0] as { text?: string } | string;
    texts.push(typeof config === "string" ? config : (config.text ?? ""));
    return query(...args);
  };
  const worker = t.skipq.worker({
    pool,
    concurrency: 8,
    pollInterval: 20,
    heartbeatInterval: 20,
    lockTimeout: 1000,
    maintenance: false,
    presence: false,
  });
  // A handler that returns nothing, reads ctx.log without writing, and takes a few heartbeats.
  worker.register("plain", async (_payload, ctx) => {
    void ctx.log;
    await new Promise((r) => setTimeout(r, 30));
  });
  await t.skipq.enqueueMany(Array.from({ length: 200 }, (_, i) => ({ job: "plain", payload: { i } })));
  await t.skipq.enqueue("plain", { single: true });
  await worker.start();
  await until("all completed", () => worker.stats.completed === 201);
  await worker.stop();
  await pool.end();

  const features = Object.values(t.skipq.store.sql.features).map((s) => s.text);
  const ran = texts.filter((text) => features.includes(text));
  expect(ran).toEqual([]);
  expect(texts.filter((text) => text === t.skipq.store.sql.jobs.jobHeartbeatMany.text).length).toBeGreaterThan(0);
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n,
            count(*) FILTER (WHERE result IS NOT NULL OR progress IS NOT NULL OR attempt_logs IS NOT NULL)::int AS extras
       FROM "${t.schema}".job_history`,
  );
  expect(rows[0]).toEqual({ n: 201, extras: 0 });
});
