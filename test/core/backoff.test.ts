/** Backoff: monotone before jitter, capped, jitter within bounds, finite for huge attempt numbers. */
import fc from "fast-check";
import { expect, test } from "vitest";
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
