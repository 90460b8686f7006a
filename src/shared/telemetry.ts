/**
 * OpenTelemetry spans through `@opentelemetry/api` only: a no-op until the
 * application registers an SDK. Enqueue spans inject their W3C trace context
 * into the job's headers; the execution span links back to it, so a trace
 * shows which request enqueued the job that ran. Claim spans are recorded
 * only for claims that returned jobs (an idle poll is not worth a span).
 * Never throws into the queue: a propagator's failure leaves headers as given.
 */
import {
  type Context,
  context,
  type Link,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";

const TRACER = "skipq";

function tracer() {
  return trace.getTracer(TRACER);
}

/** Runs `fn` inside an active span named `name`, ending it (with the error, if any) when `fn` settles. */
export function traced<T>(
  name: string,
  kind: SpanKind,
  attributes: Record<string, string | number>,
  fn: (span: Span) => Promise<T>,
): Promise<T> {
  return tracer().startActiveSpan(name, { kind, attributes }, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      failSpan(span, error);
      throw error;
    } finally {
      span.end();
    }
  });
}

/** W3C headers carrying a span's context (empty without a registered propagator). */
export type TraceHeaders = Record<string, string>;

/**
 * The enqueue span for one or many jobs. `fn` gets the headers that carry this
 * span's context, injected from the span itself so they are right even when
 * no context manager is registered.
 */
export function enqueueSpan<T>(
  queue: string | undefined,
  count: number,
  fn: (span: Span, traceHeaders: TraceHeaders) => Promise<T>,
): Promise<T> {
  const attributes: Record<string, string | number> = {
    "messaging.system": "skipq",
    "messaging.operation.type": "send",
  };
  if (queue !== undefined) attributes["messaging.destination.name"] = queue;
  if (count !== 1) attributes["messaging.batch.message_count"] = count;
  return traced("skipq.enqueue", SpanKind.PRODUCER, attributes, (span) => {
    const carrier: TraceHeaders = {};
    try {
      if (trace.isSpanContextValid(span.spanContext()))
        propagation.inject(trace.setSpan(context.active(), span), carrier);
    } catch {
      // A failing propagator only loses the link.
    }
    return fn(span, carrier);
  });
}

/** The headers to store: the trace headers under the caller's own, which win. */
export function withTraceContext(
  headers: Record<string, string> | undefined,
  traceHeaders: TraceHeaders | undefined,
): Record<string, string> | undefined {
  if (!traceHeaders || Object.keys(traceHeaders).length === 0) return headers;
  return { ...traceHeaders, ...headers };
}

/** Records a finished, non-empty claim as a span after the fact; returns the context executions start under. */
export function claimSpan(startedAt: number, queues: readonly string[], count: number): Context {
  const span = tracer().startSpan("skipq.claim", {
    kind: SpanKind.CONSUMER,
    startTime: performance.timeOrigin + startedAt,
    attributes: {
      "messaging.system": "skipq",
      "messaging.operation.type": "receive",
      "messaging.destination.name": queues.join(","),
      "messaging.batch.message_count": count,
    },
  });
  span.end();
  return trace.setSpan(ROOT_CONTEXT, span);
}

export interface ExecutedJob {
  id: string;
  queue: string;
  kind: string;
  attempt: number;
  headers: Record<string, string>;
}

/** Starts the execution span: a child of the claim span, linked to the enqueuer's context from the job's headers. */
export function startExecuteSpan(job: ExecutedJob, parent: Context | undefined): Span {
  const links: Link[] = [];
  try {
    const enqueued = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, job.headers));
    if (enqueued && trace.isSpanContextValid(enqueued)) links.push({ context: enqueued });
  } catch {
    // A malformed traceparent only loses the link.
  }
  return tracer().startSpan(
    "skipq.execute",
    {
      kind: SpanKind.CONSUMER,
      links,
      attributes: {
        "messaging.system": "skipq",
        "messaging.operation.type": "process",
        "messaging.destination.name": job.queue,
        "messaging.message.id": job.id,
        "skipq.job.kind": job.kind,
        "skipq.job.attempt": job.attempt,
      },
    },
    parent ?? ROOT_CONTEXT,
  );
}

/** Runs the handler with the execution span active, so the handler's own spans nest under it. */
export function inSpan<T>(span: Span, fn: () => T): T {
  return context.with(trace.setSpan(context.active(), span), fn);
}

export function endExecuteSpan(span: Span, outcome: string, error: unknown): void {
  span.setAttribute("skipq.job.outcome", outcome);
  if (outcome === "retry" || outcome === "dead") failSpan(span, error);
  span.end();
}

function failSpan(span: Span, error: unknown): void {
  if (error instanceof Error) span.recordException(error);
  span.setStatus({ code: SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
}
