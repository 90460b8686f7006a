/**
 * A model-based check of the outbox claim against real PostgreSQL: random
 * sequences of publishes, claims by several relays (scanning for heads, or
 * continuing given keys, with a shared event budget), partial deliveries,
 * failures and crashed relays (expired leases), with the invariants checked
 * after every step.
 */
import fc from "fast-check";
import { beforeAll, expect, test } from "vitest";
import type { Statement } from "../../src/db/statements.js";
import { Outbox } from "../../src/index.js";
import { useTestQueue } from "../helpers.js";

type Op =
  | { op: "publish"; key: string }
  | { op: "claim"; relay: number; keys: number; perKey: number; budget: number; only: string[] | null }
  | { op: "settle"; claim: number; deliver: number; fail: boolean }
  | { op: "crash"; claim: number };

interface Claim {
  /** Each event carries its own lease (leases are drawn per row). */
  events: Array<{ id: string; key: string; lease: string }>;
  /** Settled, or its relay crashed: no longer a live holder. */
  settled: boolean;
  /** Events a later claim took over after this one's lease expired. */
  takenOver: Set<string>;
}

const ops: fc.Arbitrary<Op> = fc.oneof(
  fc.record({ op: fc.constant("publish" as const), key: fc.constantFrom("a", "b", "c") }),
  fc.record({
    op: fc.constant("claim" as const),
    relay: fc.integer({ min: 0, max: 2 }),
    keys: fc.integer({ min: 1, max: 3 }),
    perKey: fc.integer({ min: 1, max: 3 }),
    // The pass's event budget, shared by the keys claimed: small values cut runs short.
    budget: fc.integer({ min: 1, max: 9 }),
    // null: the scan for heads (outboxClaim); else a relay continuing these keys (outboxClaimKeys).
    only: fc.option(fc.uniqueArray(fc.constantFrom("a", "b", "c"), { minLength: 1 })),
  }),
  fc.record({
    op: fc.constant("settle" as const),
    claim: fc.nat(),
    deliver: fc.nat({ max: 3 }),
    fail: fc.boolean(),
  }),
  fc.record({ op: fc.constant("crash" as const), claim: fc.nat() }),
);

const t = useTestQueue("outbox_model");
let outbox: Outbox;
beforeAll(async () => {
  outbox = new Outbox(t.skipq);
});

async function undeliveredIds(key: string): Promise<string[]> {
  const { rows } = await t.db.query(
    `SELECT id FROM "${t.schema}".outbox WHERE key = $1 AND delivered_at IS NULL ORDER BY id`,
    [key],
  );
  return rows.map((r) => String(r.id));
}

test("whatever relays do, a claim holds a prefix of its key's undelivered events, one live holder per key, and deliveries follow id order", async () => {
  const sql = outbox.sql;
  const q = (statement: Statement, values: unknown[]) => t.skipq.pool.query(t.skipq.store.config(statement, values));
  await fc.assert(
    fc.asyncProperty(fc.array(ops, { minLength: 5, maxLength: 40 }), async (script) => {
      await t.db.query(`TRUNCATE "${t.schema}".outbox`);
      const claims: Claim[] = [];
      const lastDelivered = new Map<string, bigint>();
      for (const step of script) {
        if (step.op === "publish") {
          await outbox.publish(t.skipq.pool, "t", step.key, {});
        } else if (step.op === "claim") {
          const tail = [`relay-${step.relay}`, 60_000, step.perKey, step.budget];
          const { rows } =
            step.only === null
              ? await q(sql.outboxClaim, [step.keys, ...tail])
              : await q(sql.outboxClaimKeys, [step.only, ...tail]);
          if (rows.length === 0) continue;
          // In id order, as the relay sorts them: RETURNING follows the plan (heap order on a scan).
          const events = rows
            .map((r) => ({ id: String(r.id), key: String(r.key), lease: String(r.lease) }))
            .sort((x, y) => (BigInt(x.id) < BigInt(y.id) ? -1 : 1));
          if (step.only !== null) for (const e of events) expect(step.only).toContain(e.key);
          const byKey = new Map<string, string[]>();
          for (const e of events) byKey.set(e.key, [...(byKey.get(e.key) ?? []), e.id]);
          for (const [key, ids] of byKey) {
            // A prefix: the claimed ids of a key are exactly its oldest undelivered ones.
            ids.sort((a, b) => (BigInt(a) < BigInt(b) ? -1 : 1));
            expect((await undeliveredIds(key)).slice(0, ids.length)).toEqual(ids);
            expect(ids.length).toBeLessThanOrEqual(step.perKey);
            // The budget is shared evenly by the keys claimed (each still gets its head).
            expect(ids.length).toBeLessThanOrEqual(Math.max(1, Math.floor(step.budget / byKey.size)));
            // One live holder per key: no other unsettled, uncrashed claim holds an event of this key.
            for (const other of claims) {
              if (!other.settled) expect(other.events.some((e) => e.key === key)).toBe(false);
            }
          }
          for (const other of claims) for (const e of events) other.takenOver.add(e.id);
          claims.push({ events, settled: false, takenOver: new Set() });
        } else if (claims.length > 0) {
          const claim = claims[step.claim % claims.length] as Claim;
          if (step.op === "crash") {
            // The relay died: its lease expires; its later outcomes must be fenced off.
            await t.db.query(
              `UPDATE "${t.schema}".outbox SET lease_expires_at = now() - interval '1 ms' WHERE lease = ANY ($1::bigint[])`,
              [claim.events.map((e) => e.lease)],
            );
            claim.settled = true;
            continue;
          }
          // Like the relay: per key, deliver a prefix, then maybe fail one, release the rest.
          const delivered: Claim["events"] = [];
          const failed: Claim["events"] = [];
          const released: Claim["events"] = [];
          const keys = [...new Set(claim.events.map((e) => e.key))];
          for (const key of keys) {
            const run = claim.events.filter((e) => e.key === key);
            delivered.push(...run.slice(0, step.deliver));
            const rest = run.slice(step.deliver);
            if (step.fail && rest.length > 0) {
              failed.push(rest[0] as Claim["events"][number]);
              released.push(...rest.slice(1));
            } else released.push(...rest);
          }
          const leases = (list: Claim["events"]) => list.map((e) => e.lease);
          const { rows: done } = await q(sql.outboxDeliveredMany, [delivered.map((e) => e.id), leases(delivered)]);
          const recorded = done.map((r) => String(r.id));
          // Fencing: nothing taken over by a later claim is recorded by this one.
          expect(recorded.filter((id) => claim.takenOver.has(id))).toEqual([]);
          // A live claim's deliveries are all recorded.
          if (!claim.settled) expect(recorded.length).toBe(delivered.length);
          for (const e of delivered.filter((d) => recorded.includes(d.id))) {
            const previous = lastDelivered.get(e.key) ?? 0n;
            expect(BigInt(e.id)).toBeGreaterThan(previous);
            lastDelivered.set(e.key, BigInt(e.id));
          }
          await q(sql.outboxFailedMany, [
            failed.map((e) => e.id),
            leases(failed),
            failed.map(() => "boom"),
            failed.map(() => 0),
          ]);
          await q(sql.outboxReleaseMany, [released.map((e) => e.id), leases(released)]);
          claim.settled = true;
        }
      }
      // Every delivered event of a key precedes every undelivered one: delivery never skipped ahead.
      const { rows } = await t.db.query(
        `SELECT count(*)::int AS n FROM "${t.schema}".outbox d JOIN "${t.schema}".outbox u
            ON u.key = d.key AND u.id < d.id
          WHERE d.delivered_at IS NOT NULL AND u.delivered_at IS NULL`,
      );
      expect(rows[0].n).toBe(0);
    }),
    { numRuns: 40 },
  );
});
