/**
 * Outcomes the database cannot take (it is unreachable) are retried for about
 * one lease — after that the jobs' leases have expired and the reaper returns
 * them anyway — and then given up, so a worker does not spend minutes retrying
 * outcomes that can no longer count (a failover's outage, issue 25).
 */
import { expect, it } from "vitest";
import { type Logger, Skipq } from "../../src/index.js";
import { ChaosProxy } from "../chaos/proxy.js";
import { DATABASE_URL, until, useTestQueue } from "../helpers.js";

const t = useTestQueue("outcome-retry");

it("outcomes that cannot be written are given up about one lease after the first failure, not after minutes", async () => {
  const url = new URL(DATABASE_URL);
  const proxy = new ChaosProxy(Number(url.port || 5432));
  await proxy.start();
  const lines: Array<{ t: number; msg: string | undefined }> = [];
  const keep = (_o: Record<string, unknown>, msg?: string) => lines.push({ t: Date.now(), msg });
  const logger: Logger = { debug() {}, info() {}, warn: keep, error: keep };
  const skipq = new Skipq({ connectionString: proxy.url(DATABASE_URL), schema: t.schema, logger });
  const leaseMs = 3000;
  const worker = skipq.worker({ queues: ["retry-bound"], lockTimeout: `${leaseMs}ms`, listen: false });
  let release = () => {};
  const gate = new Promise<void>((r) => {
    release = r;
  });
  let started = false;
  worker.register("k", async () => {
    started = true;
    await gate;
  });
  try {
    await worker.start();
    await t.skipq.enqueue("k", {}, { queue: "retry-bound" });
    await until("the handler running", () => started);
    // The database goes away; the handler finishes; its outcome cannot be written.
    await proxy.refuse();
    const failedAt = Date.now();
    release();
    const gaveUp = await until(
      "the outcome given up",
      () => lines.find((l) => l.msg?.includes("could not record outcomes")),
      60_000,
      50,
    );
    // One lease, plus at most one backoff step (2 s) and scheduling slack.
    expect(gaveUp.t - failedAt).toBeLessThan(leaseMs + 3000);
    expect(gaveUp.t - failedAt).toBeGreaterThanOrEqual(leaseMs - 500);
  } finally {
    await proxy.reopen();
    await worker.stop();
    await skipq.close();
    await proxy.close();
  }
});
