/**
 * A strict TypeScript application against skipq's published types (tsconfig.json here: strict,
 * exactOptionalPropertyTypes, noUncheckedIndexedAccess, and no skipLibCheck, so the .d.ts files
 * themselves are checked). Compiled, never run: each `@ts-expect-error` must meet an error, so a
 * payload type that decays to `any` fails the build. Checked in-tree by `npm run typecheck` and
 * against the packed library by scripts/runtime-smoke.mjs.
 */
import { type Duration, defineJob, Skipq, type WaitResult } from "skipq";
import { z } from "zod";

// An environment variable is `string | undefined`: accepted where the option is optional.
const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA });

const resize = defineJob("resize", { schema: z.object({ url: z.string(), width: z.number() }) });
const sendEmail = defineJob<{ to: string }, { messageId: string }>("send-email");

export async function use(): Promise<WaitResult<{ messageId: string }>> {
  await skipq.enqueue(resize, { url: "https://example.com/a.png", width: 200 });
  // @ts-expect-error: width comes from the zod schema and must be a number
  await skipq.enqueue(resize, { url: "x", width: "wide" });
  // @ts-expect-error: not a duration
  await skipq.enqueue(sendEmail, { to: "ada@example.com" }, { delay: "ten seconds" });
  const later: Duration = "10s";
  await skipq.enqueue(sendEmail, { to: "ada@example.com" }, { delay: later });
  skipq.worker().register(sendEmail, async (payload, ctx) => {
    await ctx.spawn([{ job: resize, payload: { url: payload.to, width: 1 } }]);
    // @ts-expect-error: a spawned child's payload is checked against its definition
    await ctx.spawn([{ job: resize, payload: { url: payload.to } }]);
    return { messageId: "m-1" };
  });
  // The result type comes from the definition.
  return skipq.enqueueAndWait(sendEmail, { to: "bob@example.com" });
}
