// A tasks module for `skipq worker --tasks examples/tasks.mjs`: the default
// export maps job kinds to handlers `(payload, ctx) => Promise`. Resolve to
// complete the job; throw to retry it with backoff (dead after maxAttempts).
// docs/cli.md shows it; test/cli/worker.test.ts runs it.
import { appendFile } from "node:fs/promises";

export default {
  /** Pretends to send an e-mail; honours ctx.signal so a shutdown can abort it. */
  "send-email": async (payload, ctx) => {
    if (typeof payload?.to !== "string") throw new Error("payload.to must be an e-mail address");
    await new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, payload.ms ?? 5);
      ctx.signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(ctx.signal.reason);
      });
    });
    // SKIPQ_EXAMPLE_LOG lets the test see which jobs ran; a real handler would call a mail API here.
    if (process.env.SKIPQ_EXAMPLE_LOG) await appendFile(process.env.SKIPQ_EXAMPLE_LOG, `${ctx.job.id} ${payload.to}\n`);
    ctx.log.info({ to: payload.to }, "sent");
  },
};
