/**
 * Workflows: dependsOn and onParentFailure. A dependent job waits (never
 * claimed) until every parent completed; the parent's outcome statement
 * decides it, through the edges and the child's counter. Each failure policy,
 * a diamond, parents already finished, and the rejections (unknown parent,
 * cycle) that write nothing.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  Admin,
  FailPermanently,
  type JobContext,
  silentLogger,
  ValidationError,
  type Worker,
} from "../../src/index.js";
import { Reaper } from "../../src/maintenance/reaper.js";
import { statusCounts, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("workflow deps");
let admin: Admin;
const workers: Worker[] = [];
beforeAll(async () => {
  admin = new Admin(t.skipq);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

type Seen = { id: string; parents: JobContext["parents"] };

/** A worker on its own queue: "ok" returns its payload's value, "fail" dies at once; every run is recorded. */
async function worker(queue: string): Promise<Seen[]> {
  const seen: Seen[] = [];
  const w = t.skipq
    .worker({ queues: [queue], pollInterval: 50 })
    .register("ok", (payload, ctx) => {
      seen.push({ id: ctx.id, parents: ctx.parents });
      return (payload as { value?: unknown }).value;
    })
    .register("fail", () => {
      throw new FailPermanently("parent broke");
    });
  workers.push(w);
  await w.start();
  return seen;
}

async function status(id: string): Promise<string | undefined> {
  return (await admin.getJob(id))?.status;
}

test("a job with dependsOn waits until its parent completed, then runs once and sees the parent's result", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", { value: { n: 7 } }, { queue: "one", delay: "1h" });
  const { id: child } = await t.skipq.enqueue("ok", {}, { queue: "one", dependsOn: [parent] });
  expect(await status(child)).toBe("waiting");
  const seen = await worker("one");
  await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() WHERE id = $1`, [parent]);
  await until("child completed", async () => (await status(child)) === "completed");
  expect(seen.map((s) => s.id)).toEqual([parent, child]);
  expect(seen[1]?.parents).toEqual({ [parent]: { kind: "ok", status: "completed", result: { n: 7 }, error: null } });
});

test("a diamond (A → B, C → D) runs D once, after both B and C, with both results", async () => {
  const [a, b, c, d] = await t.skipq.enqueueMany([
    { job: "ok", payload: { value: "a" }, queue: "diamond" },
    { job: "ok", payload: { value: "b" }, queue: "diamond", dependsOn: [{ item: 0 }] },
    { job: "ok", payload: { value: "c" }, queue: "diamond", dependsOn: [{ item: 0 }] },
    { job: "ok", payload: { value: "d" }, queue: "diamond", dependsOn: [{ item: 1 }, { item: 2 }] },
  ]);
  const seen = await worker("diamond");
  await until("D completed", async () => (await status(d?.id as string)) === "completed");
  const order = seen.map((s) => s.id);
  expect(order).toHaveLength(4);
  expect(order[0]).toBe(a?.id);
  expect(order[3]).toBe(d?.id);
  const parents = seen[3]?.parents ?? {};
  expect(Object.keys(parents).sort()).toEqual([b?.id, c?.id].sort());
  expect(parents[b?.id as string]?.result).toBe("b");
  expect(parents[c?.id as string]?.result).toBe("c");
});

test("parents that already finished count: a child of completed jobs is claimable at once", async () => {
  const seen = await worker("late");
  const { id: parent } = await t.skipq.enqueue("ok", { value: 1 }, { queue: "late" });
  await until("parent completed", async () => (await status(parent)) === "completed");
  const { id: child } = await t.skipq.enqueue("ok", {}, { queue: "late", dependsOn: [parent] });
  await until("child completed", async () => (await status(child)) === "completed");
  expect(seen.find((s) => s.id === child)?.parents[parent]?.result).toBe(1);
});

test("a dependency on a job that does not exist is a ValidationError and writes nothing", async () => {
  const before = await statusCounts(t);
  await expect(t.skipq.enqueue("ok", {}, { queue: "none", dependsOn: ["987654321"] })).rejects.toThrow(ValidationError);
  await expect(
    t.skipq.enqueueMany([
      { job: "ok", payload: {}, queue: "none" },
      { job: "ok", payload: {}, queue: "none", dependsOn: [{ item: 0 }, "987654321"] },
    ]),
  ).rejects.toThrow(/987654321/);
  await expect(t.skipq.enqueue("ok", {}, { queue: "none", dependsOn: ["x"] })).rejects.toThrow(ValidationError);
  await expect(t.skipq.enqueue("ok", {}, { queue: "none", dependsOn: [] })).rejects.toThrow(ValidationError);
  await expect(t.skipq.enqueue("ok", {}, { queue: "none", onParentFailure: "run" })).rejects.toThrow(/needs dependsOn/);
  await expect(t.skipq.enqueue("ok", {}, { queue: "none", dependsOn: [{ item: 0 }] })).rejects.toThrow(/enqueueMany/);
  await expect(
    t.skipq.enqueueMany([{ job: "ok", payload: {}, queue: "none", dependsOn: ["1"] }], { returning: false }),
  ).rejects.toThrow(/returning: false/);
  await expect(
    t.skipq.enqueue("ok", {}, { queue: "none", onParentFailure: "explode" as "run", dependsOn: ["1"] }),
  ).rejects.toThrow(ValidationError);
  // A waiting job is released by its parents, so a uniqueness window or debounce key cannot hold it.
  const parent = await t.skipq.enqueue("ok", {}, { queue: "none-parent" });
  const combos = [{ unique: { period: "1h" } }, { debounce: { delay: "1s" } }] as const;
  for (const extra of combos)
    await expect(t.skipq.enqueue("ok", {}, { queue: "none", dependsOn: [parent.id], ...extra })).rejects.toThrow(
      /cannot be combined with dependsOn/,
    );
  expect(await statusCounts(t)).toEqual({ ...before, pending: (before.pending ?? 0) + 1 });
});

test("a cycle between jobs of one call is a ValidationError and writes nothing", async () => {
  const before = await statusCounts(t);
  await expect(
    t.skipq.enqueueMany([
      { job: "ok", payload: {}, queue: "cycle" },
      { job: "ok", payload: {}, queue: "cycle", dependsOn: [{ item: 0 }, { item: 3 }] },
      { job: "ok", payload: {}, queue: "cycle", dependsOn: [{ item: 1 }] },
      { job: "ok", payload: {}, queue: "cycle", dependsOn: [{ item: 2 }] },
    ]),
  ).rejects.toThrow(/cycle/);
  await expect(
    t.skipq.enqueueMany([{ job: "ok", payload: {}, queue: "cycle", dependsOn: [{ item: 0 }] }]),
  ).rejects.toThrow(/itself/);
  expect(await statusCounts(t)).toEqual(before);
});

test("an enqueueTx with dependsOn exists only if the caller's transaction commits", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "tx", delay: "1h" });
  const client = await t.db.connect();
  let child = "";
  try {
    await client.query("BEGIN");
    child = (await t.skipq.enqueueTx(client, "ok", {}, { queue: "tx", dependsOn: [parent] })).id;
    await client.query("ROLLBACK");
  } finally {
    client.release();
  }
  expect(await admin.getJob(child)).toBeUndefined();
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".job_dependencies WHERE parent_id = $1`,
    [parent],
  );
  expect(rows[0].n).toBe(0);
});

test('onParentFailure "cancel" (the default) cancels dependents recursively, the reason naming the parent', async () => {
  const [p, c, g, other] = await t.skipq.enqueueMany([
    { job: "fail", payload: {}, queue: "cancel" },
    { job: "ok", payload: {}, queue: "cancel", dependsOn: [{ item: 0 }] },
    { job: "ok", payload: {}, queue: "cancel", dependsOn: [{ item: 1 }] },
    { job: "ok", payload: {}, queue: "cancel", dependsOn: [{ item: 2 }], onParentFailure: "run" },
  ]);
  const seen = await worker("cancel");
  await until("grandchild's dependent ran", async () => (await status(other?.id as string)) === "completed");
  expect(await status(p?.id as string)).toBe("dead");
  const child = await admin.getJob(c?.id as string);
  expect(child?.status).toBe("cancelled");
  expect(child?.last_error).toBe(`cancelled because parent job ${p?.id} died`);
  const grand = await admin.getJob(g?.id as string);
  expect(grand?.status).toBe("cancelled");
  expect(grand?.last_error).toBe(`cancelled because parent job ${c?.id} was cancelled`);
  expect(seen.find((s) => s.id === other?.id)?.parents[g?.id as string]?.status).toBe("cancelled");
  expect(seen.filter((s) => s.id === c?.id || s.id === g?.id)).toEqual([]);
});

test('onParentFailure "run" runs the job anyway and shows the failure in ctx.parents', async () => {
  const [p, ok, c] = await t.skipq.enqueueMany([
    { job: "fail", payload: {}, queue: "run" },
    { job: "ok", payload: { value: 2 }, queue: "run" },
    { job: "ok", payload: {}, queue: "run", dependsOn: [{ item: 0 }, { item: 1 }], onParentFailure: "run" },
  ]);
  const seen = await worker("run");
  await until("child completed", async () => (await status(c?.id as string)) === "completed");
  const parents = seen.find((s) => s.id === c?.id)?.parents ?? {};
  expect(parents[p?.id as string]).toMatchObject({ kind: "fail", status: "dead", result: null });
  expect(parents[p?.id as string]?.error).toMatch(/parent broke/);
  expect(parents[ok?.id as string]).toMatchObject({ status: "completed", result: 2 });
});

test('onParentFailure "wait" keeps the job waiting until the parent is retried by hand and completes', async () => {
  const { id: p } = await t.skipq.enqueue("flaky", {}, { queue: "wait", maxAttempts: 1 });
  const { id: c } = await t.skipq.enqueue("ok", {}, { queue: "wait", dependsOn: [p], onParentFailure: "wait" });
  let broken = true;
  const seen: string[] = [];
  const w = t.skipq
    .worker({ queues: ["wait"], pollInterval: 50 })
    .register("flaky", () => {
      if (broken) throw new Error("not yet");
    })
    .register("ok", (_, ctx) => {
      seen.push(ctx.id);
    });
  workers.push(w);
  await w.start();
  await until("parent dead", async () => (await status(p)) === "dead");
  expect(await status(c)).toBe("waiting");
  broken = false;
  await admin.retryJob(p);
  await until("child completed", async () => (await status(c)) === "completed");
  expect(seen).toEqual([c]);
});

test("a waiting job is never claimed, whatever its run_at and priority", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "claim", delay: "1h" });
  await t.skipq.enqueue("ok", {}, { queue: "claim", priority: 100, dependsOn: [parent] });
  const { rows } = await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [["claim"], 10, "w", 30000]);
  expect(rows).toEqual([]);
});

test("an operator can cancel a waiting job, and its dependents follow", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "opcancel", delay: "1h" });
  const { id: child } = await t.skipq.enqueue("ok", {}, { queue: "opcancel", dependsOn: [parent] });
  const { id: grand } = await t.skipq.enqueue("ok", {}, { queue: "opcancel", dependsOn: [child] });
  await admin.cancelJob(child);
  expect(await status(child)).toBe("cancelled");
  expect((await admin.getJob(grand))?.last_error).toBe(`cancelled because parent job ${child} was cancelled`);
});

test("waiting jobs are counted as such by stats, the overview and the job listing", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "counted", delay: "1h" });
  const { id: child } = await t.skipq.enqueue("ok", {}, { queue: "counted", dependsOn: [parent] });
  const stats = (await admin.stats()).find((q) => q.queue === "counted");
  expect(stats).toMatchObject({ pending: 0, scheduled: 1, waiting: 1 });
  const overview = (await admin.overview()).find((q) => q.queue === "counted");
  expect(overview).toMatchObject({ pending: 0, scheduled: 1, waiting: 1 });
  expect((await admin.listJobs({ status: "waiting", queue: "counted" })).map((j) => j.id)).toEqual([child]);
});

test("getJob shows dependsOn and waitingOn, and jobFlow the graph around a job with states and results", async () => {
  const [a, b, c] = await t.skipq.enqueueMany([
    { job: "ok", payload: { value: "A" }, queue: "graph" },
    { job: "ok", payload: {}, queue: "graph", delay: "1h" },
    { job: "ok", payload: {}, queue: "graph", dependsOn: [{ item: 0 }, { item: 1 }] },
  ]);
  await worker("graph");
  await until("A completed", async () => (await status(a?.id as string)) === "completed");
  const child = await admin.getJob(c?.id as string);
  expect(child?.dependsOn).toEqual([a?.id, b?.id]);
  expect(child?.waitingOn).toEqual([b?.id]);
  expect((await admin.getJob(a?.id as string))?.dependsOn).toEqual([]);
  expect(await admin.jobFlow(a?.id as string)).toEqual({
    job: { id: a?.id, kind: "ok", status: "completed", result: "A" },
    parents: [],
    children: [{ id: c?.id, kind: "ok", status: "waiting", result: null }],
  });
  const flow = await admin.jobFlow(c?.id as string);
  expect(flow?.parents.map((p) => [p.id, p.status])).toEqual([
    [a?.id, "completed"],
    [b?.id, "pending"],
  ]);
  expect(await admin.jobFlow("987654321")).toBeUndefined();
});

test("a parent buried by the reaper (lease expired, attempts used up) cancels its dependents", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "reaped", maxAttempts: 1 });
  const { id: child } = await t.skipq.enqueue("ok", {}, { queue: "reaped", dependsOn: [parent] });
  const { rows } = await t.db.query(t.skipq.store.sql.jobs.jobClaimBatch.text, [["reaped"], 1, "gone", 30000]);
  expect(rows.map((r) => r.id)).toEqual([parent]);
  await t.db.query(`UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1`, [parent]);
  await new Reaper({ store: t.skipq.store, intervalMs: 1000, logger: silentLogger }).runOnce();
  expect(await status(parent)).toBe("dead");
  expect((await admin.getJob(child))?.last_error).toBe(`cancelled because parent job ${parent} died`);
});

test("the SQL protocol's skipq_complete and skipq_fail resolve dependents like the worker's statements", async () => {
  const s = `"${t.schema}"`;
  const [a, b, ca, cb] = await t.skipq.enqueueMany([
    { job: "ok", payload: {}, queue: "protocol" },
    { job: "ok", payload: {}, queue: "protocol", maxAttempts: 1 },
    { job: "ok", payload: {}, queue: "protocol-children", dependsOn: [{ item: 0 }] },
    { job: "ok", payload: {}, queue: "protocol-children", dependsOn: [{ item: 1 }] },
  ]);
  const { rows } = await t.db.query(`SELECT id, lease FROM ${s}.skipq_claim(ARRAY['protocol'], 2, 'py', 30000)`);
  const lease = (id: string | undefined) => rows.find((r) => r.id === id)?.lease;
  await t.db.query(`SELECT ${s}.skipq_complete($1, $2)`, [a?.id, lease(a?.id)]);
  await t.db.query(`SELECT ${s}.skipq_fail($1, $2, 'boom', 0)`, [b?.id, lease(b?.id)]);
  expect(await status(ca?.id as string)).toBe("pending");
  expect((await admin.getJob(cb?.id as string))?.last_error).toBe(`cancelled because parent job ${b?.id} died`);
});

test("an enqueueTx with dependsOn commits with the caller's transaction and waits like any dependent", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "txok", delay: "1h" });
  const client = await t.db.connect();
  let child = "";
  try {
    await client.query("BEGIN");
    child = (await t.skipq.enqueueTx(client, "ok", {}, { queue: "txok", dependsOn: [parent] })).id;
    await client.query("COMMIT");
  } finally {
    client.release();
  }
  expect(await admin.getJob(child)).toMatchObject({ status: "waiting", dependsOn: [parent], waitingOn: [parent] });
});

test("a dependent enqueued again with its idempotency key returns the existing job and adds no edge", async () => {
  const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "keyed", delay: "1h" });
  const { id: other } = await t.skipq.enqueue("ok", {}, { queue: "keyed", delay: "1h" });
  const first = await t.skipq.enqueue("ok", {}, { queue: "keyed", dependsOn: [parent], idempotencyKey: "k1" });
  const again = await t.skipq.enqueue("ok", {}, { queue: "keyed", dependsOn: [other], idempotencyKey: "k1" });
  expect(first.created).toBe(true);
  expect(again).toEqual({ id: first.id, created: false });
  expect((await admin.getJob(first.id))?.dependsOn).toEqual([parent]);
});

test("retention deletes the edges and batches of finished workflows past the history's age, never a live job's", async () => {
  const { Pruner } = await import("../../src/index.js");
  const [p, c] = await t.skipq.enqueueMany([
    { job: "ok", payload: {}, queue: "retain" },
    { job: "ok", payload: {}, queue: "retain", dependsOn: [{ item: 0 }] },
  ]);
  const { id: stillWaiting } = await t.skipq.enqueue("ok", {}, { queue: "retain-none", dependsOn: [c?.id as string] });
  const b = await t.skipq.batch([{ job: "ok", payload: {}, queue: "retain" }]);
  await worker("retain");
  await until("child completed", async () => (await status(c?.id as string)) === "completed");
  await until("batch finished", async () => (await t.skipq.batchStatus(b.id)).finished);
  await t.db.query(`UPDATE "${t.schema}".job_dependencies SET created_at = now() - interval '40 days'`);
  await t.db.query(`UPDATE "${t.schema}".batches SET created_at = now() - interval '40 days'`);
  await new Pruner(t.skipq, { completedAfter: "1d", deadAfter: "30d" }).runOnce();
  const { rows } = await t.db.query(
    `SELECT child_id::text FROM "${t.schema}".job_dependencies WHERE child_id = ANY ($1) OR parent_id = ANY ($1) ORDER BY 1`,
    [[p?.id, c?.id, stillWaiting, ...b.jobs.map((j) => j.id)]],
  );
  // The finished child's edge is gone; the edge of the job still waiting (its parent c completed) stays.
  expect(rows.map((r) => r.child_id)).toEqual([stillWaiting]);
  await expect(t.skipq.batchStatus(b.id)).rejects.toThrow(/does not exist/);
});

test("a parent completing while its dependent is being enqueued never strands the dependent (200 races)", async () => {
  const sql = t.skipq.store.sql.jobs;
  const withResults = t.skipq.store.sql.features.jobCompleteManyWithResults;
  const stranded: string[] = [];
  for (let i = 0; i < 200; i++) {
    const { id: parent } = await t.skipq.enqueue("ok", {}, { queue: "race" });
    const { rows } = await t.db.query(sql.jobClaimBatch.text, [["race"], 1, "racer", 30000]);
    const lease = rows[0].lease;
    // The outcome statement and the dependent's enqueue, on two connections, started together.
    const [, child] = await Promise.all([
      // Every other race completes with a result: both success statements resolve dependents.
      i % 2 === 0
        ? t.db.query(sql.jobCompleteMany.text, [[parent], [lease]])
        : t.db.query(withResults.text, [[parent], [lease], ['"done"']]),
      t.skipq.enqueue("ok", {}, { queue: "race-children", dependsOn: [parent] }),
    ]);
    const row = await admin.getJob(child.id);
    if (row?.status !== "pending") stranded.push(`${child.id}:${row?.status}`);
  }
  expect(stranded).toEqual([]);
});

test("an operator's retry of a job cancelled because of its parent runs it at once, its parents still in ctx.parents", async () => {
  const [p, c] = await t.skipq.enqueueMany([
    { job: "fail", payload: {}, queue: "reretry" },
    { job: "ok", payload: {}, queue: "reretry", dependsOn: [{ item: 0 }] },
  ]);
  const seen = await worker("reretry");
  await until("child cancelled", async () => (await status(c?.id as string)) === "cancelled");
  await admin.retryJob(c?.id as string);
  await until("child completed", async () => (await status(c?.id as string)) === "completed");
  expect(seen.find((r) => r.id === c?.id)?.parents[p?.id as string]?.status).toBe("dead");
});
