/**
 * Cancellation from any process: the operator's cancel NOTIFYs the worker
 * holding the job, whose handler's AbortSignal fires at once (long before the
 * next heartbeat); the job ends cancelled and is never retried.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { until, useTestQueue } from "../helpers.js";
import { createLedger, startWorkerProcesses, type WorkerProcess } from "../processes.js";

const t = useTestQueue("cancel");
let workers: WorkerProcess[] = [];
beforeAll(async () => {
  await createLedger(t.db, t.schema);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

test("cancelling a running job aborts its handler in another process at once, and it is never retried", async () => {
  workers = startWorkerProcesses(1, { SKIPQ_SCHEMA: t.schema, CONCURRENCY: "2" });
  await workers[0]?.ready;
  const { id } = await t.skipq.enqueue("blocking", {}, { maxAttempts: 5 });
  const ledger = `"${t.schema}".ledger`;
  await until("the handler started in the worker process", async () => {
    const { rowCount } = await t.db.query(`SELECT 1 FROM ${ledger} WHERE job_id = $1`, [id]);
    return rowCount === 1;
  });

  const cancelledAt = Date.now();
  await new Admin(t.skipq).cancelJob(id);
  const row = await until("the handler saw its signal abort", async () => {
    const { rows } = await t.db.query(`SELECT note FROM ${ledger} WHERE job_id = $1 AND ended IS NOT NULL`, [id]);
    return rows[0];
  });
  // The heartbeat (every 10 s by default) would have found it too, but much later: this was the notification.
  expect(Date.now() - cancelledAt).toBeLessThan(5000);
  expect(row.note).toBe("SKIPQ_CANCEL");

  await workers[0]?.stop();
  const job = await new Admin(t.skipq).getJob(id);
  expect(job?.status).toBe("cancelled");
  expect(job?.attempts).toBe(1);
  const runs = await t.db.query(`SELECT count(*)::int AS n FROM ${ledger} WHERE job_id = $1`, [id]);
  expect(runs.rows[0].n).toBe(1);
});
