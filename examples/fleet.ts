/**
 * A worker process for a fleet (docs/deployment.md): partition-safe session
 * settings (the defaults, one tightened), a worker-only client pool, and —
 * when POOLER_URL names a transaction-mode pooler such as PgBouncer — the
 * pool through it with prepared statements and startup options off, LISTEN
 * direct. Prints what its worker's own connections run with.
 * Run: DATABASE_URL=postgres://… [POOLER_URL=postgres://…] node --import tsx examples/fleet.ts
 */
import { Skipq } from "skipq";

const direct = process.env.DATABASE_URL;
const pooler = process.env.POOLER_URL;
const skipq = new Skipq({
  connectionString: pooler ?? direct,
  schema: process.env.SKIPQ_SCHEMA ?? "skipq",
  poolSize: 1, // this process only works; its enqueues (below) are few
  ...(pooler
    ? { preparedStatements: false, sessionSettings: false } // set the timeouts on the pooler and the role
    : { sessionSettings: { tcp_user_timeout: 5000 } }), // merged over the defaults
});
await skipq.migrate();

const worker = skipq.worker({
  concurrency: 10,
  lockTimeout: "30s", // bounds statement_timeout and idle transactions on the worker's own pool
  ...(pooler ? { listenConnectionString: direct } : {}),
});
let done = 0;
worker.register("report", async () => {
  done++;
});
await worker.start();

const { rows } = await worker.pool.query(
  `SELECT name, setting FROM pg_settings
    WHERE name IN ('tcp_user_timeout', 'statement_timeout', 'idle_in_transaction_session_timeout') ORDER BY name`,
);
console.log(`worker session: ${rows.map((r) => `${r.name}=${r.setting}`).join(" ")}`);

await skipq.enqueueMany([1, 2, 3].map((n) => ({ job: "report", payload: { n } })));
while (done < 3) await new Promise((resolve) => setTimeout(resolve, 20));
console.log(`ran ${done} jobs`);
await worker.stop();
await skipq.close();
