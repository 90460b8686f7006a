/**
 * Before/after for the outbox relay: bench/outbox.ts's scenario with two relay
 * variants measured in the same reps — another build of skipq (e.g. main's,
 * built elsewhere) and this one — so their shares of the broker floor compare
 * figures taken moments apart.
 *
 *   node --import tsx bench/outbox-compare.ts /tmp/skipq-main/dist/src/index.js [manyKeys,oneKey,floor,reps]
 *
 * PostgreSQL: DATABASE_URL (required); brokers as in `npm run bench`.
 */
import * as current from "skipq";
import { type Lib, runOutboxBench } from "./outbox.js";

const [otherPath, sizeArg] = process.argv.slice(2);
const databaseUrl = process.env.DATABASE_URL;
if (!otherPath || !databaseUrl) {
  console.error(
    "usage: DATABASE_URL=… node --import tsx bench/outbox-compare.ts <other build's dist/src/index.js> [manyKeys,oneKey,floor,reps]",
  );
  process.exit(2);
}
const other = (await import(otherPath)) as Lib;
const [manyKeys, oneKey, floor, reps] = (sizeArg ?? "20000,5000,20000,5").split(",").map(Number) as [
  number,
  number,
  number,
  number,
];
const rows = await runOutboxBench({
  databaseUrl,
  rabbitUrl: process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672",
  natsServers: process.env.NATS_SERVER ?? "127.0.0.1:4222",
  tag: Math.random().toString(36).slice(2, 8),
  sizes: { manyKeys, oneKey, floor, reps, limitMs: 15_000 },
  log: (message) => console.log(message),
  variants: [
    { label: `other (${otherPath}), defaults`, lib: other, options: {} },
    { label: "this build, defaults", lib: current, options: {} },
  ],
});
const pct = (x: number | undefined) => (x === undefined ? "—" : `${Math.round(100 * x)}%`);
const rate = (x: number | undefined) => (x === undefined ? "—" : String(Math.round(x)));
console.log("\n| destination | relay | floor msgs/s | 100 keys /s | share | 1 key /s | share | note |");
console.log("| --- | --- | --- | --- | --- | --- | --- | --- |");
for (const r of rows) {
  console.log(
    `| ${r.target} | ${r.variant} | ${rate(r.floor)} | ${rate(r.manyKeys)} | ${pct(r.manyKeysShare)} | ${rate(r.oneKey)} | ${pct(r.oneKeyShare)} | ${r.note} |`,
  );
}
process.exit(0);
