/**
 * OpenTelemetry: skipq creates spans through @opentelemetry/api, a no-op
 * until you register an SDK. Here a minimal SDK prints them: the enqueue
 * span (producer), the claim span, and the execution span that links back
 * to the enqueue through the W3C traceparent stored in the job's headers.
 * In production use @opentelemetry/sdk-node with your exporter instead.
 * Run: DATABASE_URL=… node --import tsx examples/tracing.ts
 */
import { propagation, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Skipq } from "skipq";

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
propagation.setGlobalPropagator(new W3CTraceContextPropagator());

const skipq = new Skipq({ connectionString: process.env.DATABASE_URL, schema: process.env.SKIPQ_SCHEMA ?? "skipq" });
await skipq.migrate();
const worker = skipq.worker().register("charge-card", async (_payload, ctx) => {
  console.log(`handler sees traceparent ${ctx.job.headers.traceparent ? "set" : "missing"}`);
});
await skipq.enqueue("charge-card", { orderId: 42 });
await worker.runOnce();
await worker.stop();
await skipq.close();

const spans = exporter.getFinishedSpans();
const enqueue = spans.find((s) => s.name === "skipq.enqueue");
const execute = spans.find((s) => s.name === "skipq.execute");
console.log(spans.map((s) => s.name).join(", "));
console.log(
  `execution links to the enqueue span: ${execute?.links[0]?.context.spanId === enqueue?.spanContext().spanId}`,
);
