/**
 * Prometheus metrics and structured logs for a worker: pino JSON lines
 * (handlers' ctx.log carries jobId, kind and attempt) and `skipq_*` metrics
 * served on their own port for Prometheus to scrape.
 * Run: DATABASE_URL=… node --import tsx examples/metrics.ts
 */
import { createLogger, createMetrics, defineJob, Skipq, serveMetrics } from "skipq";

const logger = createLogger({ level: "warn" }); // "info" to see every job's lines
const skipq = new Skipq({
  connectionString: process.env.DATABASE_URL,
  schema: process.env.SKIPQ_SCHEMA ?? "skipq",
  logger,
});
await skipq.migrate();

const resize = defineJob<{ image: string; width: number }>("resize-image");
const worker = skipq.worker({ concurrency: 4 }).register(resize, async (payload, ctx) => {
  ctx.log.info({ image: payload.image, width: payload.width }, "resizing");
});

// Counters and histograms from this worker; queue depth and health read from the database on scrape.
const metrics = createMetrics({ skipq });
metrics.observe(worker);
const server = await serveMetrics({ metrics, port: Number(process.env.METRICS_PORT ?? 0) }); // host: "0.0.0.0" for a remote Prometheus
await worker.start();

const finished = new Promise<void>((resolve) => {
  let done = 0;
  worker.on("jobEnd", () => {
    if (++done === 3) resolve();
  });
});
for (const image of ["a.png", "b.png", "c.png"]) await skipq.enqueue(resize, { image, width: 640 });
await finished;

const text = await (await fetch(server.url)).text();
console.log(text.split("\n").find((line) => line.startsWith("skipq_jobs_completed_total")));
await worker.stop();
await server.close();
await skipq.close();
