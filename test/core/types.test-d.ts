/**
 * Type tests: a job definition fixes its payload type for enqueue and for its
 * handler, so a wrong payload is a compile error. Checked by `tsc` and by
 * vitest's typecheck mode; an unused @ts-expect-error fails the build.
 */
import type { StandardSchemaV1 as SpecStandardSchemaV1 } from "@standard-schema/spec";
import type pg from "pg";
import { describe, expectTypeOf, test } from "vitest";
import { z } from "zod";
import type { StandardSchemaV1 } from "../../src/core/standardSchema.js";
import {
  type Duration,
  defineJob,
  type EnqueueResult,
  type JobContext,
  type PayloadOf,
  type PostgresJsLike,
  postgresJsQueryable,
  type Queryable,
  type ResultOf,
  type Skipq,
  type WaitResult,
  type Worker,
} from "../../src/index.js";

declare const skipq: Skipq;
declare const tx: Queryable;
declare const worker: Worker;
declare const pgClient: pg.PoolClient;
declare const postgresTx: PostgresJsLike;

const sendEmail = defineJob<{ to: string; subject: string }>("send-email");
const resizeSchema = z.object({ url: z.string(), width: z.number() });
const resize = defineJob("resize", { schema: resizeSchema });

describe("typed jobs", () => {
  test("skipq's copy of the Standard Schema interface takes any validator the spec's own type describes", () => {
    expectTypeOf<SpecStandardSchemaV1<unknown, { a: number }>>().toExtend<StandardSchemaV1<unknown, { a: number }>>();
    expectTypeOf<StandardSchemaV1.InferOutput<typeof resizeSchema>>().toEqualTypeOf<{ url: string; width: number }>();
  });

  test("the payload type comes from the definition", () => {
    expectTypeOf<PayloadOf<typeof sendEmail>>().toEqualTypeOf<{ to: string; subject: string }>();
    expectTypeOf<PayloadOf<typeof resize>>().toEqualTypeOf<{ url: string; width: number }>();
  });

  test("enqueue accepts the right payload and rejects a wrong one", () => {
    expectTypeOf(skipq.enqueue(sendEmail, { to: "a@b.c", subject: "hi" })).toEqualTypeOf<Promise<EnqueueResult>>();
    // @ts-expect-error: subject is missing
    void skipq.enqueue(sendEmail, { to: "a@b.c" });
    // @ts-expect-error: width must be a number
    void skipq.enqueue(resize, { url: "x", width: "wide" });
    // Untyped string kinds take any payload.
    void skipq.enqueue("anything", { whatever: [1, 2, 3] });
  });

  test("enqueueMany, enqueueManyTx and batch check each item's payload against its own definition", () => {
    void skipq.enqueueMany([{ job: sendEmail, payload: { to: "a", subject: "b" } }]);
    void skipq.enqueueMany([
      { job: sendEmail, payload: { to: "a", subject: "b" } },
      { job: resize, payload: { url: "u", width: 1 } },
      { job: "untyped", payload: { anything: true } },
    ]);
    // @ts-expect-error: subject is missing
    void skipq.enqueueMany([{ job: sendEmail, payload: { to: "a" } }]);
    void skipq.enqueueMany([
      { job: sendEmail, payload: { to: "a", subject: "b" } },
      // @ts-expect-error: the second item's width must be a number
      { job: resize, payload: { url: "u", width: "w" } },
    ]);
    // @ts-expect-error: also on the fast path
    void skipq.enqueueMany([{ job: sendEmail, payload: { to: 1, subject: "b" } }], { returning: false });
    // @ts-expect-error: and inside the caller's transaction
    void skipq.enqueueManyTx(tx, [{ job: resize, payload: { url: 1, width: 1 } }]);
    // @ts-expect-error: a batch's callback is an item like the others
    void skipq.batch([{ job: "a", payload: {} }], { onSuccess: { job: sendEmail, payload: { to: "a" } } });
    // Items built elsewhere keep their type.
    const items = [1, 2].map((n) => ({ job: resize, payload: { url: `u${n}`, width: n } }));
    void skipq.enqueueMany(items);
  });

  test("a duration is milliseconds or a number with a unit: a sentence is a compile error", () => {
    void skipq.enqueue(sendEmail, { to: "a", subject: "b" }, { delay: "10s" });
    void skipq.enqueue(sendEmail, { to: "a", subject: "b" }, { delay: "1.5 hours" });
    void skipq.enqueue(sendEmail, { to: "a", subject: "b" }, { delay: 500 });
    // @ts-expect-error: not a duration
    void skipq.enqueue(sendEmail, { to: "a", subject: "b" }, { delay: "ten seconds" });
    // @ts-expect-error: not a unit
    void skipq.worker({ lockTimeout: "30 parsecs" });
    expectTypeOf<"2d">().toExtend<Duration>();
    expectTypeOf<string>().not.toExtend<Duration>();
  });

  test("a definition's result type is what its handler must return and what enqueueAndWait resolves with", () => {
    const render = defineJob<{ id: number }, { url: string }>("render");
    expectTypeOf<ResultOf<typeof render>>().toEqualTypeOf<{ url: string }>();
    expectTypeOf(skipq.enqueueAndWait(render, { id: 1 })).resolves.toEqualTypeOf<WaitResult<{ url: string }>>();
    worker.register(render, async (payload) => ({ url: `/r/${payload.id}` }));
    // @ts-expect-error: the handler must return the definition's result
    worker.register(render, async () => ({ href: "/r" }));
    // Without a result type: unknown, as before.
    expectTypeOf(skipq.enqueueAndWait(sendEmail, { to: "a", subject: "b" })).resolves.toEqualTypeOf<WaitResult>();
    const fromSchema = defineJob<typeof resizeSchema, { bytes: number }>("resize2", { schema: resizeSchema });
    expectTypeOf<PayloadOf<typeof fromSchema>>().toEqualTypeOf<{ url: string; width: number }>();
    expectTypeOf<ResultOf<typeof fromSchema>>().toEqualTypeOf<{ bytes: number }>();
  });

  test("a handler receives the definition's payload type", () => {
    worker.register(sendEmail, async (payload, ctx) => {
      expectTypeOf(payload).toEqualTypeOf<{ to: string; subject: string }>();
      expectTypeOf(ctx).toEqualTypeOf<JobContext<{ to: string; subject: string }>>();
      expectTypeOf(ctx.signal).toEqualTypeOf<AbortSignal>();
    });
    // @ts-expect-error: the handler expects a payload the job does not have
    worker.register(sendEmail, async (payload: { userId: number }) => payload.userId);
    worker.register("untyped", async (payload) => {
      expectTypeOf(payload).toBeUnknown();
    });
  });
});

describe("workflows", () => {
  test("dependsOn takes ids or items, onParentFailure only its three policies", () => {
    void skipq.enqueue(sendEmail, { to: "a", subject: "b" }, { dependsOn: ["1", 2, 3n], onParentFailure: "run" });
    void skipq.enqueueMany([{ job: "b", payload: {}, dependsOn: [{ item: 0 }] }]);
    // @ts-expect-error: not a policy
    void skipq.enqueue("x", {}, { dependsOn: ["1"], onParentFailure: "retry" });
    // @ts-expect-error: a parent is an id or { item }
    void skipq.enqueue("x", {}, { dependsOn: [{ id: 1 }] });
  });

  test("ctx.parents maps ids to outcomes, ctx.spawn takes enqueueMany items", () => {
    worker.register(sendEmail, async (_, ctx: JobContext<{ to: string; subject: string }>) => {
      expectTypeOf(ctx.parents[""]?.result).toEqualTypeOf<unknown>();
      expectTypeOf(ctx.parents[""]?.status).toEqualTypeOf<"completed" | "dead" | "cancelled" | null | undefined>();
      await ctx.spawn([{ job: sendEmail, payload: { to: "a", subject: "b" } }], {
        then: { job: "merge", payload: {} },
      });
      // @ts-expect-error: a spawned child's payload is checked against its definition
      await ctx.spawn([{ job: sendEmail, payload: { to: "a" } }]);
      // @ts-expect-error: so is the continuation's
      await ctx.spawn([{ job: "x", payload: {} }], { then: { job: resize, payload: { url: "u" } } });
    });
  });

  test("ctx.completeTx takes a pg client or an adapter's Queryable, and an optional result", () => {
    worker.register(sendEmail, async (_, ctx) => {
      expectTypeOf(ctx.completeTx(tx)).toEqualTypeOf<Promise<void>>();
      await ctx.completeTx(pgClient, { sent: true });
      await ctx.completeTx(postgresJsQueryable(postgresTx));
      // @ts-expect-error: not a connection
      await ctx.completeTx({ begin() {} });
    });
  });

  test("batch returns its id and batchStatus the counts", () => {
    expectTypeOf(
      skipq.batch([{ job: "a", payload: {} }], { onSuccess: { job: "b", payload: {} } }),
    ).resolves.toHaveProperty("id");
    expectTypeOf(skipq.batchStatus("1")).resolves.toHaveProperty("counts").toEqualTypeOf<Record<string, number>>();
  });
});
