/**
 * The same package from a CommonJS TypeScript module (`.cts`, compiled to `require("skipq")`):
 * with `module: nodenext` TypeScript ≥ 5.8 allows requiring the ESM package, as Node ≥ 20.19 and
 * 22.12 do at run time.
 */
import { defineJob, Skipq } from "skipq";

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL });
const ping = defineJob<{ n: number }>("ping");

export async function use(): Promise<void> {
  await skipq.enqueue(ping, { n: 1 });
  // @ts-expect-error: n must be a number
  await skipq.enqueue(ping, { n: "1" });
}
