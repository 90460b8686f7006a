/**
 * A worker process for the multi-process drain and the memory scenario.
 * Imports only its own system's adapter (so its RSS holds one library), then
 * talks to the parent over IPC: "ready" → waits for "go" → starts a worker and
 * reports its handled count every 20 ms → on "stop", stops the worker and
 * reports its peak RSS (process.resourceUsage().maxRSS, KiB).
 * Usage: node --import tsx bench/child.ts <system|baseline> <tag> <concurrency>
 */
import type { BenchEnv, WorkerHandle } from "./lib.js";

const [system = "", tag = "", concurrencyArg = "10"] = process.argv.slice(2);
const env = JSON.parse(process.env.SKIPQ_BENCH_ENV ?? "{}") as BenchEnv;
const send = (message: object) => process.send?.(message);

let count = 0;
let worker: WorkerHandle | undefined;
let close: (() => Promise<void>) | undefined;
let reporter: NodeJS.Timeout | undefined;

if (system !== "baseline") {
  const module = (await import(`./adapters/${system}.js`)) as typeof import("./adapters/skipq.js");
  const adapter = module.create(env, tag);
  close = () => adapter.close();
  process.on("message", async (message: { type: string }) => {
    if (message.type === "go") {
      worker = await adapter.startWorker({
        concurrency: Number(concurrencyArg),
        onJob: () => {
          count++;
        },
      });
      reporter = setInterval(() => send({ type: "count", n: count }), 20);
    }
  });
}

process.on("message", async (message: { type: string }) => {
  if (message.type !== "stop") return;
  clearInterval(reporter);
  await worker?.stop();
  await close?.();
  // Exit explicitly once the parent has the figures: some libraries keep timers alive after stop.
  process.send?.({ type: "stopped", n: count, maxRssKb: process.resourceUsage().maxRSS }, undefined, {}, () =>
    process.exit(0),
  );
});

send({ type: "ready" });
