/**
 * The attempt logger's bounds: a line is cut to MAX_LINE_CHARS before its
 * strings are redacted, so a huge string costs the event loop what a short
 * one does, and a secret never survives the cut (none straddles it).
 */
import { expect, test } from "vitest";
import type { Logger } from "../../src/core/logger.js";
import { defaultErrorRedactor } from "../../src/index.js";
import { attemptLogger, MAX_LINE_CHARS } from "../../src/worker/attemptLog.js";
import type { AttemptLines, Job } from "../../src/worker/types.js";

const quiet: Logger = { debug() {}, info() {}, warn() {}, error() {} };

function job(payload: unknown): Job {
  return {
    id: "1",
    queue: "q",
    kind: "k",
    payload,
    priority: 0,
    attempt: 1,
    maxAttempts: 3,
    runAt: new Date(),
    createdAt: new Date(),
    headers: {},
    lease: "l",
    concurrencyKey: null,
  };
}

function logger(payload: unknown = {}) {
  const record: AttemptLines = { startedAt: new Date().toISOString(), lines: [], dropped: 0 };
  return { record, log: attemptLogger(quiet, job(payload), record, 100, defaultErrorRedactor) };
}

test("ctx.log with a 112 KB string from a payload holds the event loop for at most 100 ms (it took 6-12 s)", () => {
  const huge = "token".repeat(23_000);
  const { record, log } = logger({ csv: huge });
  const start = performance.now();
  log.info({ row: huge }, huge);
  log.warn({}, `parse failed near ${huge}`);
  const held = performance.now() - start;
  expect(held).toBeLessThan(100);
  expect(record.lines).toHaveLength(2);
  for (const line of record.lines) {
    expect(JSON.stringify(line).length).toBeLessThanOrEqual(MAX_LINE_CHARS);
    expect(line.truncated).toBe(true);
  }
});

test("a payload secret that straddles the cut is redacted whole: none of it is kept", () => {
  const secret = "S3CRET-0123456789abcdefghij";
  for (let offset = 1; offset < secret.length; offset++) {
    const { record, log } = logger({ password: secret });
    // The message is cut at MAX_LINE_CHARS / 2 characters: put the secret across that point.
    const msg = `${"a".repeat(MAX_LINE_CHARS / 2 - offset)}${secret}${"b".repeat(MAX_LINE_CHARS * 2)}`;
    log.info({}, msg);
    const kept = String(record.lines[0]?.msg);
    expect(kept, `offset ${offset}`).not.toContain(secret.slice(0, 4));
  }
});

test("a bearer token and a key=value pair across the cut are redacted whole", () => {
  for (const [prefix, value] of [
    ["Authorization: Bearer ", "eyJhbGciOiJIUzI1NiJ9abcdefgh"],
    ["password=", "hunter22hunter22hunter22"],
  ] as const) {
    for (let offset = 1; offset < value.length; offset += 3) {
      const { record, log } = logger();
      const msg = `${"a".repeat(MAX_LINE_CHARS / 2 - prefix.length - offset)}${prefix}${value}${" z".repeat(MAX_LINE_CHARS)}`;
      log.info({}, msg);
      const kept = String(record.lines[0]?.msg);
      expect(kept, `${prefix} offset ${offset}`).not.toContain(value.slice(0, 4));
    }
  }
});
