import { once } from "node:events";
import http from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Outbox, type OutboxEvent, type OutboxSink, Skipq, webhookSink } from "../../src/index.js";
import { DATABASE_URL, type TestQueue, testQueue, until } from "../helpers.js";
import { SECRET, webhookServer } from "./helpers.js";

async function publishAll(t: TestQueue, outbox: Outbox, keys: string[], perKey: number): Promise<void> {
  // Interleave keys so the relay sees them mixed, one transaction per event.
  for (let n = 1; n <= perKey; n++) {
    for (const key of keys) await outbox.publish(t.skipq.pool, "orders.updated", key, { n });
  }
}

describe("outbox", () => {
  let t: TestQueue;
  let outbox: Outbox;
  beforeAll(async () => {
    t = await testQueue("outbox");
    outbox = new Outbox(t.skipq);
  });
  afterAll(async () => {
    await t.cleanup();
  });

  test("an event exists iff the publishing transaction commits, and reaches the webhook signed", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    const hook = await webhookServer();
    const client = await t.skipq.pool.connect();
    try {
      await client.query("BEGIN");
      await outbox.publish(client, "orders.created", "order-1", { n: 1, note: "rolled back" });
      await client.query("ROLLBACK");
      await client.query("BEGIN");
      await outbox.publish(client, "orders.created", "order-2", { n: 1 });
      await client.query("COMMIT");
    } finally {
      client.release();
    }
    const relay = outbox.relay({ sink: webhookSink({ url: hook.url, secret: SECRET }) });
    expect(await relay.runOnce()).toBe(1);
    expect(hook.received).toEqual([{ id: expect.any(String), key: "order-2", n: 1, verified: true }]);
    expect(await outbox.backlog()).toEqual({ undelivered: 0, oldestMs: 0 });
    await relay.stop();
    await hook.close();
  });

  test("only the oldest undelivered event of a key is claimable, even while it waits for a retry", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    await outbox.publish(t.skipq.pool, "t", "k", { n: 1 });
    await outbox.publish(t.skipq.pool, "t", "k", { n: 2 });
    await outbox.publish(t.skipq.pool, "t", "j", { n: 1 });
    const attempts: string[] = [];
    const failing: OutboxSink = {
      name: "failing",
      async deliver(event) {
        attempts.push(`${event.key}${(event.event as { n: number }).n}`);
        throw new Error("destination down");
      },
    };
    const relay = outbox.relay({ sink: failing, backoff: { baseMs: 60_000 } });
    // k1 with its follower k2, and j1; k1 fails, so k2 is handed back without an attempt.
    expect(await relay.runOnce()).toBe(3);
    expect(attempts.sort()).toEqual(["j1", "k1"]);
    // Both heads wait for their retry; k2 must not overtake k1.
    expect(await relay.runOnce()).toBe(0);
    const { rows } = await t.db.query(
      `SELECT key, event->>'n' AS n, attempts, last_error IS NOT NULL AS failed FROM "${t.schema}".outbox ORDER BY id`,
    );
    expect(rows).toEqual([
      { key: "k", n: "1", attempts: 1, failed: true },
      { key: "k", n: "2", attempts: 0, failed: false },
      { key: "j", n: "1", attempts: 1, failed: true },
    ]);
    // Once the head is due again and succeeds, the next event of the key follows.
    await t.db.query(`UPDATE "${t.schema}".outbox SET run_at = now() WHERE delivered_at IS NULL`);
    const order: string[] = [];
    const ok: OutboxSink = {
      name: "ok",
      async deliver(event) {
        order.push(`${event.key}${(event.event as { n: number }).n}`);
      },
    };
    const relay2 = outbox.relay({ sink: ok });
    while ((await relay2.runOnce()) > 0);
    expect(order.filter((e) => e.startsWith("k"))).toEqual(["k1", "k2"]);
    expect(order).toHaveLength(3);
  });

  test("a second publisher of the same key waits for the first to commit, so ids follow commit order", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    const a = await t.skipq.pool.connect();
    const b = await t.skipq.pool.connect();
    try {
      await a.query("BEGIN");
      const first = await outbox.publish(a, "t", "same", { n: 1 });
      await b.query("BEGIN");
      const pid = (await b.query("SELECT pg_backend_pid() AS pid")).rows[0].pid;
      let secondId: string | undefined;
      const second = outbox.publish(b, "t", "same", { n: 2 }).then((r) => {
        secondId = r.id;
      });
      await until("the second publisher waits on the key's lock", async () => {
        const { rows } = await t.db.query("SELECT wait_event_type FROM pg_stat_activity WHERE pid = $1", [pid]);
        return rows[0]?.wait_event_type === "Lock";
      });
      expect(secondId).toBeUndefined();
      await a.query("COMMIT");
      await second;
      await b.query("COMMIT");
      expect(BigInt(secondId as string)).toBeGreaterThan(BigInt(first.id));
    } finally {
      a.release();
      b.release();
    }
  });

  test("three relays at once deliver every event exactly once and in order per key", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    const keys = ["a", "b", "c", "d", "e", "f"];
    await publishAll(t, outbox, keys, 15);
    const seen = new Map<string, number[]>();
    const inFlight = new Set<string>();
    let overlap = false;
    const sink: OutboxSink = {
      name: "recording",
      async deliver(event: OutboxEvent) {
        if (inFlight.has(event.key)) overlap = true;
        inFlight.add(event.key);
        await new Promise((r) => setImmediate(r));
        seen.set(event.key, [...(seen.get(event.key) ?? []), (event.event as { n: number }).n]);
        inFlight.delete(event.key);
      },
    };
    const relays = [1, 2, 3].map(() => outbox.relay({ sink, batchSize: 2, pollInterval: 20 }));
    for (const r of relays) r.start();
    await until("all delivered", async () => (await outbox.backlog()).undelivered === 0);
    await Promise.all(relays.map((r) => r.stop()));
    expect(overlap).toBe(false);
    for (const key of keys) expect(seen.get(key)).toEqual(Array.from({ length: 15 }, (_, i) => i + 1));
    expect(relays.reduce((sum, r) => sum + r.stats.delivered, 0)).toBe(90);
  });

  test("a relay whose lease expired cannot record its delivery over the new holder's", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    await outbox.publish(t.skipq.pool, "t", "slow", { n: 1 });
    let release: () => void = () => undefined;
    const blocked = new Promise<void>((r) => {
      release = r;
    });
    let entered = false;
    const slow = outbox.relay({
      sink: {
        name: "slow",
        async deliver() {
          entered = true;
          await blocked;
        },
      },
    });
    const stale: string[][] = [];
    slow.on("staleOutcome", (ids) => stale.push(ids));
    const pass = slow.runOnce();
    await until("the slow relay is delivering", () => entered);
    // Its lease runs out (back-dated, no sleeping); another relay takes over and delivers.
    await t.db.query(`UPDATE "${t.schema}".outbox SET lease_expires_at = now() - interval '1 second'`);
    const fast = outbox.relay({ sink: { name: "fast", deliver: async () => undefined } });
    expect(await fast.runOnce()).toBe(1);
    release();
    await pass;
    expect(stale).toHaveLength(1);
    expect(slow.stats.delivered).toBe(0);
    expect(fast.stats.delivered).toBe(1);
    const { rows } = await t.db.query(`SELECT attempts, delivered_at IS NOT NULL AS done FROM "${t.schema}".outbox`);
    expect(rows).toEqual([{ attempts: 2, done: true }]);
  });

  test("a relay whose expired run was partly taken over cannot mark a later event delivered before an earlier one", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    await outbox.publish(t.skipq.pool, "t", "k", { n: 1 });
    await outbox.publish(t.skipq.pool, "t", "k", { n: 2 });
    const claim = (relay: string, perKey: number) =>
      t.skipq.store.query<{ id: string; lease: string; event: { n: number } }>(outbox.sql.outboxClaim, [
        10,
        relay,
        60_000,
        perKey,
        100,
      ]);
    const a = (await claim("a", 2)).rows;
    expect(a).toHaveLength(2);
    // A's lease expires; B takes over only the head.
    await t.db.query(`UPDATE "${t.schema}".outbox SET lease_expires_at = now() - interval '1 ms'`);
    const b = (await claim("b", 1)).rows;
    expect(b.map((r) => r.event.n)).toEqual([1]);
    // A, late, reports both delivered: event 1 is fenced (B holds it), and event 2 must not overtake it.
    const { rows } = await t.skipq.store.query(outbox.sql.outboxDeliveredMany, [
      a.map((r) => r.id),
      a.map((r) => r.lease),
    ]);
    expect(rows).toEqual([]);
    const state = await t.db.query(
      `SELECT event->>'n' AS n, delivered_at IS NOT NULL AS delivered FROM "${t.schema}".outbox ORDER BY id`,
    );
    expect(state.rows).toEqual([
      { n: "1", delivered: false },
      { n: "2", delivered: false },
    ]);
  });

  test("a webhook answering 5xx or too slowly is retried with backoff, and the key's order holds", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    let calls = 0;
    const hook = await webhookServer(() => (++calls === 1 ? 503 : 200));
    await outbox.publish(t.skipq.pool, "t", "k", { n: 1 });
    await outbox.publish(t.skipq.pool, "t", "k", { n: 2 });
    const relay = outbox.relay({ sink: webhookSink({ url: hook.url, secret: SECRET, timeout: "2s" }) });
    expect(await relay.runOnce()).toBe(2);
    expect(relay.stats.failed).toBe(1);
    expect(hook.received).toEqual([]);
    const { rows } = await t.db.query(
      `SELECT last_error, run_at > now() AS later FROM "${t.schema}".outbox WHERE event->>'n' = '1'`,
    );
    expect(rows[0].last_error).toMatch(/answered 503/);
    expect(rows[0].later).toBe(true);
    await t.db.query(`UPDATE "${t.schema}".outbox SET run_at = now()`);
    while ((await relay.runOnce()) > 0);
    expect(hook.received.map((r) => r.n)).toEqual([1, 2]);
    await hook.close();

    // A receiver that never answers: the request is aborted by the timeout and the event stays undelivered.
    const hanging = http.createServer(() => undefined);
    hanging.listen(0, "127.0.0.1");
    await once(hanging, "listening");
    await outbox.publish(t.skipq.pool, "t", "hang", { n: 1 });
    const port = (hanging.address() as AddressInfo).port;
    const timed = outbox.relay({
      sink: webhookSink({ url: `http://127.0.0.1:${port}/`, secret: SECRET, timeout: 200 }),
    });
    expect(await timed.runOnce()).toBe(1);
    expect(timed.stats.failed).toBe(1);
    expect((await outbox.backlog()).undelivered).toBe(1);
    hanging.closeAllConnections();
    await new Promise<void>((r) => hanging.close(() => r()));
  });

  test("bad input is refused before any SQL: odd topic, empty key, deliveryTimeout not below lockTimeout", async () => {
    await expect(outbox.publish(t.skipq.pool, "bad topic!", "k", {})).rejects.toMatchObject({
      code: "SKIPQ_INVALID_ARGUMENT",
    });
    await expect(outbox.publish(t.skipq.pool, "t", "", {})).rejects.toMatchObject({ code: "SKIPQ_INVALID_ARGUMENT" });
    expect(() =>
      outbox.relay({ sink: { name: "x", deliver: async () => undefined }, lockTimeout: "5s", deliveryTimeout: "5s" }),
    ).toThrow(/must be below lockTimeout/);
    expect(() => webhookSink({ url: "http://127.0.0.1/", secret: "short" })).toThrow(/at least 16/);
  });
  test("a sink that is down costs one log line for a run of failing passes, not one per event or pass, and one when it delivers again", async () => {
    await t.db.query(`DELETE FROM "${t.schema}".outbox`);
    const logged: Array<{ level: string; obj: unknown; msg: string }> = [];
    const logger = {
      debug() {},
      info: (obj: unknown, msg: string) => logged.push({ level: "info", obj, msg }),
      warn: (obj: unknown, msg: string) => logged.push({ level: "warn", obj, msg }),
      error() {},
    };
    const skipq = new Skipq({ connectionString: DATABASE_URL, schema: t.schema, logger });
    try {
      const mine = new Outbox(skipq);
      for (let i = 0; i < 30; i++) await mine.publish(skipq.pool, "t", `key-${i}`, { n: i });
      const failed: string[] = [];
      let up = false;
      const flaky: OutboxSink = {
        name: "down",
        async deliver() {
          if (!up) throw new Error("destination down");
        },
      };
      // No retry backoff, so each pass claims every event again.
      const relay = mine.relay({ sink: flaky, backoff: { baseMs: 0, maxMs: 0, jitter: 0 } });
      relay.on("failed", (event) => failed.push(event.key));
      for (let pass = 0; pass < 3; pass++) expect(await relay.runOnce()).toBe(30);
      up = true;
      expect(await relay.runOnce()).toBe(30);
      await relay.stop();
      expect(failed).toHaveLength(90); // every failure still reported, as an event
      expect(logged.map((l) => [l.level, l.msg])).toEqual([
        ["warn", "outbox delivery of 30 events failed (the first one's error attached); will retry"],
        ["info", "outbox delivery succeeded again after 3 failed"],
      ]);
      expect(logged[0]?.obj).toMatchObject({ failed: 30, sink: "down", failures: 1 });
    } finally {
      await skipq.close();
    }
  });
});
