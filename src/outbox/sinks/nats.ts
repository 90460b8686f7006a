/**
 * NATS JetStream sink: publishes each outbox event to a JetStream subject and
 * resolves on the stream's PubAck. The outbox id is the JetStream message id,
 * so a redelivery inside the stream's duplicate window is dropped by the
 * server. `nats` is an optional peer dependency, loaded on first use.
 * Invariant: no PubAck (timeout, no stream for the subject) rejects, and the relay retries.
 */
import type { OutboxEvent, OutboxSink } from "../outbox.js";

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
  return {
    name: "nats",
    async deliver(event, signal) {
      const { nats, js } = await open();
      const h = nats.headers();
      for (const [name, value] of Object.entries(event.headers)) h.set(name, value);
      h.set("x-skipq-key", event.key);
      h.set("x-skipq-topic", event.topic);
      const ack = js.publish(
        options.subject ? options.subject(event) : event.topic,
        new TextEncoder().encode(JSON.stringify(event.event)),
        { msgID: `${options.messageIdPrefix ?? "skipq:"}${event.id}`, headers: h },
      );
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
    async close() {
      const current = opening;
      opening = undefined;
      if (!current) return;
      const { nc } = await current.catch(() => ({ nc: undefined }));
      await nc?.close().catch(() => undefined);
    },
  };
}
