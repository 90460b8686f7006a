/**
 * Type tests: the typed stores (the operator's areas, the cron pass, sagas,
 * history, the outbox, batches, the waiter, the dashboard) take one object
 * of named parameters and return typed rows, so a positional list, a
 * misspelt or missing name, or a value of the wrong type is a compile error
 * (checked by `tsc` and vitest's typecheck mode; an unused @ts-expect-error
 * fails it).
 */
import { describe, expectTypeOf, test } from "vitest";
import type { ListedJob } from "../../src/db/adminStore.js";
import type { AreaStores } from "../../src/db/areaStores.js";
import type { CronLockedRow, CronRow } from "../../src/db/cronStore.js";
import type { AuditRow, DashboardStore, JobStateCountsRow, OutboxKeyRow } from "../../src/db/dashboardStore.js";
import type { QueueLimitsRow } from "../../src/db/flowStore.js";
import type { HistoryDroppedRow, HistoryStore } from "../../src/db/historyStore.js";
import type { JobFeatureStore, JobWaitMarkRow, JobWaitRow } from "../../src/db/jobFeatureStore.js";
import type { OutboxBacklogRow, OutboxStore } from "../../src/db/outboxStore.js";
import type { Queryable } from "../../src/db/queryable.js";
import type { SagaRow, SagaStore, SagaStuckRow } from "../../src/db/sagaStore.js";
import type { BatchStatusRow } from "../../src/db/workflowStore.js";
import type { JobRow } from "../../src/index.js";

declare const stores: AreaStores;
declare const sagas: SagaStore;
declare const tx: Queryable;
declare const history: HistoryStore;
declare const outbox: OutboxStore;
declare const features: JobFeatureStore;
declare const dashboard: DashboardStore;

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
    // @ts-expect-error lastTick, not tick
    void stores.cron.cronAdvance({ name: "a", tick: new Date(), lastJobId: null }, tx);
    // @ts-expect-error a pass's lock runs in its transaction
    void stores.cron.cronLock({ names: ["a"], now: null });
    // @ts-expect-error the schedules' names are a list
    void stores.cron.cronLock({ names: "a", now: null }, tx);
    // @ts-expect-error positional values are gone
    void sagas.sagaSetJob("5", "40", tx);
    // @ts-expect-error not a history table
    void history.historyDrop({ parent: "job_history", olderThanMs: 0 });
    // @ts-expect-error olderThanMs, not olderThan
    void history.keysExpire({ olderThan: 0, limit: 10 });
    // @ts-expect-error a publish runs in the caller's transaction
    void outbox.outboxInsert({ topic: "t", key: "k", event: "{}", headers: null });
    // @ts-expect-error the lock's namespace is the store's, not the caller's
    void outbox.outboxInsert({ topic: "t", key: "k", event: "{}", headers: null, lockKey: "x" }, tx);
    // @ts-expect-error the limit is a number
    void stores.workflows.edgesPrune({ olderThanMs: 0, limit: "10" });
    // @ts-expect-error positional values are gone
    void features.jobWaitMark("5");
    // @ts-expect-error a sign-in names the session it replaces (null: none)
    void dashboard.sessionCreate({ id: "h", principal: "token", ttlMs: 1, idleMs: 1 });
    void dashboard.auditInsert({
      principal: "p",
      role: "admin",
      action: "a",
      target: null,
      detail: null,
      client: null,
      // @ts-expect-error userAgent, not user_agent
      user_agent: null,
    });
    // @ts-expect-error the ids are a list
    void features.jobWaitRead({ ids: "5" });
    // @ts-expect-error a batch's row is written in the transaction that enqueued its jobs
    void stores.workflows.batchInsert({ jobIds: ["1"], onComplete: null, onSuccess: null });
    // @ts-expect-error jobIds, not jobs
    void stores.workflows.batchInsert({ jobs: ["1"], onComplete: null, onSuccess: null }, tx);
    void sagas.sagaTransition(
      {
        sagaId: "5",
        // @ts-expect-error not a saga status
        fromStatus: "done",
        fromStep: 0,
        patchStep: 0,
        patch: "{}",
        toStatus: "completed",
        toStep: 0,
        toJobId: null,
        error: null,
        guardJobId: null,
      },
      tx,
    );
    void sagas.sagaTransition(
      // @ts-expect-error a transition names its guard (null: none)
      {
        sagaId: "5",
        fromStatus: "running",
        fromStep: 0,
        patchStep: 0,
        patch: "{}",
        toStatus: "completed",
        toStep: 0,
        toJobId: null,
        error: null,
      },
      tx,
    );
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
    expectTypeOf(stores.cron.cronLock).returns.resolves.toEqualTypeOf<CronLockedRow[]>();
    expectTypeOf(sagas.sagaInsert).returns.resolves.toEqualTypeOf<string>();
    expectTypeOf(sagas.sagaGet).returns.resolves.toEqualTypeOf<SagaRow | undefined>();
    expectTypeOf(sagas.sagaTransition).returns.resolves.toEqualTypeOf<boolean>();
    expectTypeOf(sagas.sagaStuck).returns.resolves.toEqualTypeOf<SagaStuckRow[]>();
    expectTypeOf(history.historyDrop).returns.resolves.toEqualTypeOf<HistoryDroppedRow[]>();
    expectTypeOf(history.historyPruneRows).returns.resolves.toEqualTypeOf<number>();
    expectTypeOf(history.historyMoved).returns.resolves.toEqualTypeOf<boolean>();
    expectTypeOf(outbox.outboxInsert).returns.resolves.toEqualTypeOf<string>();
    expectTypeOf(outbox.outboxBacklog).returns.resolves.toEqualTypeOf<OutboxBacklogRow>();
    expectTypeOf(dashboard.sessionTouch).returns.resolves.toEqualTypeOf<string | undefined>();
    expectTypeOf(dashboard.auditList).returns.resolves.toEqualTypeOf<AuditRow[]>();
    expectTypeOf(dashboard.outboxKeys).returns.resolves.toEqualTypeOf<OutboxKeyRow[]>();
    expectTypeOf(dashboard.outboxRetryKey).returns.resolves.toEqualTypeOf<number>();
    expectTypeOf(dashboard.jobStateCounts).returns.resolves.toEqualTypeOf<JobStateCountsRow>();
    expectTypeOf(features.jobWaitMark).returns.resolves.toEqualTypeOf<JobWaitMarkRow | undefined>();
    expectTypeOf(features.jobWaitRead).returns.resolves.toEqualTypeOf<JobWaitRow[]>();
    expectTypeOf(features.settingsKeepCompletedRead).returns.resolves.toEqualTypeOf<boolean | undefined>();
    expectTypeOf(stores.workflows.batchInsert).returns.resolves.toEqualTypeOf<string>();
    expectTypeOf(stores.workflows.batchStatus).returns.resolves.toEqualTypeOf<BatchStatusRow | undefined>();
    expectTypeOf(stores.stats.rollup).returns.resolves.toEqualTypeOf<{
      closed: number;
      sampled: number;
      deleted: number;
    }>();
    expectTypeOf(stores.ops.throughputLastHour).returns.resolves.toEqualTypeOf<
      Array<{ minutes_ago: number; n: number }>
    >();
  });
});
