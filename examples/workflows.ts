/**
 * Workflows: jobs that wait for other jobs. A diamond (fetch → resize, thumbnail
 * → publish) whose last step reads its parents' results, a fan-out from a
 * handler with a fan-in continuation, and a batch with callbacks.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/workflows.ts
 */
import { type Job, Skipq } from "skipq";

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();

const worker = skipq
  .worker({ pollInterval: 100 })
  .register("fetch", (payload) => ({ url: (payload as { url: string }).url, bytes: 2048 }))
  .register("resize", () => ({ width: 800 }))
  .register("thumbnail", () => ({ width: 120 }))
  // A job with dependsOn runs once every parent completed; ctx.parents holds their results by id.
  .register("publish", (_, ctx) => {
    const widths = Object.values(ctx.parents).map((p) => (p.result as { width: number }).width);
    console.log(
      `publish: parents ${Object.values(ctx.parents)
        .map((p) => p.kind)
        .join(" and ")}, widths ${widths.join(", ")}`,
    );
  })
  // Fan-out from a handler: the children and the continuation commit with this job's success.
  .register("split", async (payload, ctx) => {
    const { pages } = payload as { pages: number };
    await ctx.spawn(
      Array.from({ length: pages }, (_, page) => ({ job: "ocr", payload: { page } })),
      { then: { job: "merge", payload: {} } },
    );
  })
  .register("ocr", (payload) => `text of page ${(payload as { page: number }).page}`)
  .register("merge", (_, ctx) => console.log(`merge: ${Object.keys(ctx.parents).length} pages merged`))
  .register("charge", (payload) => {
    if ((payload as { card: string }).card === "declined") throw new Error("card declined");
  })
  .register("report", (_, ctx) => {
    const failed = Object.values(ctx.parents).filter((p) => p.status !== "completed").length;
    console.log(`report: batch finished, ${failed} charge(s) failed`);
  })
  .register("thank-you", () => console.log("thank-you: sent"));

const finished = new Set<string>();
const waitFor = (kinds: string[]) =>
  new Promise<void>((resolve) => {
    const check = (job: Job) => {
      finished.add(job.kind);
      if (kinds.every((k) => finished.has(k))) {
        worker.off("jobEnd", check);
        resolve();
      }
    };
    worker.on("jobEnd", check);
  });
const done = waitFor(["publish", "merge", "report"]);
await worker.start();

// 1. A diamond, in one call: items name each other as { item: i }.
await skipq.enqueueMany([
  { job: "fetch", payload: { url: "https://example.com/cat.png" } },
  { job: "resize", payload: {}, dependsOn: [{ item: 0 }] },
  { job: "thumbnail", payload: {}, dependsOn: [{ item: 0 }] },
  { job: "publish", payload: {}, dependsOn: [{ item: 1 }, { item: 2 }] },
]);

// 2. Fan-out / fan-in from a handler.
await skipq.enqueue("split", { pages: 5 });

// 3. A batch: onComplete runs once all finished; onSuccess only if none died (here one does: it is cancelled).
const batch = await skipq.batch(
  [{ card: "ok" }, { card: "ok" }, { card: "declined" }].map((payload) => ({ job: "charge", payload, maxAttempts: 1 })),
  { onComplete: { job: "report", payload: {} }, onSuccess: { job: "thank-you", payload: {} } },
);

await done;
const status = await skipq.batchStatus(batch.id);
console.log(`batch ${batch.id}: ${JSON.stringify(status.counts)}, finished: ${status.finished}`);
await worker.stop();
await skipq.close();
