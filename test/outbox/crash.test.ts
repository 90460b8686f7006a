import { spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { once } from "node:events";
import { describe, expect, test } from "vitest";
import { natsSink, Outbox, webhookSink } from "../../src/index.js";
import { DATABASE_URL, testQueue, until } from "../helpers.js";
import { absentService, assertInOrderAtLeastOnce, reachable, SECRET, webhookServer } from "./helpers.js";

const NATS_SERVER = process.env.NATS_SERVER ?? "127.0.0.1:4222";
const [natsHost, natsPort] = NATS_SERVER.split(":");
const natsUp = await reachable(natsHost ?? "127.0.0.1", Number(natsPort ?? 4222));

test.each([1, 10])(
  "a relay SIGKILLed mid-stream (perKeyBatch %i) loses nothing and never reorders a key; a new relay finishes the stream",
  async (perKeyBatch) => {
    const t = await testQueue("outbox_crash");
    const outbox = new Outbox(t.skipq);
    const keys = ["k1", "k2", "k3", "k4"];
    const perKey = 30;
    const rows = [];
    for (let n = 1; n <= perKey; n++) for (const key of keys) rows.push({ key, n });
    // One statement per event, as real publishers would, interleaving keys.
    const client = await t.skipq.pool.connect();
    await client.query("BEGIN");
    for (const r of rows) await outbox.publish(client, "orders", r.key, { n: r.n });
    await client.query("COMMIT");
    client.release();

    // A receiver with a little latency, so the kill lands while the stream is still flowing.
    const hook = await webhookServer(() => 200, 5);
    const child = spawn(
      process.execPath,
      ["test/fixtures/outbox-relay.mjs", t.schema, hook.url, SECRET, String(perKeyBatch)],
      {
        env: { ...process.env, DATABASE_URL },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const total = keys.length * perKey;
    await until("the child relay delivered part of the stream", () => hook.received.length >= total / 3);
    child.kill("SIGKILL");
    await once(child, "exit");
    const atKill = hook.received.length;
    expect(atKill).toBeLessThan(total);

    // Its leases would expire after lockTimeout; back-date them instead of sleeping.
    await t.db.query(`UPDATE "${t.schema}".outbox SET lease_expires_at = now() WHERE lease IS NOT NULL`);
    const relay = outbox.relay({ sink: webhookSink({ url: hook.url, secret: SECRET }), perKeyBatch, pollInterval: 20 });
    relay.start();
    await until("everything delivered", async () => (await outbox.backlog()).undelivered === 0);
    await relay.stop();

    expect(hook.received.every((r) => r.verified)).toBe(true);
    for (const key of keys) {
      assertInOrderAtLeastOnce(
        hook.received.filter((r) => r.key === key).map((r) => r.n),
        perKey,
        perKeyBatch, // a replay after the crash restarts at most one claimed run back
      );
    }
    const redelivered = hook.received.length - total;
    // At most one claimed run (perKeyBatch events) per key can be sent twice.
    expect(redelivered).toBeLessThanOrEqual(keys.length * perKeyBatch);
    const { rows: left } = await t.db.query(
      `SELECT count(*)::int AS n FROM "${t.schema}".outbox WHERE delivered_at IS NULL OR lease IS NOT NULL`,
    );
    expect(left[0].n).toBe(0);
    await hook.close();
    await t.cleanup();
  },
);

if (!natsUp) {
  describe("pipelined relay crash", () => {
    test("NATS is absent, so the pipelined crash test cannot run", (ctx) =>
      absentService(ctx, "NATS JetStream", `nothing at ${NATS_SERVER}`));
  });
} else {
  test("a pipelining relay (NATS JetStream, runs of up to 1,000) SIGKILLed mid-stream loses nothing and never reorders a key; a new relay finishes", async () => {
    const t = await testQueue("outbox_crash_nats");
    const outbox = new Outbox(t.skipq);
    const keys = ["k1", "k2", "k3", "k4"];
    const perKey = 5000;
    // Enough events that the kill lands mid-stream; written in one statement, keys interleaved.
    await t.db.query(
      `INSERT INTO "${t.schema}".outbox (topic, key, event)
       SELECT 'orders', 'k' || k, jsonb_build_object('n', n) FROM generate_series(1, $1::int) n, generate_series(1, 4) k
        ORDER BY n, k`,
      [perKey],
    );
    const { connect } = await import("nats");
    const nc = await connect({ servers: NATS_SERVER });
    const jsm = await nc.jetstreamManager();
    const suffix = randomUUID().replace(/-/g, "");
    const stream = { name: `skipq_crash_${suffix}`, subjects: [`skipqcrash.${suffix}.>`] };
    await jsm.streams.add(stream);
    const stored = async () => (await jsm.streams.info(stream.name)).state.messages;
    const child = spawn(
      process.execPath,
      ["test/fixtures/outbox-relay.mjs", t.schema, "nats", NATS_SERVER, `skipqcrash.${suffix}`],
      {
        env: { ...process.env, DATABASE_URL },
        stdio: ["ignore", "pipe", "inherit"],
      },
    );
    const total = keys.length * perKey;
    await until("the child relay delivered part of the stream", async () => (await stored()) >= total / 10, 30_000, 5);
    child.kill("SIGKILL");
    await once(child, "exit");
    expect(await stored()).toBeLessThan(total);

    await t.db.query(`UPDATE "${t.schema}".outbox SET lease_expires_at = now() WHERE lease IS NOT NULL`);
    const relay = outbox.relay({
      sink: natsSink({
        servers: NATS_SERVER,
        subject: (e) => `skipqcrash.${suffix}.${e.topic}`,
        messageIdPrefix: `${t.schema}:`,
      }),
      pollInterval: 20,
    });
    relay.start();
    await until("everything delivered", async () => (await outbox.backlog()).undelivered === 0, 60_000);
    await relay.stop();

    // Read the stream back in order: per key, every value is the next one or a replay, never a skip.
    const consumer = await nc.jetstream().consumers.get(stream.name);
    const seen = new Map<string, number[]>(keys.map((k) => [k, []]));
    const count = await stored();
    let read = 0;
    while (read < count) {
      const batch = await consumer.fetch({ max_messages: Math.min(1000, count - read), expires: 5000 });
      for await (const m of batch) {
        seen.get(m.headers?.get("x-skipq-key") ?? "")?.push(m.json<{ n: number }>().n);
        read++;
      }
    }
    for (const key of keys) assertInOrderAtLeastOnce(seen.get(key) ?? [], perKey, 1000);
    const { rows: left } = await t.db.query(
      `SELECT count(*)::int AS n FROM "${t.schema}".outbox WHERE delivered_at IS NULL OR lease IS NOT NULL`,
    );
    expect(left[0].n).toBe(0);
    await jsm.streams.delete(stream.name);
    await nc.close();
    await t.cleanup();
  }, 120_000);
}
