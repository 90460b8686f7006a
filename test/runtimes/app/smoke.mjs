// The packed skipq as an ESM application uses it, under whichever runtime runs this file (Node,
// Bun, Deno): migrate, transactional enqueue (committed and rolled back), bulk enqueue, a worker
// that only LISTEN/NOTIFY can wake (its poll interval is an hour), enqueueAndWait with a result (on
// a worker polling as usual), Admin reads and the dashboard over HTTP. Run by
// scripts/runtime-smoke.mjs in an app that installed the tarball; prints "smoke ok" and exits 0, or throws.
import assert from "node:assert/strict";
import pg from "pg";
import { Admin, defineJob, Skipq, startDashboard } from "skipq";

const url = process.env.DATABASE_URL;
const schema = process.env.SKIPQ_SCHEMA;
const skipq = new Skipq({ connectionString: url, schema });
await skipq.migrate();
const echo = defineJob("smoke.echo");

// Transactional enqueue: the job exists if and only if the caller's transaction committed.
const db = new pg.Pool({ connectionString: url });
const client = await db.connect();
await client.query("BEGIN");
const rolledBack = await skipq.enqueueTx(client, echo, { n: -1 });
await client.query("ROLLBACK");
await client.query("BEGIN");
const committed = await skipq.enqueueTx(client, echo, { n: 0 });
await client.query("COMMIT");
client.release();
await db.end();
const admin = new Admin(skipq);
assert.equal(await admin.getJob(rolledBack.id), undefined, "a job enqueued in a rolled-back transaction exists");
assert.equal((await admin.getJob(committed.id))?.status, "pending", "a job enqueued in a committed transaction");

const seen = new Set();
const handler = async (payload) => {
  seen.add(payload.n);
  return { doubled: payload.n * 2 };
};
/** Resolves once `check()` holds, or throws after 20 s saying what did not happen. */
async function until(what, check) {
  const deadline = Date.now() + 20_000;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within 20 s: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
// A worker whose poll interval is an hour: after its first claim, only a notification can wake it.
const listening = skipq.worker({ concurrency: 4, pollInterval: "1h" }).register(echo, handler);
const connected = new Promise((resolve) => listening.on("listener", (up) => up && resolve()));
await listening.start();
await connected;
await until("the committed job ran (the claim at start)", () => seen.has(0));
await skipq.enqueueMany(Array.from({ length: 50 }, (_, i) => ({ job: echo, payload: { n: i + 1 } })));
await until(`LISTEN/NOTIFY woke the worker for 50 jobs (it ran ${seen.size - 1})`, () => seen.size === 51);
await listening.stop();
// enqueueAndWait, with a worker that polls as usual.
const worker = skipq.worker({ concurrency: 4 }).register(echo, handler);
await worker.start();
const waited = await skipq.enqueueAndWait(echo, { n: 100 }, { timeout: "20s" });
assert.deepEqual(waited, { status: "completed", result: { doubled: 200 }, error: null });
await worker.stop();
const stats = (await admin.stats()).find((s) => s.queue === "default");
assert.equal(stats?.completed, 52);

// The dashboard: signed in with a token, the default queue listed with its count.
const token = "smoke-token-0123456789abcdef";
const dashboard = await startDashboard({ skipq, port: 0, auth: { token } });
try {
  const anonymous = await fetch(dashboard.url);
  assert.equal(anonymous.status, 401);
  await anonymous.text();
  const page = await fetch(dashboard.url, { headers: { authorization: `Bearer ${token}` } });
  assert.equal(page.status, 200);
  assert.match(await page.text(), /data-queue="default"/);
} finally {
  await dashboard.close();
}
await skipq.close();
const runtime =
  typeof Bun !== "undefined"
    ? `bun ${Bun.version}`
    : typeof Deno !== "undefined"
      ? `deno ${Deno.version.deno}`
      : `node ${process.versions.node}`;
console.log(`smoke ok: ${runtime}`);
