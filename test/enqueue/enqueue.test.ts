/**
 * Enqueue: single, bulk, transactional, idempotent, scheduled — and bad input
 * that throws a typed error and writes nothing.
 */
import pg from "pg";
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { type Duration, NAME_PATTERN } from "../../src/core/validate.js";
import {
  defineJob,
  PayloadInvalidError,
  PayloadNotJsonError,
  PayloadTooLargeError,
  Skipq,
  silentLogger,
  ValidationError,
} from "../../src/index.js";
import { DATABASE_URL, useTestQueue } from "../helpers.js";

const t = useTestQueue("enqueue");

async function count(where = "true", values: unknown[] = []): Promise<number> {
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE ${where}`, values);
  return rows[0].n;
}

test("every enqueue path on a schema that was never migrated says to run skipq migrate, and creates nothing", async () => {
  const schema = `${t.schema}_unmigrated`;
  const fresh = new Skipq({ connectionString: DATABASE_URL, schema, logger: silentLogger });
  const db = new pg.Client({ connectionString: DATABASE_URL });
  await db.connect();
  try {
    const inTx = async () => {
      await db.query("BEGIN");
      try {
        return await fresh.enqueueTx(db, "never", {});
      } finally {
        await db.query("ROLLBACK");
      }
    };
    const calls: Array<[string, () => Promise<unknown>]> = [
      ["enqueue", () => fresh.enqueue("never", {})],
      ["enqueue with a key", () => fresh.enqueue("never", {}, { idempotencyKey: "k" })],
      ["enqueueMany", () => fresh.enqueueMany([{ job: "never", payload: {} }])],
      ["enqueueMany (COPY)", () => fresh.enqueueMany([{ job: "never", payload: {} }], { returning: false })],
      ["enqueueTx", inTx],
    ];
    for (const [what, call] of calls) {
      const error = await call().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect({ what, error }).toMatchObject({
        what,
        error: { code: "SKIPQ_SCHEMA_NOT_MIGRATED", message: expect.stringMatching(/skipq migrate.*migrate\(\)/) },
      });
    }
    const { rows } = await db.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1", [schema]);
    expect(rows[0].n).toBe(0);
  } finally {
    await db.end();
    await fresh.close();
  }
});

test("an enqueued job is stored pending with its options and defaults", async () => {
  const { id, created } = await t.skipq.enqueue("stored", { a: 1 }, { queue: "mail", priority: 5, maxAttempts: 3 });
  expect(created).toBe(true);
  const { rows } = await t.db.query(`SELECT * FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  expect(rows[0]).toMatchObject({
    queue: "mail",
    kind: "stored",
    payload: { a: 1 },
    status: "pending",
    priority: 5,
    max_attempts: 3,
    attempts: 0,
  });
});

test("a delay is measured from the database clock", async () => {
  const { id } = await t.skipq.enqueue("later", {}, { delay: "1h" });
  const { rows } = await t.db.query(
    `SELECT EXTRACT(EPOCH FROM run_at - now())::float AS ahead FROM "${t.schema}".all_jobs WHERE id = $1`,
    [id],
  );
  expect(rows[0].ahead).toBeGreaterThan(3590);
  expect(rows[0].ahead).toBeLessThanOrEqual(3600);
});

test("an enqueue inside a committed transaction exists; inside a rolled-back one leaves no job", async () => {
  const client = await t.db.connect();
  try {
    await client.query("BEGIN");
    const kept = await t.skipq.enqueueTx(client, "tx-commit", { n: 1 });
    await client.query("COMMIT");
    await client.query("BEGIN");
    const dropped = await t.skipq.enqueueTx(client, "tx-rollback", { n: 2 });
    expect(await count("kind = 'tx-rollback'")).toBe(0); // invisible to others before commit
    await client.query("ROLLBACK");
    expect(await count("id = $1", [kept.id])).toBe(1);
    expect(await count("id = $1", [dropped.id])).toBe(0);
  } finally {
    client.release();
  }
});

test("an idempotency key yields one job under 50 concurrent transactions, 25 of which roll back", async () => {
  const key = `order-${Math.random()}`;
  const clients = await Promise.all(
    Array.from({ length: 50 }, () => new pg.Client({ connectionString: DATABASE_URL })),
  );
  await Promise.all(clients.map((c) => c.connect()));
  try {
    await Promise.all(clients.map((c) => c.query("BEGIN")));
    const results = await Promise.all(
      clients.map(async (c, i) => {
        const r = await t.skipq.enqueueTx(c, "charge", { i }, { idempotencyKey: key, queue: "billing" });
        await c.query(i % 2 === 0 ? "ROLLBACK" : "COMMIT");
        return { ...r, committed: i % 2 === 1 };
      }),
    );
    expect(await count("idempotency_key = $1", [key])).toBe(1);
    const { rows } = await t.db.query(`SELECT id FROM "${t.schema}".all_jobs WHERE idempotency_key = $1`, [key]);
    const committed = results.filter((r) => r.committed);
    // Every committed caller was told the id of the one job that exists.
    expect(new Set(committed.map((r) => r.id))).toEqual(new Set([rows[0].id]));
    expect(committed.filter((r) => r.created)).toHaveLength(1);
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
});

test("a repeated idempotency key returns the existing job and inserts nothing", async () => {
  const first = await t.skipq.enqueue("once", { v: 1 }, { idempotencyKey: "k1" });
  const second = await t.skipq.enqueue("once", { v: 2 }, { idempotencyKey: "k1" });
  expect(second).toEqual({ id: first.id, created: false });
  const other = await t.skipq.enqueue("once", { v: 3 }, { idempotencyKey: "k1", queue: "elsewhere" });
  expect(other.created).toBe(true);
});

test("bulk enqueue of 100,000 jobs works in one call, ids in input order", async () => {
  const items = Array.from({ length: 100_000 }, (_, i) => ({ job: "bulk", payload: { i }, queue: "bulk" }));
  const results = await t.skipq.enqueueMany(items);
  expect(results).toHaveLength(100_000);
  expect(await count("queue = 'bulk'")).toBe(100_000);
  const { rows } = await t.db.query(
    `SELECT id, payload->>'i' AS i FROM "${t.schema}".all_jobs WHERE id = ANY($1::bigint[])`,
    [[results[0]?.id, results[54_321]?.id, results[99_999]?.id]],
  );
  const byId = new Map(rows.map((r) => [r.id, Number(r.i)]));
  expect(byId.get(results[0]?.id as string)).toBe(0);
  expect(byId.get(results[54_321]?.id as string)).toBe(54_321);
  expect(byId.get(results[99_999]?.id as string)).toBe(99_999);
});

test("bulk enqueue stores every option per row, whether the rows share their options or not", async () => {
  const runAt = new Date(Date.now() + 3_600_000);
  const shared = { queue: "shape", priority: 3, maxAttempts: 4, runAt, concurrencyKey: "t-1", headers: { h: "1" } };
  const uniform = Array.from({ length: 3 }, (_, i) => ({ job: "shape", payload: { i }, ...shared }));
  // The same rows, but one differs in a single option: the batch can no longer share them.
  const mixed = uniform.map((item, i) =>
    i === 1 ? { ...item, payload: { i: i + 10 }, priority: 5 } : { ...item, payload: { i: i + 10 } },
  );
  for (const items of [uniform, mixed]) {
    const results = await t.skipq.enqueueMany(items);
    const { rows } = await t.db.query(
      `SELECT id, queue, kind, payload, priority, max_attempts, run_at, headers, concurrency_key
         FROM "${t.schema}".jobs WHERE id = ANY($1::bigint[])`,
      [results.map((r) => r.id)],
    );
    const byId = new Map(rows.map((r) => [r.id, r]));
    items.forEach((item, i) => {
      expect(byId.get(results[i]?.id as string)).toEqual({
        id: results[i]?.id,
        queue: "shape",
        kind: "shape",
        payload: item.payload,
        priority: item.priority,
        max_attempts: 4,
        run_at: runAt,
        headers: { h: "1" },
        concurrency_key: "t-1",
      });
    });
  }
});

test("bulk enqueue inside a rolled-back transaction leaves nothing, across chunks", async () => {
  const client = await t.db.connect();
  try {
    await client.query("BEGIN");
    await t.skipq.enqueueManyTx(
      client,
      Array.from({ length: 12_000 }, (_, i) => ({ job: "bulk-rollback", payload: { i } })),
    );
    await client.query("ROLLBACK");
  } finally {
    client.release();
  }
  expect(await count("kind = 'bulk-rollback'")).toBe(0);
});

test("bulk enqueue honours idempotency keys, within the batch and against existing jobs", async () => {
  const existing = await t.skipq.enqueue("bulk-key", {}, { idempotencyKey: "b-0" });
  const results = await t.skipq.enqueueMany([
    { job: "bulk-key", payload: {}, idempotencyKey: "b-0" },
    { job: "bulk-key", payload: {}, idempotencyKey: "b-1" },
    { job: "bulk-key", payload: {}, idempotencyKey: "b-1" },
    { job: "bulk-key", payload: {} },
  ]);
  expect(results[0]).toEqual({ id: existing.id, created: false });
  expect(results[1]?.created).toBe(true);
  expect(results[2]).toEqual({ id: results[1]?.id, created: false });
  expect(results[3]?.created).toBe(true);
  expect(await count("kind = 'bulk-key'")).toBe(3);
});

test("a notification carries the queue name only, and only on commit", async () => {
  const listener = new pg.Client({ connectionString: DATABASE_URL });
  await listener.connect();
  const received: string[] = [];
  listener.on("notification", (m) => received.push(m.payload ?? ""));
  await listener.query(`LISTEN "${t.skipq.channel}"`);
  const client = await t.db.connect();
  await client.query("BEGIN");
  await t.skipq.enqueueTx(client, "noisy", { secret: "x".repeat(10_000) }, { queue: "loud" });
  await client.query("SELECT pg_sleep(0.05)");
  expect(received).toEqual([]);
  await client.query("COMMIT");
  client.release();
  const deadline = Date.now() + 5000;
  while (received.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
  expect(received).toEqual(["loud"]);
  await listener.end();
});

/** `{ a: { a: … { a: 1 } } }`, `depth` objects deep. */
function nested(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = { a: value };
  return value;
}

function nestedArray(depth: number): unknown {
  let value: unknown = 1;
  for (let i = 0; i < depth; i++) value = [value];
  return value;
}

describe("bad input throws a typed error and writes nothing", () => {
  const cases: Array<[string, () => Promise<unknown>, new (...args: never[]) => Error]> = [
    ["payload over the cap", () => t.skipq.enqueue("bad", { s: "x".repeat(1024 * 1024) }), PayloadTooLargeError],
    ["BigInt", () => t.skipq.enqueue("bad", { n: 1n }), PayloadNotJsonError],
    [
      "circular",
      () => {
        const a: Record<string, unknown> = {};
        a.self = a;
        return t.skipq.enqueue("bad", a);
      },
      PayloadNotJsonError,
    ],
    ["NaN", () => t.skipq.enqueue("bad", { n: Number.NaN }), PayloadNotJsonError],
    ["a function", () => t.skipq.enqueue("bad", { f: () => 1 }), PayloadNotJsonError],
    ["undefined field", () => t.skipq.enqueue("bad", { u: undefined }), PayloadNotJsonError],
    ["a Date", () => t.skipq.enqueue("bad", { d: new Date() }), PayloadNotJsonError],
    ["a NUL character", () => t.skipq.enqueue("bad", { s: "a\u0000b" }), PayloadNotJsonError],
    ["a lone surrogate", () => t.skipq.enqueue("bad", { s: "\uD800" }), PayloadNotJsonError],
    ["an SQL-looking kind", () => t.skipq.enqueue("'; DROP TABLE jobs;--", {}), ValidationError],
    ["an empty queue", () => t.skipq.enqueue("bad", {}, { queue: "" }), ValidationError],
    ["a queue with a newline", () => t.skipq.enqueue("bad", {}, { queue: "a\nb" }), ValidationError],
    ["a negative delay", () => t.skipq.enqueue("bad", {}, { delay: "-5s" }), ValidationError],
    ["a nonsense delay", () => t.skipq.enqueue("bad", {}, { delay: "5 parsecs" as Duration }), ValidationError],
    ["an empty delay", () => t.skipq.enqueue("bad", {}, { delay: "" as Duration }), ValidationError],
    ["a blank delay", () => t.skipq.enqueue("bad", {}, { delay: "   " }), ValidationError],
    ["maxAttempts 0", () => t.skipq.enqueue("bad", {}, { maxAttempts: 0 }), ValidationError],
    ["maxAttempts -1", () => t.skipq.enqueue("bad", {}, { maxAttempts: -1 }), ValidationError],
    ["maxAttempts 1e9", () => t.skipq.enqueue("bad", {}, { maxAttempts: 1e9 }), ValidationError],
    ["priority out of range", () => t.skipq.enqueue("bad", {}, { priority: 40_000 }), ValidationError],
    ["an invalid runAt", () => t.skipq.enqueue("bad", {}, { runAt: new Date("nope") }), ValidationError],
    ["runAt in year 9999", () => t.skipq.enqueue("bad", {}, { runAt: new Date("9999-01-01") }), ValidationError],
    ["runAt and delay together", () => t.skipq.enqueue("bad", {}, { runAt: new Date(), delay: 5 }), ValidationError],
    ["a payload nested 5,000 deep", () => t.skipq.enqueue("bad", nested(5000)), PayloadNotJsonError],
    ["an array nested 100,000 deep", () => t.skipq.enqueue("bad", nestedArray(100_000)), PayloadNotJsonError],
    [
      "a payload nested 5,000 deep in a bulk batch",
      () => t.skipq.enqueueMany([{ job: "bad", payload: nested(5000) }]),
      PayloadNotJsonError,
    ],
    [
      "an idempotency key with a lone surrogate",
      () => t.skipq.enqueue("bad", {}, { idempotencyKey: "order-\uD800" }),
      ValidationError,
    ],
    [
      "an idempotency key with a lone low surrogate",
      () => t.skipq.enqueue("bad", {}, { idempotencyKey: "\uDC00-order" }),
      ValidationError,
    ],
    [
      "a bulk idempotency key with a lone surrogate",
      () => t.skipq.enqueueMany([{ job: "bad", payload: {}, idempotencyKey: "order-\uD801" }]),
      ValidationError,
    ],
    [
      "a concurrency key with a lone surrogate",
      () => t.skipq.enqueue("bad", {}, { concurrencyKey: "tenant-\uDBFF" }),
      ValidationError,
    ],
    [
      "a bulk concurrency key with a lone surrogate",
      () => t.skipq.enqueueMany([{ job: "bad", payload: {}, concurrencyKey: "tenant-\uD800" }]),
      ValidationError,
    ],
    [
      "one bad item in a bulk batch",
      () =>
        t.skipq.enqueueMany([
          { job: "bad", payload: {} },
          { job: "bad", payload: { n: 1n } },
        ]),
      PayloadNotJsonError,
    ],
  ];
  test.each(cases)("%s", async (_label, call, type) => {
    const before = await count();
    const error = await call().catch((e: { code?: string }) => e);
    expect(error).toBeInstanceOf(type);
    expect((error as { code?: string }).code).toMatch(/^SKIPQ_/);
    expect(await count()).toBe(before);
  });
});

test("a payload exactly at the cap is accepted and round-trips byte-identical; one byte more is rejected", async () => {
  const skipq = new (await import("../../src/index.js")).Skipq({
    connectionString: DATABASE_URL,
    schema: t.schema,
    maxPayloadBytes: 1000,
  });
  const filler = (n: number) => ({ s: "é".repeat(n) });
  // {"s":"…"} is 8 bytes of JSON around the string; é is 2 bytes in UTF-8.
  const atCap = filler(496);
  expect(Buffer.byteLength(JSON.stringify(atCap))).toBe(1000);
  const { id } = await skipq.enqueue("cap", atCap);
  const { rows } = await t.db.query(`SELECT payload FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  expect(rows[0].payload).toEqual(atCap);
  const over = { s: `${"é".repeat(496)}x` };
  await expect(skipq.enqueue("cap", over)).rejects.toBeInstanceOf(PayloadTooLargeError);
  await skipq.close();
});

test("a payload nested 1,000 deep round-trips; one level deeper is refused by name", async () => {
  const { id } = await t.skipq.enqueue("deep", nested(1000));
  const { rows } = await t.db.query(`SELECT payload FROM "${t.schema}".jobs WHERE id = $1`, [id]);
  expect(rows[0].payload).toEqual(nested(1000));
  const error = await t.skipq.enqueue("deep", nested(1001)).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(PayloadNotJsonError);
  expect((error as Error).message).toMatch(/nested deeper than 1000 levels/);
});

test("idempotency keys that differ only in lone surrogates never collide: both are refused", async () => {
  const before = await count();
  for (const key of ["order-\uD800", "order-\uDBFF"]) {
    const error = await t.skipq.enqueue("surrogate", {}, { idempotencyKey: key }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(ValidationError);
    expect((error as Error).message).toMatch(/idempotencyKey .*lone UTF-16 surrogate/);
  }
  expect(await count()).toBe(before);
  // A well-formed pair (an emoji) is a valid key.
  expect((await t.skipq.enqueue("surrogate", {}, { idempotencyKey: "order-\uD83D\uDE00" })).created).toBe(true);
});

test("a job defined with a Standard Schema validator rejects an invalid payload at enqueue", async () => {
  const signup = defineJob("signup", { schema: z.object({ email: z.string().email() }) });
  await expect(t.skipq.enqueue(signup, { email: "not-an-email" })).rejects.toBeInstanceOf(PayloadInvalidError);
  const ok = await t.skipq.enqueue(signup, { email: "ada@example.com" });
  expect(ok.created).toBe(true);
});

test("a plain SQL insert is a supported enqueue path: every other column has a default", async () => {
  const { rows } = await t.db.query(
    `INSERT INTO "${t.schema}".jobs (kind, payload) VALUES ('from-sql', '{"x":1}') RETURNING status, queue, run_at <= now() AS due`,
  );
  expect(rows[0]).toEqual({ status: "pending", queue: "default", due: true });
});

test("the database refuses a kind outside the allowlist even from plain SQL", async () => {
  await expect(t.db.query(`INSERT INTO "${t.schema}".jobs (kind) VALUES ('bad kind')`)).rejects.toMatchObject({
    code: "23514",
  });
});

test("the database's name rules match the client's: 1 to 128 characters, first a letter or digit", async () => {
  const s = `"${t.schema}"`;
  const inserts = {
    kind: (name: string) => t.db.query(`INSERT INTO ${s}.jobs (kind) VALUES ($1)`, [name]),
    queue: (name: string) => t.db.query(`INSERT INTO ${s}.jobs (kind, queue) VALUES ('k', $1)`, [name]),
    topic: (name: string) => t.db.query(`INSERT INTO ${s}.outbox (topic, key, event) VALUES ($1, 'k', '{}')`, [name]),
    "queue setting": (name: string) => t.db.query(`INSERT INTO ${s}.queues (name) VALUES ($1)`, [name]),
  };
  const longest = `a${"b".repeat(127)}`;
  for (const [what, insert] of Object.entries(inserts)) {
    await expect(insert(longest), what).resolves.toBeDefined();
    for (const bad of [`${longest}c`, "", "-lead", "sp ace", "ünï"]) {
      await expect(insert(bad), `${what} ${JSON.stringify(bad)}`).rejects.toMatchObject({ code: "23514" });
    }
  }
  for (const name of [longest, "a.b:c-d_e", "9"]) expect(NAME_PATTERN.test(name)).toBe(true);
  for (const name of [`${longest}c`, "", "-lead", "sp ace", "ünï"]) expect(NAME_PATTERN.test(name)).toBe(false);
});

test("every enqueue path stores the concurrency key: single, shared singles, bulk with and without idempotency keys, transactional", async () => {
  const client = await t.db.connect();
  try {
    await client.query("BEGIN");
    const tx = await t.skipq.enqueueTx(client, "ck", {}, { queue: "ck", concurrencyKey: "tx" });
    await client.query("COMMIT");
    const [single, shared] = await Promise.all([
      t.skipq.enqueue("ck", {}, { queue: "ck", concurrencyKey: "single" }),
      t.skipq.enqueue("ck", {}, { queue: "ck", concurrencyKey: "shared" }),
    ]);
    const [keyless] = await t.skipq.enqueueMany([{ job: "ck", payload: {}, queue: "ck", concurrencyKey: "bulk" }]);
    const [keyed] = await t.skipq.enqueueMany([
      { job: "ck", payload: {}, queue: "ck", concurrencyKey: "bulk-keyed", idempotencyKey: "ck-1" },
    ]);
    const ids = [tx, single, shared, keyless, keyed].map((r) => r?.id);
    const { rows } = await t.db.query(
      `SELECT id, concurrency_key FROM "${t.schema}".all_jobs WHERE id = ANY($1::bigint[])`,
      [ids],
    );
    const byId = new Map(rows.map((r) => [r.id, r.concurrency_key]));
    expect(ids.map((id) => byId.get(id))).toEqual(["tx", "single", "shared", "bulk", "bulk-keyed"]);
  } finally {
    client.release();
  }
});
