/**
 * Type tests: the typed stores of the operator's areas take one object of
 * named parameters and return typed rows, so a positional list, a misspelt or
 * missing name, or a value of the wrong type is a compile error (checked by
 * `tsc` and vitest's typecheck mode; an unused @ts-expect-error fails it).
 */
import { describe, expectTypeOf, test } from "vitest";
import type { ListedJob } from "../../src/db/adminStore.js";
import type { AreaStores } from "../../src/db/areaStores.js";
import type { CronRow } from "../../src/db/cronStore.js";
import type { QueueLimitsRow } from "../../src/db/flowStore.js";
import type { JobRow } from "../../src/index.js";

declare const stores: AreaStores;

describe("named parameters", () => {
  test("a positional list, a wrong name or a missing one does not compile", () => {
    // @ts-expect-error positional values are gone
    void stores.admin.jobCancel("42");
    // @ts-expect-error jobId, not id
    void stores.admin.jobRetry({ id: "42" });
    // @ts-expect-error a fingerprint retry needs its queue (null for every queue)
    void stores.admin.jobRetryDeadFingerprint({ fingerprint: "0123456789abcdef" });
    // @ts-expect-error the limit is a number
    void stores.admin.deadByFingerprint({ queue: null, limit: "50" });
    // @ts-expect-error not a job status
    void stores.admin.jobList({ status: "done", queue: null, kind: null, before: null, limit: 1, errorLike: null });
    void stores.flow.queueSetLimits({
      queue: "q",
      concurrency: null,
      keyConcurrency: null,
      rateLimit: null,
      // @ts-expect-error rateWindowMs, not rateWindow
      rateWindow: null,
      ratePerKey: false,
      fairness: null,
    });
  });
});

describe("typed rows", () => {
  test("each call returns its statement's row shape", () => {
    expectTypeOf(stores.admin.jobGet).returns.resolves.toEqualTypeOf<JobRow | undefined>();
    expectTypeOf(stores.admin.jobSearch).returns.resolves.toEqualTypeOf<ListedJob[]>();
    expectTypeOf(stores.admin.jobRetry).returns.resolves.toEqualTypeOf<boolean>();
    expectTypeOf(stores.flow.queueGetLimits).returns.resolves.toEqualTypeOf<QueueLimitsRow[]>();
    expectTypeOf(stores.cron.cronList).returns.resolves.toEqualTypeOf<CronRow[]>();
    expectTypeOf(stores.cron.dbNow).returns.resolves.toEqualTypeOf<Date>();
    expectTypeOf(stores.ops.throughputLastHour).returns.resolves.toEqualTypeOf<
      Array<{ minutes_ago: number; n: number }>
    >();
  });
});
