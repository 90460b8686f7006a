/**
 * The field-name rule of the public Admin API (docs/api.md, "Field names"):
 * camelCase everywhere, except the table columns of the four row types
 * (JobRow, ListedJob, DeadGroup, WorkerPresence), which carry them as read.
 * Every Admin read is called on a schema where it has something to return,
 * and every key it returns, nested ones included, is checked.
 */
import { expect, test } from "vitest";
import { Admin } from "../../src/index.js";
import { until, useTestQueue } from "../helpers.js";

const t = useTestQueue("admin-fields");

/**
 * The documented exceptions: the row types carry table columns as read, as a SELECT gives them (a job row
 * every column of jobs/job_history, typed or not: concurrency_key, finished_at).
 */
async function columns(...tables: string[]): Promise<string[]> {
  const { rows } = await t.db.query(
    "SELECT DISTINCT column_name FROM information_schema.columns WHERE table_schema = $1 AND table_name = ANY($2)",
    [t.schema, tables],
  );
  return rows.map((r) => r.column_name as string);
}

/** Every key of `value` (nested objects and arrays included) that is not camelCase, as paths. */
function snakeKeys(value: unknown, allowed: readonly string[] = [], at = ""): string[] {
  if (value === null || typeof value !== "object" || value instanceof Date) return [];
  if (Array.isArray(value)) return value.flatMap((v, i) => snakeKeys(v, allowed, `${at}[${i}]`));
  return Object.entries(value).flatMap(([key, v]) => [
    ...(/^[a-z][a-zA-Z0-9]*$/.test(key) || allowed.includes(key) ? [] : [`${at}.${key}`]),
    // Keys that are data, not field names: the caller's (payload, result, progress, headers) and
    // bulkCounts' map from each BulkAction ("run-now") to its count.
    ...(["payload", "result", "progress", "headers", "applicable"].includes(key)
      ? []
      : snakeKeys(v, [], `${at}.${key}`)),
  ]);
}

test("Admin returns camelCase keys everywhere but the table columns of JobRow, ListedJob, DeadGroup and WorkerPresence", async () => {
  const admin = new Admin(t.skipq);
  const s = `"${t.schema}"`;
  const jobColumns = await columns("jobs", "job_history");
  const COLUMNS = {
    JobRow: jobColumns,
    ListedJob: [...jobColumns, "payload_bytes"],
    DeadGroup: ["last_seen", "example_id", "example_error"],
    WorkerPresence: await columns("workers"),
  };
  const parent = await t.skipq.enqueue("fields.parent", { a_b: 1 }, { queue: "fields" });
  const child = await t.skipq.enqueue("fields.child", {}, { queue: "fields", dependsOn: [parent.id] });
  await t.skipq.enqueue("fields.later", {}, { queue: "fields", delay: "1h" });
  const bad = await t.skipq.enqueue("fields.bad", {}, { queue: "fields-dead", maxAttempts: 1 });
  const failing = t.skipq.worker({ queues: ["fields-dead"], pollInterval: "10m" }).register("fields.bad", async () => {
    throw new Error("boom");
  });
  await failing.runOnce();
  await until("the failing job is dead", async () => (await new Admin(t.skipq).getJob(bad.id))?.status === "dead");
  await t.db.query(
    `INSERT INTO ${s}.cron_schedules (name, expression, queue, kind, last_tick) VALUES ('nightly', '0 3 * * *', 'fields', 'k', now())`,
  );
  await admin.setQueueLimits("fields", { concurrency: 2, rate: { limit: 5, window: "1m" } });
  await admin.pauseKey("fields", "tenant-1", "1h");
  const worker = t.skipq.worker({ queues: ["other"], pollInterval: "10m" }).register("k", async () => undefined);
  await worker.start();
  try {
    const workers = await until("the worker's presence recorded", async () => {
      const live = await admin.workers();
      return live.length > 0 ? live : undefined;
    });
    const rows: Record<string, { value: unknown; allowed?: readonly string[] }> = {
      getJob: { value: await admin.getJob(child.id), allowed: COLUMNS.JobRow },
      listJobs: { value: await admin.listJobs({ queue: "fields" }), allowed: COLUMNS.ListedJob },
      searchJobs: { value: await admin.searchJobs({ queue: "fields" }), allowed: COLUMNS.ListedJob },
      deadByFingerprint: { value: await admin.deadByFingerprint({ queue: "fields-dead" }), allowed: COLUMNS.DeadGroup },
      workers: { value: workers, allowed: COLUMNS.WorkerPresence },
      jobFlow: { value: await admin.jobFlow(child.id) },
      stats: { value: await admin.stats() },
      overview: { value: await admin.overview() },
      throughput: { value: await admin.throughput() },
      queueSeries: { value: await admin.queueSeries("fields", "1h") },
      listQueueSettings: { value: await admin.listQueueSettings() },
      getQueueLimits: { value: await admin.getQueueLimits("fields") },
      pausedKeys: { value: await admin.pausedKeys("fields") },
      cronSchedules: { value: await admin.cronSchedules() },
      bulkCounts: { value: await admin.bulkCounts({ queue: "fields" }) },
      health: { value: await admin.health() },
      replica: { value: await admin.replica() },
    };
    for (const [method, { value, allowed }] of Object.entries(rows)) {
      if (method !== "replica" && method !== "throughput") expect(value, method).toBeTruthy();
      expect(snakeKeys(value, allowed), `${method}: keys that are not camelCase`).toEqual([]);
    }
    // The exceptions are real: the row types do carry their columns (so the list above is not stale).
    expect(rows.getJob?.value).toHaveProperty("max_attempts");
    expect(rows.getJob?.value).toHaveProperty("dependsOn", [parent.id]);
  } finally {
    await worker.stop();
  }
});
