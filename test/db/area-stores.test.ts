/**
 * The typed stores of the operator's areas (src/db/areaStores.ts) put each
 * named parameter at the `$n` its statement's SQL compares it with, read off
 * the statement's text — so a swapped pair inside a store fails here, not
 * only as a wrong result somewhere downstream. No database: a pool that
 * records what it is sent (the integration tests run the same calls for real).
 */
import type pg from "pg";
import { expect, test } from "vitest";
import type { JobFilterParams } from "../../src/db/adminStore.js";
import { AreaStores } from "../../src/db/areaStores.js";
import { Store } from "../../src/db/store.js";

interface Sent {
  text: string;
  values: unknown[];
}

/** Stores over a pool that records every query and answers with `rows`. */
function recording(rows: unknown[] = [{}]): { stores: AreaStores; sent: Sent[] } {
  const sent: Sent[] = [];
  const pool = {
    query: async (config: { text: string; values?: unknown[] }) => {
      sent.push({ text: config.text, values: config.values ?? [] });
      return { rows, rowCount: rows.length };
    },
  };
  return { stores: new AreaStores(new Store("area_stores", pool as unknown as pg.Pool)), sent };
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
  const columns =
    /INSERT INTO \S+ \(([^)]+)\)/
      .exec(set.text)?.[1]
      ?.split(",")
      .map((c) => c.trim()) ?? [];
  const params =
    /VALUES \(([^)]+)\)/
      .exec(set.text)?.[1]
      ?.split(",")
      .map((p) => p.trim()) ?? [];
  const byColumn = Object.fromEntries(
    columns.map((c, i) => [c, set.values[Number(/\$(\d+)/.exec(params[i] ?? "")?.[1]) - 1]]),
  );
  expect(byColumn).toEqual({
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
