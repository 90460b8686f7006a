import { spawn } from "node:child_process";
import { once } from "node:events";
import { expect, test } from "vitest";
import { Outbox, webhookSink } from "../../src/index.js";
import { DATABASE_URL, testQueue, until } from "../helpers.js";
import { assertInOrderAtLeastOnce, SECRET, webhookServer } from "./helpers.js";

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
