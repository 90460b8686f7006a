/**
 * NATS JetStream sink: publishes outbox events to JetStream subjects on one
 * connection and counts one as delivered on the stream's PubAck. A key's run
 * is published back to back (the server applies one connection's messages in
 * order) and its PubAcks awaited together (sinks/pipeline.ts). The outbox id
 * is the JetStream message id, so a redelivery inside the stream's duplicate
 * window is dropped by the server. `nats` is an optional peer dependency.
 * Invariant: no PubAck (timeout, no stream for the subject) is a failure, and the relay retries.
 */
import { assertInt } from "../../core/validate.js";
import type { OutboxEvent, OutboxSink } from "../outbox.js";
import { ConfirmWindow, pipelineRun } from "./pipeline.js";

export interface NatsSinkOptions {
  /** Server(s), e.g. "127.0.0.1:4222". */
  servers: string | string[];
  /** Subject per event. Default: the event's topic. */
  subject?: (event: OutboxEvent) => string;
  /** Create (or update) this stream for `subjects` on connect. Default: none (the stream must exist). */
  stream?: { name: string; subjects: string[] };
  /**
   * Prefix of the JetStream message id (then the outbox id), used by the server to
   * drop redeliveries. Use a distinct prefix per skipq schema publishing to one
   * stream, or their ids collide. Default "skipq:".
   */
  messageIdPrefix?: string;
  /** Most publishes awaiting their PubAck at once, over all keys (pipelined runs). Default 1000. */
  window?: number;
}

interface HeadersLike {
  set(name: string, value: string): void;
}
interface JetStreamLike {
  publish(subject: string, data: Uint8Array, options: Record<string, unknown>): Promise<unknown>;
}
interface NatsConnectionLike {
  jetstream(): JetStreamLike;
  jetstreamManager(): Promise<{
    streams: {
      add(config: Record<string, unknown>): Promise<unknown>;
      update(name: string, config: Record<string, unknown>): Promise<unknown>;
    };
  }>;
  closed(): Promise<unknown>;
  close(): Promise<void>;
}
interface NatsModule {
  connect(options: Record<string, unknown>): Promise<NatsConnectionLike>;
  headers(): HeadersLike;
}

export function natsSink(options: NatsSinkOptions): OutboxSink {
  let opening: Promise<{ nats: NatsModule; nc: NatsConnectionLike; js: JetStreamLike }> | undefined;
  const open = () => {
    opening ??= (async () => {
      const nats = (await import("nats")) as unknown as NatsModule;
      const nc = await nats.connect({ servers: options.servers });
      nc.closed().then(() => {
        opening = undefined;
      });
      if (options.stream) {
        const jsm = await nc.jetstreamManager();
        const config = { name: options.stream.name, subjects: options.stream.subjects };
        await jsm.streams.add(config).catch(() => jsm.streams.update(options.stream?.name as string, config));
      }
      return { nats, nc, js: nc.jetstream() };
    })().catch((error) => {
      opening = undefined;
      throw error;
    });
    return opening;
  };
  const window = new ConfirmWindow(assertInt("window", options.window ?? 1000, 1, 1_000_000));
  const encoder = new TextEncoder();
  const publish = (nats: NatsModule, js: JetStreamLike, event: OutboxEvent): Promise<unknown> => {
    const h = nats.headers();
    for (const [name, value] of Object.entries(event.headers)) h.set(name, value);
    h.set("x-skipq-key", event.key);
    h.set("x-skipq-topic", event.topic);
    return js.publish(
      options.subject ? options.subject(event) : event.topic,
      encoder.encode(JSON.stringify(event.event)),
      { msgID: `${options.messageIdPrefix ?? "skipq:"}${event.id}`, headers: h },
    );
  };
  return {
    name: "nats",
    async deliver(event, signal) {
      const { nats, js } = await open();
      const ack = publish(nats, js, event);
      await new Promise<void>((resolve, reject) => {
        const onAbort = () => reject(new Error(`nats did not acknowledge outbox event ${event.id} in time`));
        if (signal.aborted) return onAbort();
        signal.addEventListener("abort", onAbort, { once: true });
        ack.then(
          () => {
            signal.removeEventListener("abort", onAbort);
            resolve();
          },
          (error) => {
            signal.removeEventListener("abort", onAbort);
            reject(error);
          },
        );
      });
    },
    async deliverBatch(events, signal) {
      let opened: { nats: NatsModule; js: JetStreamLike };
      try {
        opened = await open();
      } catch (error) {
        return { confirmed: 0, error };
      }
      return pipelineRun("nats", events, signal, window, (event, done) => {
        publish(opened.nats, opened.js, event).then(
          () => done(),
          (error) => done(error ?? new Error(`nats refused outbox event ${event.id}`)),
        );
      });
    },
    async close() {
      const current = opening;
      opening = undefined;
      if (!current) return;
      const { nc } = await current.catch(() => ({ nc: undefined }));
      await nc?.close().catch(() => undefined);
    },
  };
}
