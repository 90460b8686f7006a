// The packed skipq from a CommonJS application: `require("skipq")` (the package is ESM; the
// `require` condition loads it through require(esm)), then one job enqueued and run. Prints
// "cjs ok" and exits 0, or throws.
const assert = require("node:assert/strict");
const { defineJob, Skipq } = require("skipq");

async function main() {
  const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA });
  await skipq.migrate();
  const job = defineJob("smoke.cjs");
  const worker = skipq.worker({ queues: ["cjs"] }).register(job, async (payload) => payload.n + 1);
  await worker.start();
  const done = await skipq.enqueueAndWait(job, { n: 41 }, { queue: "cjs", timeout: "20s" });
  assert.deepEqual(done, { status: "completed", result: 42, error: null });
  await worker.stop();
  await skipq.close();
  console.log("cjs ok");
}
main().catch((error) => {
  console.error(error);
  process.exit(1);
});
