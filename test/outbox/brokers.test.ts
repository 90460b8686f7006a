import { randomUUID } from "node:crypto";
import { beforeAll, describe, expect, test } from "vitest";
import { natsSink, Outbox, rabbitmqSink } from "../../src/index.js";
import { type TestQueue, until, useTestQueue } from "../helpers.js";
import { absentService, reachable } from "./helpers.js";

const RABBIT_URL = process.env.RABBITMQ_URL ?? "amqp://guest:guest@127.0.0.1:5672";
const NATS_SERVER = process.env.NATS_SERVER ?? "127.0.0.1:4222";
const rabbitUp = await reachable(new URL(RABBIT_URL).hostname, Number(new URL(RABBIT_URL).port || 5672));
const [natsHost, natsPort] = NATS_SERVER.split(":");
const natsUp = await reachable(natsHost ?? "127.0.0.1", Number(natsPort ?? 4222));

async function publishInterleaved(outbox: Outbox, t: TestQueue, keys: string[], perKey: number): Promise<void> {
  for (let n = 1; n <= perKey; n++) for (const key of keys) await outbox.publish(t.skipq.pool, "orders", key, { n });
}

const t = useTestQueue("outbox_brokers");
let outbox: Outbox;
beforeAll(async () => {
  outbox = new Outbox(t.skipq);
});

if (!rabbitUp) {
  describe("rabbitmq sink", () => {
    test("RabbitMQ is absent, so its tests cannot run", (ctx) =>
      absentService(ctx, "RabbitMQ", `nothing at ${RABBIT_URL}`));
  });
} else {
  describe("rabbitmq sink", () => {
    test("events reach RabbitMQ once each, confirmed, in order per key", async () => {
      await t.db.query(`DELETE FROM "${t.schema}".outbox`);
      const amqp = await import("amqplib");
      const connection = await amqp.connect(RABBIT_URL);
      const channel = await connection.createChannel();
      const exchange = `skipq-test-${randomUUID()}`;
      await channel.assertExchange(exchange, "topic", { durable: false, autoDelete: true });
      const { queue } = await channel.assertQueue("", { exclusive: true });
      await channel.bindQueue(queue, exchange, "#");
      const got: Array<{ key: string; n: number; id: string }> = [];
      await channel.consume(
        queue,
        (msg) => {
          if (!msg) return;
          got.push({
            key: String(msg.properties.headers?.["x-skipq-key"]),
            n: JSON.parse(msg.content.toString()).n,
            id: msg.properties.messageId,
          });
        },
        { noAck: true },
      );
      await publishInterleaved(outbox, t, ["a", "b", "c"], 10);
      const relay = outbox.relay({ sink: rabbitmqSink({ url: RABBIT_URL, exchange, assertExchange: false }) });
      while ((await relay.runOnce()) > 0);
      await relay.stop();
      expect(relay.stats.delivered).toBe(30);
      await until("all 30 consumed", () => got.length === 30);
      for (const key of ["a", "b", "c"]) {
        expect(got.filter((g) => g.key === key).map((g) => g.n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
      }
      expect(new Set(got.map((g) => g.id)).size).toBe(30);
      await connection.close();
    });

    test("a publish the broker refuses (no such exchange) is not marked delivered and is retried", async () => {
      await t.db.query(`DELETE FROM "${t.schema}".outbox`);
      await outbox.publish(t.skipq.pool, "orders", "x", { n: 1 });
      const relay = outbox.relay({
        sink: rabbitmqSink({ url: RABBIT_URL, exchange: `skipq-missing-${randomUUID()}`, assertExchange: false }),
      });
      expect(await relay.runOnce()).toBe(1);
      expect(relay.stats.failed).toBe(1);
      const { rows } = await t.db.query(`SELECT delivered_at, last_error FROM "${t.schema}".outbox`);
      expect(rows[0].delivered_at).toBeNull();
      expect(rows[0].last_error).toMatch(/rabbitmq|channel|404|NOT_FOUND/i);
      await relay.stop();
    });
  });
}

if (!natsUp) {
  describe("nats jetstream sink", () => {
    test("NATS is absent, so its tests cannot run", (ctx) =>
      absentService(ctx, "NATS JetStream", `nothing at ${NATS_SERVER}`));
  });
} else {
  describe("nats jetstream sink", () => {
    test("events reach a JetStream stream in order per key, and a redelivery is dropped by message id", async () => {
      await t.db.query(`DELETE FROM "${t.schema}".outbox`);
      const { connect } = await import("nats");
      const suffix = randomUUID().replace(/-/g, "");
      const stream = { name: `skipq_test_${suffix}`, subjects: [`skipqtest.${suffix}.>`] };
      const sink = natsSink({
        servers: NATS_SERVER,
        stream,
        subject: (e) => `skipqtest.${suffix}.${e.topic}`,
        messageIdPrefix: `${t.schema}:`,
      });
      await publishInterleaved(outbox, t, ["a", "b"], 8);
      const relay = outbox.relay({ sink });
      while ((await relay.runOnce()) > 0);
      expect(relay.stats.delivered).toBe(16);
      // A crash between the PubAck and the delivered mark means the same event is sent again.
      const first = (await t.db.query(`SELECT id, topic, key, event FROM "${t.schema}".outbox ORDER BY id LIMIT 1`))
        .rows[0];
      await sink.deliver(
        {
          id: first.id,
          topic: first.topic,
          key: first.key,
          event: first.event,
          headers: {},
          attempt: 2,
          createdAt: new Date(),
        },
        AbortSignal.timeout(5000),
      );
      await relay.stop();

      const nc = await connect({ servers: NATS_SERVER });
      const jsm = await nc.jetstreamManager();
      expect((await jsm.streams.info(stream.name)).state.messages).toBe(16);
      const consumer = await nc.jetstream().consumers.get(stream.name);
      const got: Array<{ key: string; n: number }> = [];
      const batch = await consumer.fetch({ max_messages: 16, expires: 5000 });
      for await (const m of batch) {
        got.push({ key: m.headers?.get("x-skipq-key") ?? "", n: m.json<{ n: number }>().n });
        if (got.length === 16) break;
      }
      for (const key of ["a", "b"]) {
        expect(got.filter((g) => g.key === key).map((g) => g.n)).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
      }
      await jsm.streams.delete(stream.name);
      await nc.close();
    });
  });
}
