/**
 * Type tests: a job definition fixes its payload type for enqueue and for its
 * handler, so a wrong payload is a compile error. Checked by `tsc` and by
 * vitest's typecheck mode; an unused @ts-expect-error fails the build.
 */
import type { StandardSchemaV1 as SpecStandardSchemaV1 } from "@standard-schema/spec";
import { describe, expectTypeOf, test } from "vitest";
import { z } from "zod";
import type { StandardSchemaV1 } from "../../src/core/standardSchema.js";
import {
  defineJob,
  type EnqueueResult,
  type JobContext,
  type PayloadOf,
  type Skipq,
  type Worker,
} from "../../src/index.js";

declare const skipq: Skipq;
declare const worker: Worker;

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

  test("enqueueMany items are checked as well", () => {
    void skipq.enqueueMany([{ job: sendEmail, payload: { to: "a", subject: "b" } }]);
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
    });
  });

  test("batch returns its id and batchStatus the counts", () => {
    expectTypeOf(
      skipq.batch([{ job: "a", payload: {} }], { onSuccess: { job: "b", payload: {} } }),
    ).resolves.toHaveProperty("id");
    expectTypeOf(skipq.batchStatus("1")).resolves.toHaveProperty("counts").toEqualTypeOf<Record<string, number>>();
  });
});
