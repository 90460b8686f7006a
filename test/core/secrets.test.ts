/**
 * Error text redaction: a job's own secrets echoed into an error, secret-looking
 * pairs and bearer tokens never reach last_error; everything else stays.
 */
import { expect, test } from "vitest";
import { defaultErrorRedactor } from "../../src/index.js";
import { type TestQueue, testQueue } from "../helpers.js";

test("the default redactor hides the job's secrets, secret pairs and bearer tokens, and nothing else", () => {
  const job = {
    payload: { user: "ada", apiKey: "sk-live-123456", nested: [{ deep: { password: "hunter22" } }], note: "sk-live" },
    headers: { authorization: "Bearer abcdefghijk" },
  };
  const text = [
    "upstream refused api key sk-live-123456 for ada",
    "login failed with hunter22",
    "GET /x?token=tok_9999&page=2 failed",
    'body {"password": "p4ssw0rd!", "count": 3}',
    "sent Authorization: Bearer eyJhbGciOi.payload.sig",
  ].join("\n");
  const out = defaultErrorRedactor(text, job);
  expect(out).not.toMatch(/sk-live-123456|hunter22|tok_9999|p4ssw0rd|eyJhbGciOi/);
  expect(out).toContain("for ada");
  expect(out).toContain("page=2");
  expect(out).toContain('"count": 3');
  expect(out).toContain("api key [redacted] for ada");
});

test("a worker stores a failing job's error with the job's secrets redacted; redactError: false stores it as is", async () => {
  const t: TestQueue = await testQueue("secrets");
  try {
    const fail = (p: unknown) => {
      throw new Error(`refused key ${(p as { apiKey: string }).apiKey}`);
    };
    for (const [queue, options] of [
      ["redacted", {}],
      ["raw", { redactError: false as const }],
    ] as const) {
      const { id } = await t.skipq.enqueue("leak", { apiKey: "sk-live-777777" }, { queue, maxAttempts: 1 });
      const w = t.skipq
        .worker({ queues: [queue], maintenance: false, listen: false, ...options })
        .register("leak", fail);
      await w.runOnce();
      await w.stop();
      const { rows } = await t.db.query(`SELECT last_error FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
      expect(rows[0].last_error.includes("sk-live-777777")).toBe(queue === "raw");
    }
  } finally {
    await t.cleanup();
  }
});

/**
 * How long one synchronous call holds the event loop, in ms: the fastest of three runs (noise only ever
 * adds), stopping after a run ten times over `limit` (a regression need not be timed three times).
 */
function blocks(call: () => unknown, limit: number): number {
  let fastest = Number.POSITIVE_INFINITY;
  for (let i = 0; i < 3 && fastest >= limit; i++) {
    const start = performance.now();
    call();
    const took = performance.now() - start;
    fastest = Math.min(fastest, took);
    if (took > 10 * limit) break;
  }
  return fastest;
}

/** Texts that made the key/value pattern backtrack over the rest of the input at every key word. */
const ADVERSARIAL = ["token", "secret_", "api-key", "password ", "bearer ", "a=", "x", "tok en=", '"password":'];
const repeated = (unit: string, chars: number) => unit.repeat(Math.ceil(chars / unit.length)).slice(0, chars);

test("redacting 112 KB of adversarial text blocks the event loop for at most 250 ms (the quadratic pattern took 6-20 s)", () => {
  const job = { payload: { apiKey: "sk-live-123456" }, headers: {} };
  for (const unit of ADVERSARIAL) {
    const text = repeated(unit, 112 * 1024);
    expect(
      blocks(() => defaultErrorRedactor(text, job), 250),
      unit,
    ).toBeLessThan(250);
  }
});

test("a key word inside a longer key, a pair after a pair and a pwd key are still redacted", () => {
  const out = defaultErrorRedactor("x_api_key=abc123 foo=password=hunter22 pwd=p4ss my_secretXYZ=zz", {
    payload: {},
    headers: {},
  });
  expect(out).not.toMatch(/abc123|hunter22|p4ss|=zz/);
  expect(out).toContain("x_api_key=[redacted]");
});
