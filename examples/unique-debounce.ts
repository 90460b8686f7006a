/**
 * Uniqueness windows and debounce (docs/jobs.md): one report per customer
 * per hour however often it is asked for, and a search reindex that runs once,
 * with the last payload, after a burst of edits settles — from TypeScript and
 * from plain SQL.
 * Run: DATABASE_URL=postgres://… node --import tsx examples/unique-debounce.ts
 */
import pg from "pg";
import { defineJob, Skipq } from "skipq";

const report = defineJob<{ customer: string }>("monthly-report");
const reindex = defineJob<{ edits: number }>("reindex-search");

const schema = process.env.SKIPQ_SCHEMA ?? "skipq";
const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema });
await skipq.migrate();

// 1. Uniqueness: at most one job per key per period. The key defaults to a hash of kind, queue and payload.
const first = await skipq.enqueue(report, { customer: "acme" }, { unique: { period: "1h" } });
const again = await skipq.enqueue(report, { customer: "acme" }, { unique: { period: "1h" } });
const other = await skipq.enqueue(report, { customer: "globex" }, { unique: { period: "1h" } });
console.log(
  `unique: same job ${again.id === first.id} (created ${again.created}); other customer created ${other.created}`,
);

// 2. Debounce: each enqueue while the job is pending replaces its payload and pushes it back by `delay`
// (3 s here: the whole burst lands inside it even on a busy machine).
let runs = 0;
let lastSeen = 0;
const worker = skipq.worker({ pollInterval: 50 }).register(reindex, (payload) => {
  runs++;
  lastSeen = payload.edits;
});
worker.register(report, () => undefined);
await worker.start();
for (let edits = 1; edits <= 5; edits++)
  await skipq.enqueue(reindex, { edits }, { debounce: { key: "catalog", delay: "3s" } });

// The same from plain SQL: a conflicting pending job of the key is updated instead of duplicated.
const db = new pg.Client({ connectionString: process.env.DATABASE_URL });
await db.connect();
await db.query(
  `INSERT INTO "${schema}".jobs (kind, payload, run_at, debounce_key)
   VALUES ('reindex-search', '{"edits": 6}', now() + interval '3 seconds', 'catalog')
   ON CONFLICT (queue, debounce_key) WHERE debounce_key IS NOT NULL AND status = 'pending'
   DO UPDATE SET payload = EXCLUDED.payload, run_at = EXCLUDED.run_at, updated_at = now()`,
);
await db.end();

while (runs === 0) await new Promise((resolve) => setTimeout(resolve, 50));
console.log(`debounce: ran ${runs} time(s), with edits ${lastSeen}`);

await worker.stop();
await skipq.close();
