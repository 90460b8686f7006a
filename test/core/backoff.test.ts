/** Backoff: monotone before jitter, capped, jitter within bounds, finite for huge attempt numbers. */
import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { retryWaitMs } from "../../src/core/backoff.js";
import { backoffBaseMs, backoffMs, defaultBackoff } from "../../src/index.js";

test("backoff before jitter is monotone non-decreasing and capped", () => {
  let previous = 0;
  for (let attempt = 1; attempt <= 10_000; attempt++) {
    const delay = backoffBaseMs(attempt);
    expect(delay).toBeGreaterThanOrEqual(previous);
    expect(delay).toBeLessThanOrEqual(defaultBackoff.maxMs);
    previous = delay;
  }
  expect(backoffBaseMs(1)).toBe(defaultBackoff.baseMs);
});

test("backoff with jitter is finite, positive and within ±jitter of the base for any attempt", () => {
  fc.assert(
    fc.property(
      fc.integer({ min: 1, max: 10_000_000 }),
      fc.double({ min: 0, max: 1, maxExcluded: true, noNaN: true }),
      (attempt, r) => {
        const delay = backoffMs(attempt, defaultBackoff, () => r);
        const base = backoffBaseMs(attempt);
        expect(Number.isFinite(delay)).toBe(true);
        expect(delay).toBeGreaterThan(0);
        expect(delay).toBeGreaterThanOrEqual(Math.floor(base * (1 - defaultBackoff.jitter)));
        expect(delay).toBeLessThanOrEqual(Math.ceil(base * (1 + defaultBackoff.jitter)));
      },
    ),
  );
});

describe("retryWaitMs: the one wait of every loop whose pass failed", () => {
  test("doubles from the first wait per failure, up to the cap, whatever the count", () => {
    expect([1, 2, 3, 4, 5].map((f) => retryWaitMs(f, 50, 2000, false))).toEqual([50, 100, 200, 400, 800]);
    expect(retryWaitMs(7, 50, 2000, false)).toBe(2000);
    expect(retryWaitMs(10_000, 50, 2000, false)).toBe(2000);
    expect(retryWaitMs(0, 50, 2000, false)).toBe(50);
  });

  test("jitter scales each wait into [half, whole), so processes that failed together spread out", () => {
    const waits = Array.from({ length: 500 }, () => retryWaitMs(3, 100, 5000));
    expect(Math.min(...waits)).toBeGreaterThanOrEqual(200);
    expect(Math.max(...waits)).toBeLessThan(400);
    expect(new Set(waits.map((w) => Math.floor(w / 20))).size).toBeGreaterThan(5);
  });
});
