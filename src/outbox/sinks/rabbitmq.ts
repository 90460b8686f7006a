/**
 * RabbitMQ sink: publishes outbox events on one confirm channel and counts one
 * as delivered only when the broker acks it (publisher confirms), so
 * "delivered" means the broker took responsibility. A key's run is published
 * back to back on that channel (which the broker applies in order) and its
 * confirms awaited together (sinks/pipeline.ts). amqplib is an optional peer
 * dependency, loaded on first use — importing skipq never requires it.
 * Invariant: a nack, a closed channel or a timeout is a failure (the relay
 * retries); a broken connection is dropped and re-opened on the next delivery.
 */
import { assertInt } from "../../core/validate.js";
import type { OutboxEvent, OutboxSink } from "../outbox.js";
import { ConfirmWindow, pipelineRun } from "./pipeline.js";

export interface RabbitmqSinkOptions {
  /** AMQP URL, e.g. "amqp://guest:guest@127.0.0.1:5672". */
  url: string;
  /** Exchange to publish to. */
  exchange: string;
  /** Declare the exchange (durable) on connect. Default true. */
  assertExchange?: boolean;
  /** Exchange type when declaring it. Default "topic". */
  exchangeType?: "topic" | "direct" | "fanout" | "headers";
  /** Routing key per event. Default: the event's topic. */
  routingKey?: (event: OutboxEvent) => string;
  /** Most publishes awaiting the broker's confirm at once, over all keys (pipelined runs). Default 1000. */
  window?: number;
}

// Only what skipq uses of amqplib, so its types never leak into skipq's declarations.
interface ConfirmChannelLike {
  publish(
    exchange: string,
    routingKey: string,
    content: Buffer,
    options: Record<string, unknown>,
    callback: (error: unknown) => void,
  ): boolean;
  assertExchange(name: string, type: string, options: Record<string, unknown>): Promise<unknown>;
  on(event: "error" | "close", listener: (error?: unknown) => void): unknown;
  close(): Promise<void>;
}
interface ConnectionLike {
  createConfirmChannel(): Promise<ConfirmChannelLike>;
  on(event: "error" | "close", listener: (error?: unknown) => void): unknown;
  close(): Promise<void>;
}

export function rabbitmqSink(options: RabbitmqSinkOptions): OutboxSink {
  let opening: Promise<{ connection: ConnectionLike; channel: ConfirmChannelLike }> | undefined;
  const open = () => {
    opening ??= (async () => {
      const amqp = (await import("amqplib")) as unknown as { connect(url: string): Promise<ConnectionLike> };
      const connection = await amqp.connect(options.url);
      const reset = () => {
        opening = undefined;
      };
      connection.on("error", reset);
      connection.on("close", reset);
      const channel = await connection.createConfirmChannel();
      channel.on("error", reset);
      channel.on("close", reset);
      if (options.assertExchange ?? true) {
        await channel.assertExchange(options.exchange, options.exchangeType ?? "topic", { durable: true });
      }
      return { connection, channel };
    })().catch((error) => {
      opening = undefined;
      throw error;
    });
    return opening;
  };
  const window = new ConfirmWindow(assertInt("window", options.window ?? 1000, 1, 1_000_000));
  const publish = (channel: ConfirmChannelLike, event: OutboxEvent, done: (error: unknown) => void) =>
    channel.publish(
      options.exchange,
      options.routingKey ? options.routingKey(event) : event.topic,
      Buffer.from(JSON.stringify(event.event)),
      {
        persistent: true,
        contentType: "application/json",
        messageId: event.id,
        headers: { ...event.headers, "x-skipq-key": event.key, "x-skipq-topic": event.topic },
      },
      (error) => done(error ? new Error(`rabbitmq nacked outbox event ${event.id}`, { cause: error }) : undefined),
    );
  return {
    name: "rabbitmq",
    async deliver(event, signal) {
      const { channel } = await open();
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(new Error(`rabbitmq did not confirm outbox event ${event.id} in time`));
        if (signal.aborted) return onAbort();
        signal.addEventListener("abort", onAbort, { once: true });
        publish(channel, event, (error) => {
          signal.removeEventListener("abort", onAbort);
          if (error) reject(error);
          else resolve();
        });
      });
    },
    async deliverBatch(events, signal) {
      let channel: ConfirmChannelLike;
      try {
        ({ channel } = await open());
      } catch (error) {
        return { confirmed: 0, error };
      }
      return pipelineRun("rabbitmq", events, signal, window, (event, done) => publish(channel, event, done));
    },
    async close() {
      const current = opening;
      opening = undefined;
      if (!current) return;
      const { connection } = await current.catch(() => ({ connection: undefined }));
      await connection?.close().catch(() => undefined);
    },
  };
}
