import { expect, test } from "vitest";
import { createMetrics, defineJob, FailPermanently, serveMetrics } from "../../src/index.js";
import { testQueue, until } from "../helpers.js";

type Sample = { name: string; labels: Record<string, string>; value: number };

/** Parses the Prometheus text format (enough of it for these assertions). */
function parse(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)$/.exec(line);
    if (!m) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[3] ?? "").matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1] as string] = l[2] as string;
    samples.push({ name: m[1] as string, labels, value: Number(m[4]) });
  }
  return samples;
}

function value(samples: Sample[], name: string, labels: Record<string, string> = {}): number | undefined {
  return samples.find((s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v))?.value;
}

test("a scrape shows queue depth, outcome counters, latency histograms, reaps, stale writes and the listener, all named skipq_*", async () => {
  const t = await testQueue("metrics");
  const work = defineJob<{ n: number }>("work");
  const slow = defineJob<Record<string, never>>("slow");
  const gates: Array<() => void> = [];
  const metrics = createMetrics({ skipq: t.skipq, refreshInterval: 0 });
  const worker = t.skipq
    .worker({
      concurrency: 4,
      lockTimeout: "60s",
      heartbeatInterval: "20s",
      reaperInterval: "100ms",
      pollInterval: "50ms",
    })
    .register(work, async ({ n }) => {
      if (n === 3) throw new FailPermanently("n is 3");
      if (n === 4) throw new Error("try again");
    })
    .register(slow, () => new Promise<void>((resolve) => gates.push(resolve)));
  metrics.observe(worker);
  const server = await serveMetrics({ metrics, port: 0, token: "scrape-token" });
  const scrape = async () => {
    const res = await fetch(server.url, { headers: { authorization: "Bearer scrape-token" } });
    expect(res.status).toBe(200);
    return parse(await res.text());
  };
  try {
    expect((await fetch(server.url)).status).toBe(401);
    await t.skipq.enqueue(work, { n: 9 }, { queue: "later", delay: "1h" });
    await worker.start();
    for (const n of [1, 2, 3]) await t.skipq.enqueue(work, { n });
    await t.skipq.enqueue(work, { n: 4 }, { maxAttempts: 5 });
    await until("outcomes counted", async () => {
      const s = await scrape();
      return (
        value(s, "skipq_jobs_completed_total", { kind: "work" }) === 2 &&
        value(s, "skipq_jobs_dead_total", { kind: "work" }) === 1 &&
        (value(s, "skipq_jobs_failed_total", { kind: "work" }) ?? 0) >= 1
      );
    });

    // A lease that runs out under a running handler: the reaper takes it back, and the late completion is rejected.
    const { id } = await t.skipq.enqueue(slow, {});
    await until("slow job running", () => gates.length === 1);
    await t.db.query(`UPDATE "${t.schema}".jobs SET lease_expires_at = now() - interval '1 second' WHERE id = $1`, [
      id,
    ]);
    await until(
      "lease reaped",
      async () => value(await scrape(), "skipq_leases_reaped_total", { status: "pending" }) === 1,
    );
    gates.shift()?.();
    await until("stale write counted", async () => value(await scrape(), "skipq_stale_writes_rejected_total") === 1);
    await until("rerun started", () => gates.length === 1);
    gates.shift()?.();

    const s = await scrape();
    expect(s.every((x) => x.name.startsWith("skipq_"))).toBe(true);
    expect(value(s, "skipq_queue_jobs", { queue: "later", status: "scheduled" })).toBe(1);
    expect(value(s, "skipq_queue_jobs", { queue: "default", status: "dead" })).toBe(1);
    expect(value(s, "skipq_queue_oldest_pending_seconds", { queue: "later" })).toBe(0);
    expect(value(s, "skipq_claim_latency_seconds_count", { queue: "default" })).toBeGreaterThanOrEqual(6);
    expect(value(s, "skipq_claim_duration_seconds_count")).toBeGreaterThanOrEqual(1);
    expect(value(s, "skipq_job_duration_seconds_count", { kind: "work", outcome: "completed" })).toBe(2);
    expect(value(s, "skipq_job_duration_seconds_count", { kind: "work", outcome: "dead" })).toBe(1);
    expect(value(s, "skipq_jobs_claimed_total", { queue: "default" })).toBeGreaterThanOrEqual(6);
    expect(value(s, "skipq_listener_connected", { worker: worker.id })).toBe(1);
    expect(value(s, "skipq_health_warnings", { check: "unhandled-kind" })).toBe(0);
  } finally {
    await worker.stop();
    await server.close();
    await t.cleanup();
  }
});

test("a failed depth read keeps the scrape working and counts the error", async () => {
  const t = await testQueue("metrics_err");
  const metrics = createMetrics({
    skipq: t.skipq,
    refreshInterval: 0,
    health: false,
    logger: { debug() {}, info() {}, warn() {}, error() {} },
  });
  await t.skipq.enqueue("k", {});
  expect(value(parse(await metrics.metrics()), "skipq_queue_jobs", { queue: "default", status: "pending" })).toBe(1);
  await t.db.query(`ALTER TABLE "${t.schema}".jobs RENAME TO jobs_gone`);
  const s = parse(await metrics.metrics());
  expect(value(s, "skipq_metrics_read_errors_total")).toBe(1);
  expect(value(s, "skipq_queue_jobs", { queue: "default", status: "pending" })).toBe(1);
  await t.db.query(`ALTER TABLE "${t.schema}".jobs_gone RENAME TO jobs`);
  await t.cleanup();
});

test("skipq_queue_jobs counts workflow jobs waiting for their parents as status waiting", async () => {
  const t = await testQueue("metrics_waiting");
  try {
    const metrics = createMetrics({ skipq: t.skipq, refreshInterval: 0, health: false });
    const { id } = await t.skipq.enqueue("k", {}, { delay: "1h" });
    await t.skipq.enqueueMany([1, 2].map(() => ({ job: "k", payload: {}, dependsOn: [id] })));
    const s = parse(await metrics.metrics());
    expect(value(s, "skipq_queue_jobs", { queue: "default", status: "waiting" })).toBe(2);
    expect(value(s, "skipq_queue_jobs", { queue: "default", status: "scheduled" })).toBe(1);
    expect(value(s, "skipq_queue_jobs", { queue: "default", status: "pending" })).toBe(0);
  } finally {
    await t.cleanup();
  }
});
