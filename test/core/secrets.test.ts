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
