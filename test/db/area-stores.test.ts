/**
 * The typed stores (the operator's areas of src/db/areaStores.ts, and the
 * cron pass's, sagas', retention's, the outbox's, batches', the waiter's and
 * the dashboard's) put each named
 * parameter at the `$n` its statement's SQL compares it with, read off the
 * statement's text — so a swapped pair inside a store fails here, not only
 * as a wrong result somewhere downstream. No database: a pool that records
 * what it is sent (the integration tests run the same calls for real).
 */
import type pg from "pg";
import { expect, test } from "vitest";
import type { JobFilterParams } from "../../src/db/adminStore.js";
import { AreaStores } from "../../src/db/areaStores.js";
import { DashboardStore } from "../../src/db/dashboardStore.js";
import { HistoryStore } from "../../src/db/historyStore.js";
import { JobFeatureStore } from "../../src/db/jobFeatureStore.js";
import { OutboxStore } from "../../src/db/outboxStore.js";
import type { Queryable } from "../../src/db/queryable.js";
import { SagaStore } from "../../src/db/sagaStore.js";
import { Store } from "../../src/db/store.js";

interface Sent {
  text: string;
  values: unknown[];
}

/** Stores over a pool that records every query and answers with `rows`. */
function recording(rows: unknown[] = [{}]): { stores: AreaStores; store: Store; sent: Sent[] } {
  const sent: Sent[] = [];
  const pool = {
    query: async (config: { text: string; values?: unknown[] }) => {
      sent.push({ text: config.text, values: config.values ?? [] });
      return { rows, rowCount: rows.length };
    },
  };
  const store = new Store("area_stores", pool as unknown as pg.Pool);
  return { stores: new AreaStores(store), store, sent };
}

/** The area stores over `store`. */
function stores(store: Store): AreaStores {
  return new AreaStores(store);
}

/** A transaction that records what is sent on it, apart from the pool's. */
function recordingTx(rows: unknown[] = [{}]): { tx: Queryable; sent: Sent[] } {
  const sent: Sent[] = [];
  const tx: Queryable = {
    query: async (config) => {
      sent.push({ text: config.text, values: config.values ?? [] });
      return { rows, rowCount: rows.length };
    },
  };
  return { tx, sent };
}

/** An INSERT's values by the column each one sets: INSERT INTO t (c1, …) VALUES ($i, …). */
function byInsertColumn(sent: Sent): Record<string, unknown> {
  const list = (pattern: RegExp) =>
    pattern
      .exec(sent.text)?.[1]
      ?.split(",")
      .map((c) => c.trim()) ?? [];
  const columns = list(/INSERT INTO \S+ \(([^)]+)\)/);
  const params = list(/VALUES \(([^)]+)\)/);
  return Object.fromEntries(columns.map((c, i) => [c, sent.values[Number(/\$(\d+)/.exec(params[i] ?? "")?.[1]) - 1]]));
}

/** The value sent as `$n` where `pattern` (with one `(\d+)` group for n) first matches the statement's text. */
function at(sent: Sent, pattern: RegExp): unknown {
  const match = pattern.exec(sent.text);
  if (!match?.[1]) throw new Error(`${pattern} is not in the statement`);
  return sent.values[Number(match[1]) - 1];
}

/** A filter whose every field is distinct, so each can be found at its `$n`. */
const FILTER: JobFilterParams = {
  status: "dead",
  queue: "q",
  kind: "k",
  ids: ["1", "2"],
  errorLike: "%boom%",
  createdFrom: new Date("2026-01-01T00:00:00Z"),
  createdTo: new Date("2026-02-01T00:00:00Z"),
  payloadContains: '{"a":1}',
  payloadPathExists: '$."a"',
};

/** Where jobFilter (sql/admin.ts) compares each field, over alias a. */
const FILTER_AT: Record<keyof JobFilterParams, RegExp> = {
  status: /a\.status = \$(\d+)/,
  queue: /a\.queue = \$(\d+)/,
  kind: /a\.kind = \$(\d+)/,
  ids: /a\.id = ANY\(\$(\d+)\)/,
  errorLike: /a\.last_error ILIKE \$(\d+)/,
  createdFrom: /a\.created_at >= \$(\d+)/,
  createdTo: /a\.created_at < \$(\d+)/,
  payloadContains: /a\.payload @> \$(\d+)/,
  payloadPathExists: /jsonb_path_exists\(a\.payload, \$(\d+)\)/,
};

function expectFilterAt(sent: Sent): void {
  for (const [field, pattern] of Object.entries(FILTER_AT))
    expect(at(sent, pattern), field).toEqual(FILTER[field as keyof JobFilterParams]);
}

test("the explorer's filter fields, page and limit are each sent as the $n their SQL compares with", async () => {
  const { stores, sent } = recording();
  await stores.admin.jobSearch({ filter: FILTER, before: "99", limit: 25 });
  await stores.admin.jobBulkCount({ filter: FILTER });
  await stores.admin.jobBulkRetry({ filter: FILTER });
  await stores.admin.jobBulkPriority({ filter: FILTER, priority: 7 });
  for (const s of sent) expectFilterAt(s);
  const [search, , , priority] = sent as [Sent, Sent, Sent, Sent];
  expect(at(search, /a\.id < \$(\d+)/)).toBe("99");
  expect(at(search, /LIMIT \$(\d+)/)).toBe(25);
  expect(at(priority, /SET priority = \$(\d+)/)).toBe(7);
});

test("bulk cancel, delete and run-now send the filter and the schema's channels at their $n", async () => {
  const { stores, sent } = recording([{ id: "1", live: true, n: 3 }]);
  await stores.admin.jobBulkCancel({ filter: FILTER });
  await stores.admin.jobBulkDelete({ filter: FILTER });
  await stores.admin.jobBulkRunNow({ filter: FILTER });
  for (const s of sent) expectFilterAt(s);
  const [cancel, del, runNow] = sent as [Sent, Sent, Sent];
  expect(at(cancel, /pg_notify\(\$(\d+), '!cancel:'/)).toBe("skipq:area_stores");
  expect(at(del, /pg_notify\(\$(\d+), '!deleted:'/)).toBe("skipq:area_stores:done");
  expect(at(runNow, /pg_notify\(\$(\d+), q\)/)).toBe("skipq:area_stores");
});

test("the job list sends each option at the $n its SQL compares with", async () => {
  const { stores, sent } = recording();
  await stores.admin.jobList({ status: "pending", queue: "q", kind: "k", before: "5", limit: 10, errorLike: "%x%" });
  const [list] = sent as [Sent];
  expect(at(list, /status = \$(\d+)\)/)).toBe("pending");
  expect(at(list, /queue = \$(\d+)\)/)).toBe("q");
  expect(at(list, /kind = \$(\d+)\)/)).toBe("k");
  expect(at(list, /id < \$(\d+)\)/)).toBe("5");
  expect(at(list, /LIMIT \$(\d+)/)).toBe(10);
  expect(at(list, /last_error ILIKE \$(\d+)\)/)).toBe("%x%");
});

test("a cancel, a fingerprint retry and the dead groups send their values at their $n", async () => {
  const { stores, sent } = recording();
  await stores.admin.jobCancel({ jobId: "42" });
  await stores.admin.jobRetryDeadFingerprint({ fingerprint: "0123456789abcdef", queue: "q" });
  await stores.admin.deadByFingerprint({ queue: "q", limit: 9 });
  const [cancel, retry, dead] = sent as [Sent, Sent, Sent];
  expect(at(cancel, /WHERE id = \$(\d+)/)).toBe("42");
  expect(at(cancel, /pg_notify\(\$(\d+)/)).toBe("skipq:area_stores");
  expect(at(retry, /h\.error_fingerprint = \$(\d+)/)).toBe("0123456789abcdef");
  expect(at(retry, /h\.queue = \$(\d+)\)/)).toBe("q");
  expect(at(dead, /queue = \$(\d+)\)/)).toBe("q");
  expect(at(dead, /LIMIT \$(\d+)/)).toBe(9);
});

test("a queue's limits are sent as the $n of the column each one sets, the channel at pg_notify's", async () => {
  const { stores, sent } = recording();
  await stores.flow.queueSetLimits({
    queue: "q",
    concurrency: 1,
    keyConcurrency: 2,
    rateLimit: 3,
    rateWindowMs: 4000,
    ratePerKey: true,
    fairness: { weights: { a: 2 } },
  });
  const [set] = sent as [Sent];
  expect(byInsertColumn(set)).toEqual({
    name: "q",
    concurrency_limit: 1,
    key_concurrency_limit: 2,
    rate_limit: 3,
    rate_window_ms: 4000,
    rate_per_key: true,
    fairness: '{"weights":{"a":2}}',
  });
  expect(at(set, /pg_notify\(\$(\d+)/)).toBe("skipq:area_stores");
});

test("a key resume sends '' for the whole queue, and the flow reads their queue", async () => {
  const { stores, sent } = recording();
  await stores.flow.queueKeyResume({ queue: "q", key: null });
  await stores.flow.queueKeyResume({ queue: "q", key: "acme" });
  await stores.flow.queueGetLimits({ queue: "q" });
  await stores.flow.queueKeysPaused({ queue: null });
  const [whole, acme, limits, paused] = sent as [Sent, Sent, Sent, Sent];
  expect([at(whole, /queue = \$(\d+)/), at(whole, /key = \$(\d+)/)]).toEqual(["q", ""]);
  expect([at(acme, /queue = \$(\d+)/), at(acme, /key = \$(\d+)/)]).toEqual(["q", "acme"]);
  expect(at(limits, /name = \$(\d+)\)/)).toBe("q");
  expect(at(paused, /queue = \$(\d+)\)/)).toBeNull();
});

test("series, throughput, the workflow graph, replica state and the health reads send their values at their $n", async () => {
  const { stores, sent } = recording();
  await stores.stats.series({ queue: "q", stepSeconds: 60, spanSeconds: 3600 });
  await stores.ops.throughputLastHour({ queue: "q" });
  await stores.workflows.jobFlow({ jobId: "7", limit: 3 });
  await stores.replicas.replicaState({ primaryLsn: "0/16B3748" });
  await stores.ops.unhandledKinds({ runnableForMs: 60_000 });
  await stores.ops.jobsTableTuples();
  await stores.ops.claimIndexCounters();
  const [series, throughput, flow, replica, unhandled, tuples, counters] = sent as [
    Sent,
    Sent,
    Sent,
    Sent,
    Sent,
    Sent,
    Sent,
  ];
  expect(at(series, /queue = \$(\d+)\)/)).toBe("q");
  expect(at(series, /date_bin\(\$(\d+)/)).toBe(60);
  expect(at(series, /now\(\) - \$(\d+)/)).toBe(3600);
  expect(at(throughput, /queue = \$(\d+)\)/)).toBe("q");
  expect(at(flow, /child_id = \$(\d+)/)).toBe("7");
  expect(at(flow, /LIMIT \$(\d+)/)).toBe(3);
  expect(at(replica, /\$(\d+)::pg_lsn/)).toBe("0/16B3748");
  expect(at(unhandled, /now\(\) - \$(\d+)/)).toBe(60_000);
  expect(at(tuples, /schemaname = \$(\d+)/)).toBe("area_stores");
  expect(at(counters, /schemaname = \$(\d+)/)).toBe("area_stores");
});

test("the scheduler's declarations are sent as the arrays of the columns they set, its now at COALESCE's $n", async () => {
  const { stores, sent } = recording();
  await stores.cron.cronRegister({
    schedules: [
      { name: "n1", expression: "* * * * *", timezone: "Europe/Paris", queue: "q1", kind: "k1" },
      { name: "n2", expression: "0 * * * *", timezone: "UTC", queue: "q2", kind: "k2" },
    ],
    now: "2026-01-01T00:00:00.000Z",
  });
  const [register] = sent as [Sent];
  // INSERT INTO t (columns) SELECT aliases … FROM unnest($a::text[], …) AS d(aliases): column ← alias ← $a.
  const list = (pattern: RegExp) =>
    pattern
      .exec(register.text)?.[1]
      ?.split(",")
      .map((c) => c.trim()) ?? [];
  const columns = list(/INSERT INTO \S+ \(([^)]+)\)/);
  const selected = list(/SELECT ([^\n]+)\n/);
  const args = list(/unnest\(([^)]+)\) AS d/);
  const aliases = list(/AS d\(([^)]+)\)/);
  const byColumn = Object.fromEntries(
    columns.slice(0, 5).map((c, i) => {
      const arg = args[aliases.indexOf(selected[i] ?? "")] ?? "";
      return [c, register.values[Number(/\$(\d+)/.exec(arg)?.[1]) - 1]];
    }),
  );
  expect(byColumn).toEqual({
    name: ["n1", "n2"],
    expression: ["* * * * *", "0 * * * *"],
    timezone: ["Europe/Paris", "UTC"],
    queue: ["q1", "q2"],
    kind: ["k1", "k2"],
  });
  expect(at(register, /COALESCE\(\$(\d+)::timestamptz, now\(\)\)/)).toBe("2026-01-01T00:00:00.000Z");
});

test("a cron pass's bound, lock, advance, skip and run done send their values at their $n, on the pass's transaction", async () => {
  const { stores, sent: onPool } = recording();
  const { tx, sent } = recordingTx();
  const tick = new Date("2026-01-01T00:01:00Z");
  const requested = new Date("2026-01-01T00:00:30Z");
  await stores.cron.cronBound({ idleMs: 5000 }, tx);
  await stores.cron.cronLock({ names: ["a", "b"], now: "2026-01-01T00:02:00.000Z" }, tx);
  await stores.cron.cronAdvance({ name: "a", lastTick: tick, lastJobId: "77" }, tx);
  await stores.cron.cronSkip({ name: "b", lastTick: tick }, tx);
  await stores.cron.cronRunDone({ name: "c", requestedAt: requested, jobId: "78" }, tx);
  expect(onPool).toEqual([]);
  const [bound, lock, advance, skip, runDone] = sent as [Sent, Sent, Sent, Sent, Sent];
  expect(at(bound, /COALESCE\(NULLIF\(setting::int, 0\), \$(\d+)/)).toBe(5000);
  expect(at(bound, /NULLIF\(setting::int, 0\), \$\d+::int\), \$(\d+)/)).toBe(5000);
  expect(at(lock, /name = ANY\(\$(\d+)/)).toEqual(["a", "b"]);
  expect(at(lock, /COALESCE\(\$(\d+)::timestamptz, now\(\)\)/)).toBe("2026-01-01T00:02:00.000Z");
  expect(at(advance, /WHERE name = \$(\d+)/)).toBe("a");
  expect(at(advance, /SET last_tick = \$(\d+)/)).toBe(tick);
  expect(at(advance, /AND last_tick < \$(\d+)/)).toBe(tick);
  expect(at(advance, /last_job_id = \$(\d+)/)).toBe("77");
  expect(at(skip, /WHERE name = \$(\d+)/)).toBe("b");
  expect(at(skip, /SET last_tick = \$(\d+)/)).toBe(tick);
  expect(at(skip, /AND last_tick < \$(\d+)/)).toBe(tick);
  expect(at(runDone, /WHERE name = \$(\d+)/)).toBe("c");
  expect(at(runDone, /run_requested_at\) = \$(\d+)/)).toBe(requested);
  expect(at(runDone, /COALESCE\(\$(\d+), last_job_id\)/)).toBe("78");
});

test("a saga's insert, first job, read and lock send their values at their $n, on the caller's transaction", async () => {
  const { store, sent: onPool } = recording([{ id: "5" }]);
  const sagas = new SagaStore(store);
  const { tx, sent } = recordingTx([{ id: "5" }]);
  expect(
    await sagas.sagaInsert({ name: "order", input: '{"n":1}', steps: [{ name: "pay", status: "pending" }] }, tx),
  ).toBe("5");
  await sagas.sagaSetJob({ sagaId: "5", jobId: "40" }, tx);
  await sagas.sagaLock({ sagaId: "6" }, tx);
  await sagas.sagaGet({ sagaId: "7" });
  await sagas.sagaStuck({ limit: 100 });
  const [insert, setJob, lock] = sent as [Sent, Sent, Sent];
  const [get, stuck] = onPool as [Sent, Sent];
  expect(byInsertColumn(insert)).toEqual({
    name: "order",
    input: '{"n":1}',
    steps: '[{"name":"pay","status":"pending"}]',
  });
  expect(at(setJob, /WHERE id = \$(\d+)/)).toBe("5");
  expect(at(setJob, /current_job_id = \$(\d+)/)).toBe("40");
  expect(at(lock, /WHERE id = \$(\d+) FOR UPDATE/)).toBe("6");
  expect(at(get, /WHERE id = \$(\d+)/)).toBe("7");
  expect(at(stuck, /LIMIT \$(\d+)/)).toBe(100);
});

test("a saga's transition sends its guard, its patch and its target each at the $n its SQL compares or sets", async () => {
  const { store } = recording();
  const { tx, sent } = recordingTx([{ id: "5" }]);
  const moved = await new SagaStore(store).sagaTransition(
    {
      sagaId: "5",
      fromStatus: "running",
      fromStep: 1,
      patchStep: 2,
      patch: '{"status":"completed"}',
      toStatus: "compensating",
      toStep: 3,
      toJobId: "41",
      error: "boom",
      guardJobId: "39",
    },
    tx,
  );
  expect(moved).toBe(true);
  const [transition] = sent as [Sent];
  expect(at(transition, /WHERE id = \$(\d+)/)).toBe("5");
  expect(at(transition, /AND status = \$(\d+)/)).toBe("running");
  expect(at(transition, /AND current_step = \$(\d+)/)).toBe(1);
  expect(at(transition, /ARRAY\[\$(\d+)::int::text\]/)).toBe(2);
  expect(at(transition, /steps -> \$(\d+)::int/)).toBe(2);
  expect(at(transition, /\|\| \$(\d+)::jsonb/)).toBe('{"status":"completed"}');
  expect(at(transition, /\),\s+status = \$(\d+)/)).toBe("compensating");
  expect(at(transition, /current_step = \$(\d+), current_job_id/)).toBe(3);
  expect(at(transition, /current_job_id = \$(\d+)::bigint, error/)).toBe("41");
  expect(at(transition, /COALESCE\(\$(\d+), error\)/)).toBe("boom");
  expect(at(transition, /\(\$(\d+)::bigint IS NULL/)).toBe("39");
  expect(at(transition, /current_job_id = \$(\d+)::bigint\)/)).toBe("39");
});

/** `ms("$n")` of sql/history.ts: `$n::float8 * interval '1 millisecond'`, with one `(\d+)` group for n. */
const MS = String.raw`\$(\d+)::float8 \* interval '1 millisecond'`;

test("history's plan, make and drop send their values at their $n", async () => {
  const { store, sent } = recording([{ name: "p", rows: "3" }]);
  const history = new HistoryStore(store);
  const lower = new Date("2026-01-02T00:00:00Z");
  const upper = new Date("2026-01-03T00:00:00Z");
  await history.historyPlan({ widthMs: 86_400_000, aheadMs: 172_800_000 });
  await history.historyMake({ parent: "job_history_failed", lower, upper });
  await history.historyDrop({ parent: "job_history_completed", olderThanMs: 3_600_000 });
  const [plan, make, drop] = sent as [Sent, Sent, Sent];
  expect(at(plan, new RegExp(`date_bin\\(${MS}`))).toBe(86_400_000);
  expect(at(plan, new RegExp(`now\\(\\) \\+ ${MS},`))).toBe(172_800_000);
  expect(at(make, /skipq_history_partition\(\$(\d+)/)).toBe("job_history_failed");
  expect(at(make, /skipq_history_partition\(\$\d+, \$(\d+)/)).toBe(lower);
  expect(at(make, /skipq_history_partition\(\$\d+, \$\d+, \$(\d+)\)/)).toBe(upper);
  expect(at(drop, /skipq_history_drop\(\$(\d+)/)).toBe("job_history_completed");
  expect(at(drop, new RegExp(`now\\(\\) - ${MS}`))).toBe(3_600_000);
});

test("retention's row deletes send their age at the cutoff's $n and their limit at LIMIT's", async () => {
  const { store, sent } = recording();
  const history = new HistoryStore(store);
  await history.historyPruneCompletedDefault({ olderThanMs: 11, limit: 101 });
  await history.historyPruneFailedDefault({ olderThanMs: 12, limit: 102 });
  await history.keysExpire({ olderThanMs: 13, limit: 103 });
  await history.historyPruneRows({ statuses: ["dead", "cancelled"], olderThanMs: 14, limit: 104 });
  await new JobFeatureStore(store).uniqueExpire({ endedMs: 15, limit: 105 });
  await new OutboxStore(store).outboxPrune({ olderThanMs: 16, limit: 106 });
  await stores(store).workflows.edgesPrune({ olderThanMs: 17, limit: 107 });
  await stores(store).workflows.batchesPrune({ olderThanMs: 18, limit: 108 });
  const cutoff = new RegExp(`now\\(\\) - ${MS}`);
  sent.forEach((s, i) => {
    expect(at(s, cutoff), s.text).toBe(11 + i);
    expect(at(s, /LIMIT \$(\d+)/), s.text).toBe(101 + i);
  });
  expect(sent).toHaveLength(8);
  expect(at(sent[3] as Sent, /status = ANY \(\$(\d+)::text\[\]\)/)).toEqual(["dead", "cancelled"]);
});

test("the keep-completed setting, the upgrade's move and the rollup send their values at their $n", async () => {
  const { store, sent } = recording([{ moved: true, closed: 1, sampled: 2, deleted: 3 }]);
  const history = new HistoryStore(store);
  await history.settingsKeepCompleted({ keepCompleted: false });
  expect(await history.historyMoved()).toBe(true);
  await history.historyEnsureForMove({ widthMs: 3_600_000, keepMs: 86_400_000 });
  await history.historyMoveFinished({ limit: 5000 });
  expect(await history.historyFinishMove()).toBe(true);
  expect(await stores(store).stats.rollup()).toMatchObject({ closed: 1, sampled: 2, deleted: 3 });
  const [keep, , ensure, move] = sent as [Sent, Sent, Sent, Sent];
  expect(at(keep, /keep_completed = \$(\d+),/)).toBe(false);
  expect(at(keep, /IS DISTINCT FROM \$(\d+)/)).toBe(false);
  expect(at(ensure, new RegExp(`lower \\+ ${MS}`))).toBe(3_600_000);
  expect(at(ensure, new RegExp(`updated_at\\) > now\\(\\) - ${MS}`))).toBe(86_400_000);
  expect(at(move, /LIMIT \$(\d+) FOR UPDATE/)).toBe(5000);
});

test("a publish sends its topic, key, body and headers at the $n of the column each sets, the schema's lock namespace at the lock's", async () => {
  const { store, sent: onPool } = recording();
  const { tx, sent } = recordingTx([{ id: "9" }]);
  const outbox = new OutboxStore(store);
  expect(await outbox.outboxInsert({ topic: "t", key: "k", event: '{"a":1}', headers: '{"h":"v"}' }, tx)).toBe("9");
  expect(onPool).toEqual([]);
  const [insert] = sent as [Sent];
  // INSERT INTO t (columns) SELECT $a, … FROM serialised: column ← $a.
  const columns = (/INSERT INTO \S+ \(([^)]+)\)/.exec(insert.text)?.[1] ?? "").split(",").map((c) => c.trim());
  const params = (/SELECT (\$[^\n]+) FROM serialised/.exec(insert.text)?.[1] ?? "").split(",").map((c) => c.trim());
  expect(
    Object.fromEntries(columns.map((c, i) => [c, insert.values[Number(/\$(\d+)/.exec(params[i] ?? "")?.[1]) - 1]])),
  ).toEqual({ topic: "t", key: "k", event: '{"a":1}', headers: '{"h":"v"}' });
  expect(at(insert, /pg_advisory_xact_lock\(hashtext\(\$(\d+)\)/)).toBe("skipq.outbox:area_stores");
  expect(at(insert, /pg_advisory_xact_lock\(hashtext\(\$\d+\), hashtext\(\$(\d+)\)/)).toBe("k");
});

test("a batch's row sends its jobs and callbacks at the $n of the column each sets, on the batch's transaction; its status read sends the batch's id", async () => {
  const { stores, sent: onPool } = recording([{ id: "3" }]);
  const { tx, sent } = recordingTx([{ id: "3" }]);
  expect(await stores.workflows.batchInsert({ jobIds: ["1", "2"], onComplete: "4", onSuccess: null }, tx)).toBe("3");
  expect(onPool).toEqual([]);
  await stores.workflows.batchStatus({ batchId: "3" });
  const [insert] = sent as [Sent];
  const [status] = onPool as [Sent];
  expect(byInsertColumn(insert)).toEqual({ jobs: ["1", "2"], on_complete: "4", on_success: null });
  expect(at(status, /WHERE b\.id = \$(\d+)/)).toBe("3");
});

test("a wait's mark sends the job's id at both of its $n, its read the ids at ANY's, the history setting none", async () => {
  const { store, sent } = recording([{ keep_completed: false }]);
  const features = new JobFeatureStore(store);
  await features.jobWaitMark({ jobId: "5" });
  await features.jobWaitRead({ ids: ["5", "6"] });
  expect(await features.settingsKeepCompletedRead()).toBe(false);
  const [mark, read, setting] = sent as [Sent, Sent, Sent];
  expect(at(mark, /SET notify_on_finish = true WHERE id = \$(\d+)/)).toBe("5");
  expect(at(mark, /WHERE id = \$(\d+) AND notify_on_finish$/)).toBe("5"); // the UNION's read of a marked job
  expect(at(read, /WHERE id = ANY \(\$(\d+)::bigint\[\]\)/)).toEqual(["5", "6"]);
  expect(setting.values).toEqual([]);
});

test("the dashboard's sessions send their hash, principal, lifetimes and the presented session each at their $n", async () => {
  const { store, sent } = recording([{ principal: "token" }]);
  const dashboard = new DashboardStore(store);
  await dashboard.sessionCreate({
    id: "h1",
    principal: "user:ann",
    ttlMs: 43_200_000,
    presented: "h0",
    idleMs: 3_600_000,
  });
  expect(await dashboard.sessionTouch({ id: "h2", idleMs: 60_000 })).toBe("token");
  await dashboard.sessionRevoke({ id: "h3" });
  const [create, touch, revoke] = sent as [Sent, Sent, Sent];
  expect(byInsertColumn(create)).toMatchObject({ id: "h1", principal: "user:ann" });
  expect(at(create, /now\(\) \+ \$(\d+)::float8/)).toBe(43_200_000);
  expect(at(create, /WHERE id = \$(\d+) OR/)).toBe("h0");
  expect(at(create, /last_seen_at <= now\(\) - \$(\d+)/)).toBe(3_600_000);
  expect(at(touch, /WHERE id = \$(\d+)/)).toBe("h2");
  expect(at(touch, /last_seen_at > now\(\) - \$(\d+)/)).toBe(60_000);
  expect(at(revoke, /WHERE id = \$(\d+)/)).toBe("h3");
});

test("the dashboard's audit, outbox and state-tab calls send each value at the $n its SQL compares or sets", async () => {
  const { store, sent } = recording();
  const dashboard = new DashboardStore(store);
  await dashboard.auditInsert({
    principal: "user:ann",
    role: "admin",
    action: "retry",
    target: "job 7",
    detail: '{"n":1}',
    client: "127.0.0.1",
    userAgent: "curl",
  });
  await dashboard.auditList({ before: "90", limit: 100 });
  await dashboard.outboxKeys({ limit: 200 });
  await dashboard.outboxRetryKey({ key: "k", topic: "t" });
  await dashboard.jobStateCounts({ queue: "q", kind: "k", limit: 1001 });
  const [insert, list, keys, retry, counts] = sent as [Sent, Sent, Sent, Sent, Sent];
  expect(byInsertColumn(insert)).toEqual({
    principal: "user:ann",
    role: "admin",
    action: "retry",
    target: "job 7",
    detail: '{"n":1}',
    client: "127.0.0.1",
    user_agent: "curl",
  });
  expect(at(list, /id < \$(\d+)\)/)).toBe("90");
  expect(at(list, /LIMIT \$(\d+)/)).toBe(100);
  expect(at(keys, /LIMIT \$(\d+)/)).toBe(200);
  expect(at(retry, /WHERE key = \$(\d+)/)).toBe("k");
  expect(at(retry, /AND topic = \$(\d+)/)).toBe("t");
  expect(at(counts, /queue = \$(\d+)\)/)).toBe("q");
  expect(at(counts, /kind = \$(\d+)\)/)).toBe("k");
  expect(at(counts, /LIMIT \$(\d+)/)).toBe(1001);
});
