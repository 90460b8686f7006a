/**
 * Workflows from a handler and in batches: ctx.spawn's children and
 * continuation commit only with the spawning job's success; a batch's
 * callbacks run once, when every job finished (onSuccess only if none died),
 * and batchStatus counts its jobs by state.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, FailPermanently, type JobContext, ValidationError, type Worker } from "../../src/index.js";
import { statusCounts, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("workflow spawn");
let admin: Admin;
const workers: Worker[] = [];
beforeAll(async () => {
  admin = new Admin(t.skipq);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

type Run = { id: string; kind: string; payload: unknown; parents: JobContext["parents"] };

async function worker(queue: string, handlers: Record<string, (payload: unknown, ctx: JobContext) => unknown>) {
  const runs: Run[] = [];
  const w = t.skipq.worker({ queues: [queue], pollInterval: 50 });
  for (const [kind, handler] of Object.entries(handlers))
    w.register(kind, (payload, ctx) => {
      runs.push({ id: ctx.id, kind, payload, parents: ctx.parents });
      return handler(payload, ctx);
    });
  workers.push(w);
  await w.start();
  return runs;
}

test("ctx.spawn fans out children and a continuation that runs after all of them, with their results", async () => {
  const runs = await worker("spawn", {
    split: async (_, ctx) => {
      await ctx.spawn(
        [1, 2, 3].map((n) => ({ job: "square", payload: { n }, queue: "spawn" })),
        { then: { job: "sum", payload: {}, queue: "spawn" } },
      );
      return "split";
    },
    square: (payload) => (payload as { n: number }).n ** 2,
    sum: (_, ctx) => Object.values(ctx.parents).reduce((a, p) => a + (p.result as number), 0),
  });
  const { id } = await t.skipq.enqueue("split", {}, { queue: "spawn" });
  await until("sum ran", () => runs.some((r) => r.kind === "sum"));
  const sum = runs.find((r) => r.kind === "sum") as Run;
  await until("sum completed", async () => (await admin.getJob(sum.id))?.status === "completed");
  expect(runs.filter((r) => r.kind === "square")).toHaveLength(3);
  expect(runs.at(-1)?.kind).toBe("sum");
  expect(Object.values(sum.parents).map((p) => p.result)).toEqual([1, 4, 9]);
  const { rows } = await t.db.query(`SELECT result FROM "${t.schema}".job_history WHERE id = $1`, [sum.id]);
  expect(rows[0].result).toBe(14);
  expect((await admin.getJob(id))?.status).toBe("completed");
});

test("a handler that spawns and then fails leaves no child behind", async () => {
  const before = await statusCounts(t);
  const runs = await worker("spawn-fail", {
    split: async (_, ctx) => {
      await ctx.spawn([{ job: "child", payload: {}, queue: "spawn-fail" }], {
        then: { job: "child", payload: {}, queue: "spawn-fail" },
      });
      throw new FailPermanently("changed my mind");
    },
    child: () => undefined,
  });
  const { id } = await t.skipq.enqueue("split", {}, { queue: "spawn-fail" });
  await until("split dead", async () => (await admin.getJob(id))?.status === "dead");
  expect(runs.map((r) => r.kind)).toEqual(["split"]);
  const after = await statusCounts(t);
  expect((after.dead ?? 0) - (before.dead ?? 0)).toBe(1);
  expect(after.pending ?? 0).toBe(before.pending ?? 0);
  expect(after.waiting ?? 0).toBe(before.waiting ?? 0);
});

test("ctx.spawn validates its children at once: a bad one throws in the handler", async () => {
  let error: unknown;
  await worker("spawn-bad", {
    split: async (_, ctx) => {
      try {
        await ctx.spawn([{ job: "bad kind!", payload: {} }]);
      } catch (e) {
        error = e;
      }
    },
  });
  const { id } = await t.skipq.enqueue("split", {}, { queue: "spawn-bad" });
  await until("split completed", async () => (await admin.getJob(id))?.status === "completed");
  expect(error).toBeInstanceOf(ValidationError);
});

test("a batch runs onComplete and onSuccess once, after every job, and batchStatus counts its jobs", async () => {
  const runs = await worker("batch", {
    item: (payload) => (payload as { n: number }).n,
    done: () => "done",
    ok: () => "ok",
  });
  const b = await t.skipq.batch(
    Array.from({ length: 20 }, (_, n) => ({ job: "item", payload: { n }, queue: "batch" })),
    { onComplete: { job: "done", payload: {}, queue: "batch" }, onSuccess: { job: "ok", payload: {}, queue: "batch" } },
  );
  expect(b.jobs).toHaveLength(20);
  await until("callbacks ran", async () => {
    const s = await t.skipq.batchStatus(b.id);
    return s.finished && runs.filter((r) => r.kind !== "item").length === 2;
  });
  const status = await t.skipq.batchStatus(b.id);
  expect(status).toMatchObject({ total: 20, counts: { completed: 20 }, finished: true });
  expect(status.onComplete).toBe(b.onComplete?.id);
  const kinds = runs.map((r) => r.kind);
  expect(kinds.filter((k) => k === "item")).toHaveLength(20);
  expect(kinds.slice(20).sort()).toEqual(["done", "ok"]);
  expect(Object.keys(runs.find((r) => r.kind === "done")?.parents ?? {})).toHaveLength(20);
});

test("a batch with a dead job runs onComplete (seeing the failure) and cancels onSuccess", async () => {
  const runs = await worker("batch-dead", {
    item: (payload) => {
      if ((payload as { n: number }).n === 3) throw new FailPermanently("three");
    },
    done: () => undefined,
    ok: () => undefined,
  });
  const b = await t.skipq.batch(
    Array.from({ length: 5 }, (_, n) => ({ job: "item", payload: { n }, queue: "batch-dead" })),
    {
      onComplete: { job: "done", payload: {}, queue: "batch-dead" },
      onSuccess: { job: "ok", payload: {}, queue: "batch-dead" },
    },
  );
  await until(
    "onComplete completed",
    async () => (await admin.getJob(b.onComplete?.id as string))?.status === "completed",
  );
  const ok = await admin.getJob(b.onSuccess?.id as string);
  expect(ok?.status).toBe("cancelled");
  expect(ok?.last_error).toBe(`cancelled because parent job ${b.jobs[3]?.id} died`);
  expect(runs.filter((r) => r.kind === "ok")).toEqual([]);
  const done = runs.find((r) => r.kind === "done") as Run;
  expect(done.parents[b.jobs[3]?.id as string]?.status).toBe("dead");
  expect(await t.skipq.batchStatus(b.id)).toMatchObject({ counts: { completed: 4, dead: 1 }, finished: true });
});

test("batch refuses an empty list, a callback with its own onParentFailure, and an unknown batch id", async () => {
  await expect(t.skipq.batch([])).rejects.toThrow(ValidationError);
  await expect(
    t.skipq.batch([{ job: "item", payload: {} }], { onSuccess: { job: "ok", payload: {}, onParentFailure: "run" } }),
  ).rejects.toThrow(ValidationError);
  await expect(t.skipq.batchStatus("x")).rejects.toThrow(ValidationError);
  await expect(t.skipq.batchStatus("99999999")).rejects.toThrow(/does not exist/);
});

test("ctx.spawn with no children and a continuation enqueues the continuation ready to run", async () => {
  const runs = await worker("spawn-none", {
    split: async (_, ctx) => {
      await ctx.spawn([], { then: { job: "after", payload: {}, queue: "spawn-none" } });
    },
    after: () => "after",
  });
  await t.skipq.enqueue("split", {}, { queue: "spawn-none" });
  await until("continuation ran", () => runs.some((r) => r.kind === "after"));
  expect(runs.find((r) => r.kind === "after")?.parents).toEqual({});
});

test("children spawned by a job whose outcome is refused (its lease moved on) are never inserted; its re-run spawns them once", async () => {
  const { Reaper } = await import("../../src/maintenance/reaper.js");
  const { silentLogger } = await import("../../src/index.js");
  let runs = 0;
  const stale: string[] = [];
  const w = t.skipq
    .worker({
      queues: ["spawn-stale"],
      pollInterval: 50,
      maintenance: false,
      hooks: {
        // The first run's lease is taken over between its handler and its outcome (as if it had expired and
        // another worker claimed the job): the outcome, and the spawn riding on it, must be refused.
        afterHandlerBeforeOutcome: async (job) => {
          if (runs === 1) await t.db.query(`UPDATE "${t.schema}".jobs SET lease = lease + 1 WHERE id = $1`, [job.id]);
        },
      },
    })
    .register("split", async (_, ctx) => {
      runs++;
      await ctx.spawn([{ job: "leaf", payload: { run: runs }, queue: "spawn-stale-leaves" }]);
    });
  w.on("staleOutcome", (ids) => stale.push(...ids));
  workers.push(w);
  await w.start();
  const { id } = await t.skipq.enqueue("split", {}, { queue: "spawn-stale" });
  await until("outcome refused", () => stale.includes(id));
  const leaves = async () =>
    (
      await t.db.query(
        `SELECT payload FROM "${t.schema}".all_jobs WHERE kind = 'leaf' AND queue = 'spawn-stale-leaves'`,
      )
    ).rows;
  expect(await leaves()).toEqual([]);
  await t.db.query(`UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 s' WHERE id = $1`, [id]);
  await new Reaper({ store: t.skipq.store, intervalMs: 1000, logger: silentLogger }).runOnce();
  await until("re-run completed", async () => (await admin.getJob(id))?.status === "completed");
  expect(runs).toBe(2);
  expect(await leaves()).toEqual([{ payload: { run: 2 } }]);
});
