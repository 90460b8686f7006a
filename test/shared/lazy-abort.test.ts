import { expect, test } from "vitest";
import { LazyAbortController } from "../../src/shared/lazyAbort.js";

test("a signal read after the abort is already aborted, with the first reason", () => {
  const lazy = new LazyAbortController();
  expect(lazy.aborted).toBe(false);
  lazy.abort("lease lost");
  lazy.abort("second reason");
  expect(lazy.aborted).toBe(true);
  expect(lazy.signal.aborted).toBe(true);
  expect(lazy.signal.reason).toBe("lease lost");
});

test("a signal read before the abort fires its abort event once", () => {
  const lazy = new LazyAbortController();
  const signal = lazy.signal;
  const reasons: unknown[] = [];
  signal.addEventListener("abort", () => reasons.push(signal.reason));
  expect(signal.aborted).toBe(false);
  lazy.abort("shutdown");
  lazy.abort("again");
  expect(reasons).toEqual(["shutdown"]);
  expect(lazy.signal).toBe(signal);
  expect(lazy.reason).toBe("shutdown");
});
