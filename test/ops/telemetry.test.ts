import { context, propagation, SpanKind, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { afterAll, beforeAll, expect, test } from "vitest";
import { defineJob, type Job } from "../../src/index.js";
import { testQueue, until } from "../helpers.js";

const exporter = new InMemorySpanExporter();
const provider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });

beforeAll(() => {
  trace.setGlobalTracerProvider(provider);
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
});
afterAll(async () => {
  await provider.shutdown();
  trace.disable();
  propagation.disable();
  context.disable();
});

test("the enqueuer's trace context rides in the job's headers and the execution span links to it", async () => {
  const t = await testQueue("telemetry");
  const ping = defineJob<{ n: number }>("ping");
  const seen: Job[] = [];
  const worker = t.skipq.worker().register(ping, async (_payload, ctx) => {
    seen.push(ctx.job as Job);
    if (ctx.attempt === 1) throw new Error("first attempt fails");
  });
  try {
    const { id } = await t.skipq.enqueue(ping, { n: 1 }, { headers: { tenant: "acme" } });
    const enqueue = exporter.getFinishedSpans().find((s) => s.name === "skipq.enqueue");
    expect(enqueue?.kind).toBe(SpanKind.PRODUCER);
    expect(enqueue?.attributes["messaging.message.id"]).toBe(id);

    const { rows } = await t.db.query(`SELECT headers FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
    expect(rows[0].headers.tenant).toBe("acme");
    expect(rows[0].headers.traceparent).toBe(
      `00-${enqueue?.spanContext().traceId}-${enqueue?.spanContext().spanId}-01`,
    );

    await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() WHERE id = $1`, [id]);
    await worker.runOnce();
    await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() WHERE id = $1`, [id]);
    await worker.runOnce();
    await until(
      "two executions exported",
      () => exporter.getFinishedSpans().filter((s) => s.name === "skipq.execute").length === 2,
    );

    const executions = exporter.getFinishedSpans().filter((s) => s.name === "skipq.execute");
    for (const span of executions) {
      expect(span.kind).toBe(SpanKind.CONSUMER);
      expect(span.links.map((l) => l.context.spanId)).toEqual([enqueue?.spanContext().spanId]);
      expect(span.attributes["messaging.message.id"]).toBe(id);
      const claim = exporter.getFinishedSpans().find((s) => s.spanContext().spanId === span.parentSpanContext?.spanId);
      expect(claim?.name).toBe("skipq.claim");
    }
    expect(
      executions.map((s) => [s.attributes["skipq.job.attempt"], s.attributes["skipq.job.outcome"], s.status.code]),
    ).toEqual([
      [1, "retry", 2],
      [2, "completed", 0],
    ]);
    expect(executions[0]?.events.some((e) => e.name === "exception")).toBe(true);
    expect(seen[0]?.headers.traceparent).toBe(rows[0].headers.traceparent);
  } finally {
    await worker.stop();
    await t.cleanup();
  }
});

test("a bulk enqueue is one span whose context every job of the batch carries", async () => {
  const t = await testQueue("telemetry_bulk");
  exporter.reset();
  try {
    await t.skipq.enqueueMany([
      { job: "a", payload: {} },
      { job: "b", payload: {}, headers: { traceparent: "caller-set" } },
    ]);
    const spans = exporter.getFinishedSpans().filter((s) => s.name === "skipq.enqueue");
    expect(spans).toHaveLength(1);
    expect(spans[0]?.attributes["messaging.batch.message_count"]).toBe(2);
    const { rows } = await t.db.query(
      `SELECT kind, headers->>'traceparent' AS tp FROM "${t.schema}".all_jobs ORDER BY id`,
    );
    expect(rows[0].tp).toContain(spans[0]?.spanContext().spanId);
    expect(rows[1].tp).toBe("caller-set");
  } finally {
    await t.cleanup();
  }
});
