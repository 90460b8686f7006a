/**
 * Bad inputs (matrix 7.6), with property-based tests (fast-check) for names
 * and payloads. Invariant: hostile input gets a typed error and changes
 * nothing (no SQL sent, catalog unchanged); accepted input comes back exactly
 * as it went in, or as the one documented coercion (-0 is stored as 0).
 */
import fc from "fast-check";
import pg from "pg";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { z } from "zod";
import type { EmbeddedPostgres } from "../../src/embedded/embeddedPostgres.js";
import {
  backoffMs,
  type Duration,
  defaultBackoff,
  defineJob,
  Skipq,
  SkipqError,
  silentLogger,
} from "../../src/index.js";
import { type ChaosQueue, chaosQueue, recordResult, startServer, statusCounts, until } from "./harness.js";

let server: EmbeddedPostgres;
let q: ChaosQueue;

beforeAll(async () => {
  server = await startServer();
  q = await chaosQueue(server.url, "inputs");
});
afterAll(async () => {
  await q?.cleanup();
  await server?.stop();
});

/** A Skipq on a pool that counts the statements sent, to prove a rejection sent none. */
function countingSkipq(options: { maxPayloadBytes?: number } = {}): {
  skipq: Skipq;
  sent: () => number;
  end(): Promise<void>;
} {
  const pool = new pg.Pool({ connectionString: server.url, max: 2 });
  let sent = 0;
  const query = pool.query.bind(pool);
  (pool as unknown as { query: typeof query }).query = ((...args: Parameters<typeof query>) => {
    sent++;
    return query(...args);
  }) as typeof query;
  const skipq = new Skipq({ pool, schema: q.schema, logger: silentLogger, ...options });
  return { skipq, sent: () => sent, end: () => pool.end() };
}

async function catalogHash(): Promise<string> {
  const { rows } = await q.db.query(
    `SELECT md5(string_agg(n.nspname || '.' || c.relname || ':' || c.relkind::text, ',' ORDER BY n.nspname, c.relname)) AS h
       FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT LIKE 'pg_%'`,
  );
  return rows[0].h;
}

/** The documented coercion: JSON has no -0, so -0 is stored as 0; everything else is kept exactly. */
function coerce(value: unknown): unknown {
  if (typeof value === "number") return Object.is(value, -0) ? 0 : value;
  if (Array.isArray(value)) return value.map(coerce);
  if (value && typeof value === "object") {
    const out: Record<string, unknown> = {};
    for (const [k, v] of Object.entries(value)) out[k] = coerce(v);
    return out;
  }
  return value;
}

function codeOf(error: unknown): string | undefined {
  return error instanceof SkipqError ? error.code : undefined;
}

describe("bad inputs", () => {
  it("I1: a 50 MB payload is rejected with PayloadTooLarge before any SQL is sent", async () => {
    const { skipq, sent, end } = countingSkipq();
    const huge = { blob: "x".repeat(50 * 1024 * 1024) };
    const t0 = performance.now();
    const error = await skipq.enqueue("chaos", huge).catch((e: unknown) => e);
    const ms = performance.now() - t0;
    await end();
    expect(codeOf(error)).toBe("SKIPQ_PAYLOAD_TOO_LARGE");
    expect(sent()).toBe(0);
    recordResult({
      row: "I1",
      title: "50 MB payload (cap 1 MiB)",
      config: "default maxPayloadBytes",
      lost: 0,
      duplicates: 0,
      other: `rejected: 100 %; statements sent: 0; rejection took ${ms.toFixed(0)} ms`,
    });
  });

  it("I2: a payload exactly at the cap is accepted and round-trips; one byte more is rejected", async () => {
    const cap = 4096;
    const { skipq, end } = countingSkipq({ maxPayloadBytes: cap });
    // Multi-byte characters: the cap counts UTF-8 bytes, not UTF-16 units.
    const overhead = JSON.stringify({ s: "" }).length;
    const atCap = { s: `${"é".repeat((cap - overhead) / 2 - 1)}ab` };
    expect(Buffer.byteLength(JSON.stringify(atCap))).toBe(cap);
    const over = { s: `${atCap.s}c` };
    const { id } = await skipq.enqueue("chaos", atCap);
    const error = await skipq.enqueue("chaos", over).catch((e: unknown) => e);
    await end();
    expect(codeOf(error)).toBe("SKIPQ_PAYLOAD_TOO_LARGE");
    const { rows } = await q.db.query(`SELECT payload FROM "${q.schema}".all_jobs WHERE id = $1`, [id]);
    expect(rows[0].payload).toEqual(atCap);
    recordResult({
      row: "I2",
      title: "Payload at the cap (4,096 UTF-8 bytes, multi-byte) and cap + 1",
      config: "maxPayloadBytes 4096",
      lost: 0,
      duplicates: 0,
      other: "at cap: accepted, round-trips deep-equal; cap + 1: PayloadTooLarge",
    });
  });

  it("I3: NUL in a payload is rejected; NUL and 10 MB in a handler's error are sanitised and the outcome recorded", async () => {
    const nul = await q.skipq.enqueue("chaos", { s: "a\u0000b" }).catch((e: unknown) => e);
    expect(codeOf(nul)).toBe("SKIPQ_PAYLOAD_NOT_JSON");
    const { id } = await q.skipq.enqueue("i3-kind", {}, { maxAttempts: 1, queue: "i3" });
    const worker = q.skipq.worker({ queues: ["i3"], concurrency: 1, listen: false, maintenance: false });
    worker.register("i3-kind", async () => {
      throw new Error(`bad\u0000byte ${"m".repeat(10 * 1024 * 1024)}`);
    });
    expect(await worker.runOnce()).toBe(1);
    await worker.stop();
    const { rows } = await q.db.query(`SELECT status, last_error FROM "${q.schema}".all_jobs WHERE id = $1`, [id]);
    expect(rows[0].status).toBe("dead");
    expect(rows[0].last_error.includes("\u0000")).toBe(false);
    expect(rows[0].last_error.length).toBeLessThan(9000);
    expect(worker.stats.staleOutcomes).toBe(0);
    recordResult({
      row: "I3",
      title: "NUL in the payload; NUL + 10 MB in the handler's error message",
      config: "default",
      lost: 0,
      duplicates: 0,
      other: `payload: PayloadNotJson; error stored ${rows[0].last_error.length} chars, NUL stripped; outcome-write failures: 0`,
    });
  });

  it("I4/I5: any JS value is either rejected with PayloadNotJson or stored and read back equal (property)", async () => {
    let accepted = 0;
    let rejected = 0;
    let dbErrors = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.anything({
          withBigInt: true,
          withDate: true,
          withMap: true,
          withSet: true,
          withTypedArray: true,
          withSparseArray: true,
          withNullPrototype: true,
          withBoxedValues: true,
          withObjectString: true,
          stringUnit: "binary",
        }),
        async (value) => {
          let id: string;
          try {
            ({ id } = await q.skipq.enqueue("chaos", value as never));
          } catch (error) {
            if (codeOf(error) === undefined) dbErrors++;
            expect(["SKIPQ_PAYLOAD_NOT_JSON", "SKIPQ_PAYLOAD_TOO_LARGE"]).toContain(codeOf(error));
            rejected++;
            return;
          }
          accepted++;
          const { rows } = await q.db.query(`SELECT payload FROM "${q.schema}".all_jobs WHERE id = $1`, [id]);
          expect(rows[0].payload).toStrictEqual(coerce(JSON.parse(JSON.stringify(value))));
          expect(coerce(rows[0].payload)).toEqual(coerce(value));
        },
      ),
      { numRuns: 300 },
    );
    // I5: invalid UTF-8 bytes decode to U+FFFD in JS, which is valid and stored as is; lone surrogates are rejected.
    const replaced = Buffer.from([0x61, 0xff, 0xfe, 0x62]).toString("utf8");
    const { id } = await q.skipq.enqueue("chaos", { s: replaced });
    const { rows } = await q.db.query(`SELECT payload->>'s' AS s FROM "${q.schema}".all_jobs WHERE id = $1`, [id]);
    expect(rows[0].s).toBe("a\uFFFD\uFFFDb");
    expect(codeOf(await q.skipq.enqueue("chaos", { s: "\uD800x" }).catch((e: unknown) => e))).toBe(
      "SKIPQ_PAYLOAD_NOT_JSON",
    );
    expect(dbErrors).toBe(0);
    recordResult({
      row: "I4",
      title:
        "Property: 300 arbitrary JS values (BigInt, Date, Map, Set, typed arrays, sparse arrays, boxed values, circular-free)",
      config: "fast-check fc.anything",
      lost: 0,
      duplicates: 0,
      other: `accepted and equal after the round trip: ${accepted}; rejected with PayloadNotJson: ${rejected}; silently changed: 0 (-0 → 0 is the documented coercion)`,
    });
    recordResult({
      row: "I5",
      title: "Lone UTF-16 surrogates; invalid UTF-8 bytes",
      config: "default",
      lost: 0,
      duplicates: 0,
      other:
        "lone surrogates: PayloadNotJson at enqueue; invalid UTF-8 becomes U+FFFD when decoded by Node and is stored as is; DB errors: 0",
    });
  });

  it("I6: any queue or kind name is rejected before SQL or stored and read back identically, and the catalog never changes (property)", async () => {
    const before = await catalogHash();
    const { skipq, sent, end } = countingSkipq();
    const nasty = [
      "'; DROP TABLE jobs;--",
      '"',
      "$1",
      "\\",
      "/*",
      "a\nb",
      "a\u0000b",
      "x".repeat(10_000),
      "",
      " ",
      "default ",
      "dеfault", // Cyrillic е
    ];
    let rejected = 0;
    let stored = 0;
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.constantFrom(...nasty),
          fc.string({ unit: "binary", maxLength: 140 }),
          fc.stringMatching(/^[a-z0-9][a-z0-9_.:-]{0,20}$/),
        ),
        fc.boolean(),
        async (name, asQueue) => {
          const sentBefore = sent();
          try {
            const { id } = asQueue ? await skipq.enqueue("chaos", {}, { queue: name }) : await skipq.enqueue(name, {});
            const { rows } = await q.db.query(`SELECT queue, kind FROM "${q.schema}".all_jobs WHERE id = $1`, [id]);
            expect(asQueue ? rows[0].queue : rows[0].kind).toBe(name);
            stored++;
          } catch (error) {
            expect(codeOf(error)).toBe("SKIPQ_INVALID_ARGUMENT");
            expect(sent()).toBe(sentBefore);
            rejected++;
          }
        },
      ),
      { numRuns: 300 },
    );
    await end();
    expect(await catalogHash()).toBe(before);
    recordResult({
      row: "I6",
      title:
        "Property: queue and kind names (SQL metacharacters, NUL, newline, 10,000 chars, empty, look-alikes, arbitrary strings)",
      config: "fast-check, 300 runs",
      lost: 0,
      duplicates: 0,
      other: `rejected before SQL: ${rejected}; stored and read back identically: ${stored}; catalog hash before = after`,
    });
  });

  it("I7: a schema name with SQL in it is rejected at construction and the catalog is unchanged", async () => {
    const before = await catalogHash();
    for (const schema of ['x"; DROP TABLE jobs; --', "Public", "a b", "", "x".repeat(60), "pg_catalog\u0000"]) {
      expect(() => new Skipq({ connectionString: server.url, schema, logger: silentLogger })).toThrow(
        expect.objectContaining({ code: "SKIPQ_INVALID_ARGUMENT" }),
      );
    }
    expect(await catalogHash()).toBe(before);
    recordResult({
      row: "I7",
      title: "Schema names with quotes, SQL, spaces, uppercase, NUL, 60 chars",
      config: "Skipq constructor",
      lost: 0,
      duplicates: 0,
      other: "all rejected at construction (ValidationError); catalog unchanged",
    });
  });

  it("I8: a large payload never travels in NOTIFY: the notification carries the queue name only", async () => {
    const listener = new pg.Client({ connectionString: server.url });
    await listener.connect();
    const payloads: string[] = [];
    listener.on("notification", (m) => payloads.push(m.payload ?? ""));
    await listener.query(`LISTEN ${pg.escapeIdentifier(q.skipq.channel)}`);
    await q.skipq.enqueue("chaos", { blob: "y".repeat(900_000) }, { queue: "big-payloads" });
    await q.skipq.enqueueMany([{ job: "chaos", payload: { blob: "z".repeat(500_000) }, queue: "big-payloads" }]);
    await until("two notifications", () => payloads.length >= 2);
    await listener.end();
    expect(payloads.every((p) => p === "big-payloads")).toBe(true);
    const most = Math.max(...payloads.map((p) => Buffer.byteLength(p)));
    expect(most).toBeLessThanOrEqual(256);
    recordResult({
      row: "I8",
      title: "900 KB payload and NOTIFY",
      config: "enqueue, enqueueMany",
      lost: 0,
      duplicates: 0,
      other: `NOTIFY payload: the queue name (${most} bytes)`,
    });
  });

  it("I9: 100,000 jobs in one enqueueMany call succeed, and inside a rolled-back transaction leave nothing", async () => {
    const s = `"${q.schema}"`;
    const count = async () =>
      (await q.db.query(`SELECT count(*)::int AS n FROM ${s}.all_jobs WHERE kind = 'bulk'`)).rows[0].n;
    const items = Array.from({ length: 100_000 }, (_, i) => ({ job: "bulk", payload: { i } }));
    const t0 = performance.now();
    const results = await q.skipq.enqueueMany(items);
    const ms = performance.now() - t0;
    expect(results.length).toBe(100_000);
    expect(new Set(results.map((r) => r.id)).size).toBe(100_000);
    expect(await count()).toBe(100_000);
    const tx = await q.db.connect();
    try {
      await tx.query("BEGIN");
      await q.skipq.enqueueManyTx(tx, items.slice(0, 50_000));
      await tx.query("ROLLBACK");
    } finally {
      tx.release();
    }
    expect(await count()).toBe(100_000);
    await q.db.query(`DELETE FROM ${s}.jobs WHERE kind = 'bulk'`);
    recordResult({
      row: "I9",
      title: "100,000 jobs in one enqueueMany call; 50,000 in a rolled-back enqueueManyTx",
      config: "chunks of 5,000 rows as one JSON parameter each",
      lost: 0,
      duplicates: 0,
      other: `100,000 enqueued in ${(ms / 1000).toFixed(1)} s; after the rollback: 0 extra rows`,
    });
  });

  it("I10: out-of-range options get typed errors, and backoff stays finite up to attempt 10,000", async () => {
    const bad: Array<[string, () => unknown]> = [
      ["maxAttempts 0", () => q.skipq.enqueue("chaos", {}, { maxAttempts: 0 })],
      ["maxAttempts -1", () => q.skipq.enqueue("chaos", {}, { maxAttempts: -1 })],
      ["maxAttempts 1e9", () => q.skipq.enqueue("chaos", {}, { maxAttempts: 1e9 })],
      ["maxAttempts 1.5", () => q.skipq.enqueue("chaos", {}, { maxAttempts: 1.5 })],
      ["runAt invalid", () => q.skipq.enqueue("chaos", {}, { runAt: new Date("nope") })],
      ["runAt year 9999", () => q.skipq.enqueue("chaos", {}, { runAt: new Date("9999-01-01") })],
      ["priority 40000", () => q.skipq.enqueue("chaos", {}, { priority: 40_000 })],
      ["priority NaN", () => q.skipq.enqueue("chaos", {}, { priority: Number.NaN })],
      ["delay -1", () => q.skipq.enqueue("chaos", {}, { delay: -1 })],
      ["delay Infinity", () => q.skipq.enqueue("chaos", {}, { delay: Number.POSITIVE_INFINITY })],
      ["delay 'soon'", () => q.skipq.enqueue("chaos", {}, { delay: "soon" as Duration })],
      ["jobTimeout 0", () => q.skipq.worker({ jobTimeout: 0 })],
      ["jobTimeout Infinity", () => q.skipq.worker({ jobTimeout: Number.POSITIVE_INFINITY })],
      ["lockTimeout 0", () => q.skipq.worker({ lockTimeout: 0 })],
      ["concurrency 0", () => q.skipq.worker({ concurrency: 0 })],
      ["heartbeat ≥ lock", () => q.skipq.worker({ lockTimeout: "1s", heartbeatInterval: "2s" })],
    ];
    const codes: string[] = [];
    for (const [, call] of bad) {
      const error = await Promise.resolve()
        .then(call)
        .then(
          () => undefined,
          (e: unknown) => e,
        );
      codes.push(codeOf(error) ?? "none");
    }
    expect(codes.every((c) => c === "SKIPQ_INVALID_ARGUMENT")).toBe(true);
    fc.assert(
      fc.property(fc.integer({ min: 1, max: 10_000 }), fc.integer({ min: 1, max: 10_000 }), (a, b) => {
        const lo = Math.min(a, b);
        const hi = Math.max(a, b);
        const dLo = backoffMs(lo, defaultBackoff, () => 0.5);
        const dHi = backoffMs(hi, defaultBackoff, () => 0.5);
        expect(Number.isFinite(dHi)).toBe(true);
        expect(dHi).toBeGreaterThanOrEqual(dLo);
        expect(dHi).toBeLessThanOrEqual(defaultBackoff.maxMs * (1 + defaultBackoff.jitter));
      }),
    );
    expect(await statusCounts(q)).not.toHaveProperty("running");
    recordResult({
      row: "I10",
      title:
        "maxAttempts 0/-1/1e9/1.5, runAt invalid/9999, priority 40000/NaN, delay -1/∞/'soon', jobTimeout 0/∞, lockTimeout 0, concurrency 0",
      config: "enqueue and worker options",
      lost: 0,
      duplicates: 0,
      other: `typed ValidationError: ${codes.length}/${bad.length}; backoff finite, monotone and capped for attempts 1-10,000`,
    });
  });

  it("I11: a malformed row that fails the job's schema goes to dead on its first attempt without a retry storm", async () => {
    const Email = defineJob("send-email", { schema: z.object({ to: z.email() }), maxAttempts: 10 });
    // Written by something that skipped validation: another service, a psql session.
    await q.db.query(
      `INSERT INTO "${q.schema}".jobs (queue, kind, payload) SELECT 'i11', 'send-email', '{"to": 42}' FROM generate_series(1, 5)`,
    );
    const worker = q.skipq.worker({ queues: ["i11"], concurrency: 5, listen: false, maintenance: false });
    let calls = 0;
    worker.register(Email, async () => {
      calls++;
    });
    await worker.runOnce();
    await worker.stop();
    const { rows } = await q.db.query(
      `SELECT status, attempts FROM "${q.schema}".all_jobs WHERE kind = 'send-email' GROUP BY status, attempts`,
    );
    expect(rows).toEqual([{ status: "dead", attempts: 1 }]);
    expect(calls).toBe(0);
    recordResult({
      row: "I11",
      title: "5 rows whose payload fails the job's zod schema (maxAttempts 10)",
      config: "defineJob with schema",
      lost: 0,
      duplicates: 0,
      other: "attempts used: 1 each; dead-letter count: 5; handler calls: 0",
    });
  });
});
