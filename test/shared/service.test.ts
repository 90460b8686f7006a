/**
 * The background-service shape: throttled failure logging (the first failure,
 * every 20th, one recovery line), backoff through retryWait, onFailed, and
 * stop. No database: a pass is a function that fails or succeeds on demand.
 */
import { expect, test } from "vitest";
import type { Logger } from "../../src/core/logger.js";
import { FailureLog } from "../../src/shared/failureLog.js";
import { Service } from "../../src/shared/service.js";
import { until } from "../until.js";

function recordingLogger() {
  const lines: Array<{ level: string; obj: Record<string, unknown>; msg: string | undefined }> = [];
  const logger: Logger = {
    debug: (obj, msg) => lines.push({ level: "debug", obj, msg }),
    info: (obj, msg) => lines.push({ level: "info", obj, msg }),
    warn: (obj, msg) => lines.push({ level: "warn", obj, msg }),
    error: (obj, msg) => lines.push({ level: "error", obj, msg }),
  };
  return { lines, logger };
}

test("a run of 45 failed passes logs the 1st, 20th and 40th, then one recovery line when a pass succeeds", async () => {
  const { lines, logger } = recordingLogger();
  let passes = 0;
  const failed: unknown[] = [];
  const service = new Service({
    name: "probe",
    intervalMs: 60_000,
    logger,
    run: async () => {
      passes++;
      if (passes <= 45) throw new Error(`down ${passes}`);
      return passes;
    },
    // Failed passes retry at once; a successful one waits the (long) interval, so the loop stops there.
    retryWait: () => 0,
    onFailed: (error) => failed.push(error),
  });
  service.start();
  try {
    await until("the pass after 45 failures succeeded", () => passes >= 46);
    await until("its recovery line", () => lines.some((l) => l.level === "info"));
  } finally {
    await service.stop();
  }
  expect(lines.map((l) => [l.level, l.msg, l.obj.failures])).toEqual([
    ["warn", "skipq: probe pass failed; retrying with backoff", 1],
    ["warn", "skipq: probe pass failed; retrying with backoff", 20],
    ["warn", "skipq: probe pass failed; retrying with backoff", 40],
    ["info", "skipq: probe pass succeeded again after 45 failed", 45],
  ]);
  expect(lines[1]?.obj.err).toMatchObject({ message: "down 20" });
  expect(failed).toHaveLength(45);
});

test("a success that followed no failure logs nothing, and a new run of failures is logged from its first again", () => {
  const { lines, logger } = recordingLogger();
  const log = new FailureLog(logger, "sink", "will retry");
  log.succeeded();
  expect(lines).toEqual([]);
  log.failed(new Error("a"));
  log.failed(new Error("b"));
  log.succeeded();
  log.failed(new Error("c"), { sink: "x" }, "sink x failed");
  expect(lines.map((l) => [l.level, l.msg])).toEqual([
    ["warn", "sink failed; will retry"],
    ["info", "sink succeeded again after 2 failed"],
    ["warn", "sink x failed"],
  ]);
  expect(lines[2]?.obj).toMatchObject({ failures: 1, sink: "x" });
  expect(log.failures).toBe(1);
});

test("the wait after a failed pass is retryWait's, given the count of failures in a row", async () => {
  const { logger } = recordingLogger();
  const asked: number[] = [];
  let passes = 0;
  const service = new Service({
    name: "probe",
    intervalMs: 60_000,
    logger,
    run: async () => {
      passes++;
      if (passes <= 3) throw new Error("down");
    },
    retryWait: (failures) => {
      asked.push(failures);
      return 0;
    },
  });
  service.start();
  try {
    await until("the fourth pass", () => passes >= 4);
  } finally {
    await service.stop();
  }
  expect(asked).toEqual([1, 2, 3]);
});

test("a failing runOnce() throws to its caller and is not counted as a background failure", async () => {
  const { lines, logger } = recordingLogger();
  const failed: unknown[] = [];
  const service = new Service({
    name: "probe",
    intervalMs: 60_000,
    logger,
    run: async () => {
      throw new Error("down");
    },
    onFailed: (error) => failed.push(error),
  });
  await expect(service.runOnce()).rejects.toThrow("down");
  expect(failed).toEqual([]);
  expect(lines).toEqual([]);
  await service.stop();
});
