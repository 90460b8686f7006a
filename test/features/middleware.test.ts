/**
 * Middleware (docs/jobs.md): worker.use around every handler, skipq.useEnqueue
 * around every enqueue (single, bulk, transactional). Order, the handler's
 * result kept whatever a middleware returns, failures, all-or-nothing bulk
 * batches, and a tenant context carried from enqueue to handler in headers.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { afterAll, expect, test } from "vitest";
import { defineJob, Skipq, silentLogger, type Worker } from "../../src/index.js";
import { DATABASE_URL, untilFinished, useTestQueue } from "../helpers.js";

const t = useTestQueue("middleware");
const workers: Worker[] = [];
const clients: Skipq[] = [];
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await Promise.all(clients.map((c) => c.close()));
});

/** A client of its own, so its enqueue middleware touches no other test. */
function client(): Skipq {
  const c = new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger: silentLogger, poolSize: 4 });
  clients.push(c);
  return c;
}

function worker(queue: string): Worker {
  const w = t.skipq.worker({ queues: [queue], pollInterval: 20 });
  workers.push(w);
  return w;
}

const finished = (id: string) => untilFinished(t.skipq, id);

const add = defineJob<{ a: number; b: number }>("add");

test("worker middleware runs around every handler, first added outermost, and the handler's value is the result", async () => {
  const trace: string[] = [];
  const w = worker("m1")
    .use(async (ctx, next) => {
      trace.push(`outer in ${ctx.job.kind}`);
      const value = await next();
      trace.push(`outer out ${JSON.stringify(value)}`);
      return "ignored";
    })
    .use(async (_ctx, next) => {
      trace.push("inner in");
      try {
        return await next();
      } finally {
        trace.push("inner out");
      }
    })
    .register(add, (payload) => {
      trace.push("handler");
      return { sum: payload.a + payload.b };
    });
  await w.start();
  const { id } = await t.skipq.enqueue(add, { a: 2, b: 3 }, { queue: "m1" });
  const job = await finished(id);
  expect(job.result).toEqual({ sum: 5 });
  expect(trace).toEqual(["outer in add", "inner in", "handler", "inner out", 'outer out {"sum":5}']);
});

test("a middleware that throws fails the attempt; one that calls next() twice fails it too", async () => {
  const w = worker("m2")
    .use(async (ctx, next) => {
      if ((ctx.job.payload as { a: number }).a === 0) throw new Error("refused by policy");
      if ((ctx.job.payload as { a: number }).a === 1) {
        await next();
        return next();
      }
      return next();
    })
    .register(add, (payload) => payload.a + payload.b);
  await w.start();
  const refused = await t.skipq.enqueue(add, { a: 0, b: 0 }, { queue: "m2", maxAttempts: 1 });
  const twice = await t.skipq.enqueue(add, { a: 1, b: 0 }, { queue: "m2", maxAttempts: 1 });
  const fine = await t.skipq.enqueue(add, { a: 2, b: 2 }, { queue: "m2", maxAttempts: 1 });
  expect((await finished(refused.id)).last_error).toMatch(/refused by policy/);
  expect((await finished(twice.id)).last_error).toMatch(/next\(\) more than once/);
  expect((await finished(fine.id)).result).toBe(4);
});

test("enqueue middleware runs around enqueue, enqueueTx, enqueueMany and enqueueManyTx, and may add headers", async () => {
  const c = client();
  const seen: string[] = [];
  c.useEnqueue(async (call, next) => {
    seen.push(`${call.via}:${call.kind}`);
    call.options.headers = { ...call.options.headers, audit: "yes" };
    const result = await next();
    seen.push(`done ${result?.created}`);
    return result;
  });
  const single = await c.enqueue(add, { a: 1, b: 1 }, { queue: "m3" });
  const tx = await t.db.connect();
  let inTx: { id: string };
  let manyTx: Array<{ id: string }>;
  try {
    await tx.query("BEGIN");
    inTx = await c.enqueueTx(tx, add, { a: 2, b: 2 }, { queue: "m3" });
    manyTx = await c.enqueueManyTx(tx, [{ job: add, payload: { a: 3, b: 3 }, queue: "m3" }]);
    await tx.query("COMMIT");
  } finally {
    tx.release();
  }
  const many = await c.enqueueMany([
    { job: add, payload: { a: 4, b: 4 }, queue: "m3" },
    { job: "other", payload: {}, queue: "m3" },
  ]);
  const copied = await c.enqueueMany([{ job: add, payload: { a: 5, b: 5 }, queue: "m3" }], { returning: false });
  expect(copied).toEqual({ count: 1 });
  expect(seen).toEqual([
    "enqueue:add",
    "done true",
    "enqueueTx:add",
    "done true",
    "enqueueManyTx:add",
    "done true",
    "enqueueMany:add",
    "enqueueMany:other",
    "done true",
    "done true",
    "enqueueMany:add",
    "done undefined",
  ]);
  const { rows } = await t.db.query(`SELECT id, headers FROM "${t.schema}".jobs WHERE queue = 'm3' ORDER BY id`);
  expect(rows).toHaveLength(6);
  for (const r of rows) expect(r.headers).toMatchObject({ audit: "yes" });
  expect(rows.map((r) => r.id)).toEqual(
    expect.arrayContaining([single.id, inTx.id, manyTx[0]?.id, many[0]?.id, many[1]?.id]),
  );
});

test("a bulk enqueue is all or nothing: a middleware that throws or skips next() for one item inserts none", async () => {
  const c = client();
  c.useEnqueue(async (call, next) => {
    const n = (call.payload as { a: number }).a;
    if (n === 13) throw new Error("unlucky");
    if (n === 7) return undefined;
    return next();
  });
  const items = (bad: number) => [1, 2, bad, 4].map((a) => ({ job: add, payload: { a, b: 0 }, queue: "m4" }));
  await expect(c.enqueueMany(items(13))).rejects.toThrow("unlucky");
  await expect(c.enqueueMany(items(7))).rejects.toThrow(/must call next\(\)/);
  await expect(c.enqueue(add, { a: 7, b: 0 }, { queue: "m4" })).rejects.toThrow(/resolved without a result/);
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".jobs WHERE queue = 'm4'`);
  expect(rows[0].n).toBe(0);
  expect((await c.enqueueMany(items(3))).map((r) => r.created)).toEqual([true, true, true, true]);
});

test("what a middleware changes is validated like any call", async () => {
  const c = client();
  c.useEnqueue((call, next) => {
    call.payload = { when: new Date() };
    return next();
  });
  await expect(c.enqueue(add, { a: 1, b: 1 }, { queue: "m5" })).rejects.toMatchObject({
    code: "SKIPQ_PAYLOAD_NOT_JSON",
  });
  expect(() => c.useEnqueue("nope" as never)).toThrow(/takes a function/);
  expect(() => worker("m5").use(42 as never)).toThrow(/takes a function/);
});

test("a tenant context travels from the enqueuing request to the handler through headers", async () => {
  const tenant = new AsyncLocalStorage<string>();
  const c = client();
  c.useEnqueue((call, next) => {
    const current = tenant.getStore();
    if (current) call.options.headers = { ...call.options.headers, tenant: current };
    return next();
  });
  const seen: Array<string | undefined> = [];
  const w = worker("m6")
    .use((ctx, next) => tenant.run(ctx.job.headers.tenant ?? "none", next))
    .register(add, () => {
      seen.push(tenant.getStore());
    });
  await w.start();
  const a = await tenant.run("acme", () => c.enqueue(add, { a: 0, b: 0 }, { queue: "m6" }));
  const b = await c.enqueue(add, { a: 0, b: 0 }, { queue: "m6" });
  await finished(a.id);
  await finished(b.id);
  expect(seen.sort()).toEqual(["acme", "none"]);
});
