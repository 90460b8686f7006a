/**
 * Network faults between workers and PostgreSQL (matrix 7.2), injected by a
 * TCP proxy (test/chaos/proxy.ts): the reply to a claim swallowed after it
 * committed (D2), half-open connections (D5), a partition longer than the
 * lease while handlers keep running (D8), 500 ms of latency each way (D9) and
 * a storm of connection resets (D11).
 *
 * Invariants: lost = 0; every duplicate execution has a named reason; an
 * outcome presented with a lease that moved on changes nothing.
 */
import { afterEach, describe, expect, it } from "vitest";
import {
  CHAOS_WORKER,
  enqueueChaos,
  ledgerOf,
  recordResult,
  SLACK_MS,
  spawnWorker,
  statusCounts,
  terminalCount,
  until,
} from "./harness.js";
import { reconcile } from "./ledger.js";
import { ChaosProxy } from "./proxy.js";
import { CHAOS_CONFIG, chaosSuite } from "./suite.js";

const suite = chaosSuite();
const queue = (label: string) => suite.queue(label);
const proxies: ChaosProxy[] = [];

async function proxy(options: { inspect?: boolean } = {}): Promise<ChaosProxy> {
  const p = new ChaosProxy(suite.server.port, options);
  await p.start();
  proxies.push(p);
  return p;
}

afterEach(async () => {
  await Promise.all(proxies.splice(0).map((p) => p.close()));
});

describe("network faults", () => {
  it("D2: jobs whose claim committed but whose reply was lost are reclaimed after the lease, and no handler ran under that claim", async () => {
    const q = await queue("d2");
    await enqueueChaos(q, 20, { ms: 50 });
    const p = await proxy({ inspect: true });
    // The claim is one autocommit statement: its reply (rows, CommandComplete, ReadyForQuery) is its commit's acknowledgement.
    p.dropReplyTo(/skipq_claim_next/, 1);
    const w = await spawnWorker(q, {
      url: p.url(q.url),
      worker: { ...CHAOS_WORKER, concurrency: 5, batchSize: 5, prefetch: 0 },
    });
    const swallowed = await until("a claim's reply swallowed", () => p.swallowed[0]);
    // RETURNING j.id, …, j.lease (8th column): the jobs the worker never heard it claimed.
    const stranded = swallowed.rows.map((row) => ({ id: row[0] as string, lease: row[7] as string }));
    expect(stranded.length).toBe(5);
    // Each claimed row carries its own lease token.
    const { rows } = await q.db.query(
      `SELECT count(*)::int AS n FROM "${q.schema}".jobs j
         JOIN unnest($1::bigint[], $2::bigint[]) AS s(id, lease) ON s.id = j.id AND s.lease = j.lease
        WHERE j.status = 'running'`,
      [stranded.map((s) => s.id), stranded.map((s) => s.lease)],
    );
    expect(rows[0].n).toBe(5); // committed in the database
    await until("every job terminal", async () => (await terminalCount(q)) === 20);
    expect(w.proc.exitCode).toBe(null);
    const entries = ledgerOf(q);
    const ranUnderLostClaim = entries.filter(
      (e) => e.e === "start" && stranded.some((s) => s.id === e.id && s.lease === e.lease),
    );
    expect(ranUnderLostClaim).toEqual([]);
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.executions).toBe(20);
    expect(r.duplicates).toBe(0);
    const firstRuns = stranded.map((s) => entries.find((e) => e.e === "start" && e.id === s.id)?.t ?? 0);
    const recovery = Math.max(...firstRuns) - swallowed.t;
    expect(recovery).toBeLessThan(2000 + 200 + 200 + SLACK_MS);
    const { rows: attempts } = await q.db.query(
      `SELECT min(attempts)::int AS lo, max(attempts)::int AS hi FROM "${q.schema}".all_jobs WHERE id = ANY($1::bigint[])`,
      [stranded.map((s) => s.id)],
    );
    recordResult({
      row: "D2",
      title:
        "Ambiguous commit: the proxy swallows the reply to a committed claim of 5 jobs, then resets the connection",
      config: `${CHAOS_CONFIG}, batch 5`,
      lost: r.lost,
      duplicates: r.duplicates,
      staleRejected: r.staleOutcomesRejected,
      recoveryMs: recovery,
      other: `stranded by the lost reply: ${stranded.length} (committed, running under a lease nobody held); handlers run under that claim: 0; duplicate executions: 0; the lost claim consumed an attempt (attempts now ${attempts[0].lo}-${attempts[0].hi})`,
    });
  });

  it("D5: half-open connections (bytes dropped, no FIN or RST) are detected by the listener's ping, and the worker's loop recovers through its pool's read timeout", async () => {
    const q = await queue("d5");
    const p = await proxy();
    const w = await spawnWorker(q, { url: p.url(q.url), worker: { ...CHAOS_WORKER, concurrency: 4 } });
    await until("listener connected", () => ledgerOf(q, w.pid).some((e) => e.e === "listener" && e.ok));
    await enqueueChaos(q, 5, {});
    await until("warm-up jobs completed", async () => (await statusCounts(q)).completed === 5);
    const faultAt = Date.now();
    const halfOpen = p.blackholeExisting();
    await q.db.query(`INSERT INTO "${q.schema}".jobs (kind, payload) SELECT 'chaos', '{}' FROM generate_series(1, 20)`);
    // The listener pings every 5 s and gives a ping 5 s: it must notice within 10 s (matrix bar 15 s) and reconnect.
    const lostAt = (
      await until(
        "the listener noticed its half-open connection",
        () => ledgerOf(q, w.pid).find((e) => e.e === "listener" && !e.ok && e.t > faultAt),
        15_000 + SLACK_MS,
        100,
      )
    ).t;
    const backAt = (
      await until("the listener reconnected", () =>
        ledgerOf(q, w.pid).find((e) => e.e === "listener" && e.ok && e.t > lostAt),
      )
    ).t;
    const detectionMs = lostAt - faultAt;
    expect(detectionMs).toBeLessThan(15_000 + SLACK_MS);
    expect(w.proc.exitCode).toBe(null);
    // The worker's pool gives up on a statement after lease + 5 s (issue 17; it used to wait forever and
    // the fetch loop stopped): the hung claim fails, its connection is discarded, and the next claim runs
    // on a new one.
    const drainedAt = await until(
      "the jobs enqueued after the fault completed",
      async () => ((await statusCounts(q)).completed === 25 ? Date.now() : 0),
      2000 + 5000 + 2000 + SLACK_MS,
      100,
    ).catch(() => undefined);
    const claimsAfter = ledgerOf(q, w.pid).filter((e) => e.e === "claimed" && e.t > faultAt).length;
    const warnings = ledgerOf(q, w.pid).findLast((e) => e.e === "tick")?.warnings ?? {};
    recordResult({
      row: "D5",
      title: `Half-open TCP: every connection of a worker (listener and pool, ${halfOpen} in all) silently drops bytes, no FIN/RST; new connections work`,
      config: `${CHAOS_CONFIG}; listener ping every 5 s, timeout 5 s`,
      lost: 0,
      duplicates: 0,
      recoveryMs: detectionMs,
      other: `listener: detected after ${detectionMs} ms (bar 15 s), reconnected ${backAt - lostAt} ms later; worker loop: ${drainedAt === undefined ? `HUNG (claims after the fault: ${claimsAfter}; warnings: ${JSON.stringify(warnings)})` : `20 jobs enqueued after the fault completed ${drainedAt - faultAt} ms after it (the pool's read timeout, lease + 5 s, discarded the half-open connections; warnings: ${JSON.stringify(warnings)})`}`,
    });
    expect(drainedAt, "the worker's loop recovered from its half-open pool connections").toBeDefined();
  });
  it("D8: a worker partitioned from the database for 2 leases while its handlers run loses both jobs to another worker, and nothing it sends after the heal is accepted", async () => {
    const q = await queue("d8");
    // Job 1 outlives the partition (aborted when the heal shows its lease lost); job 2 ends during it (its outcome waits in the partition).
    await enqueueChaos(q, 1, { ms: 60_000 });
    await enqueueChaos(q, 1, { ms: 2500, ignoreAbort: true });
    const p = await proxy();
    const victim = await spawnWorker(q, { url: p.url(q.url), worker: { ...CHAOS_WORKER, concurrency: 2 } });
    await until(
      "both jobs running on the victim",
      () => ledgerOf(q, victim.pid).filter((e) => e.e === "start").length === 2,
    );
    // TCP holds what is sent during a partition and delivers it when the partition heals (retransmission):
    // the proxy holds every byte, in both directions, for 2 leases (4 s), then delivers it in order.
    p.partition();
    const partitionedAt = Date.now();
    // The other worker reaches the database directly; started now, so job 2 still ends inside the partition.
    const rescuer = await spawnWorker(q, { worker: { ...CHAOS_WORKER, concurrency: 2 }, maxMs: 200 });
    // The partition lasts 2 leases, and until the rescuer has completed both jobs (a loaded machine may be slower).
    await until(
      "the rescuer completed both jobs",
      () => ledgerOf(q, rescuer.pid).filter((e) => e.e === "outcome").length === 2,
    );
    const rescuedMs = Date.now() - partitionedAt;
    await until("2 leases", () => Date.now() - partitionedAt >= 4000, 10_000, 50);
    p.heal();
    const healedAt = Date.now();
    await until("the victim learned both jobs were lost", () => {
      const v = ledgerOf(q, victim.pid);
      return v.some((e) => e.e === "outcome" && e.outcome === "lease-lost") && v.some((e) => e.e === "stale");
    });
    const aborted = ledgerOf(q, victim.pid).find((e) => e.e === "outcome" && e.outcome === "lease-lost");
    victim.proc.kill("SIGTERM");
    await victim.exited;
    const stats = ledgerOf(q, victim.pid).find((e) => e.e === "stopped")?.stats;
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(await statusCounts(q)).toEqual({ completed: 2 });
    expect(r.duplicatesByReason).toEqual({ lease_lost: 1, stale_outcome_rejected: 1 });
    expect(r.staleOutcomesRejected).toBe(1);
    // Accepted writes from the victim after the heal: none (its completed count is what the database accepted).
    expect(stats?.completed).toBe(0);
    expect(stats?.leasesLost).toBe(1);
    const recovery = (ledgerOf(q, rescuer.pid).find((e) => e.e === "start")?.t ?? 0) - partitionedAt;
    expect(recovery).toBeLessThan(2000 + 200 + 200 + SLACK_MS);
    recordResult({
      row: "D8",
      title:
        "Partition of one worker for at least 2 leases (4 s, traffic held and delivered on heal) while its 2 handlers run; another worker takes both jobs over",
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      duplicatesByReason: r.duplicatesByReason,
      staleRejected: r.staleOutcomesRejected,
      recoveryMs: recovery,
      other: `partition ${healedAt - partitionedAt} ms (the rescuer completed both jobs ${rescuedMs} ms in); outcomes accepted from the partitioned worker: ${stats?.completed}; handler aborted ${(aborted?.t ?? 0) - healedAt} ms after the heal (its first heartbeat answer); during the partition heartbeats neither succeed nor fail (the pool's read timeout, lease + 5 s, outlasts it), so the handler is not aborted until the heal`,
    });
  });

  it("D9: with 500 ms of latency each way no job runs twice and no lease lapses, because the lease outlasts heartbeat interval plus round trip", async () => {
    const q = await queue("d9");
    const p = await proxy();
    // Lease 4 s = 4 round trips; heartbeat every 1 s = 1 round trip: a renewal lands 0.5 s after it is sent,
    // so a lease keeps 2.5 s of margin, and two lost renewal cycles would let it lapse. A judge process on a
    // direct connection runs the reaper and claims nothing, so a lapse would be seen at once.
    const worker = { ...CHAOS_WORKER, lockTimeout: "4s", heartbeatInterval: "1s", concurrency: 6, maintenance: false };
    const w = await spawnWorker(q, { url: p.url(q.url), worker });
    const judge = await spawnWorker(q, { worker: { ...CHAOS_WORKER, queues: ["judge"], concurrency: 1 } });
    const drain = async (n: number): Promise<number> => {
      const before = (await statusCounts(q)).completed ?? 0;
      const t0 = Date.now();
      await enqueueChaos(q, n, {});
      await until(`${n} jobs completed`, async () => (await statusCounts(q)).completed === before + n, 60_000, 50);
      return Date.now() - t0;
    };
    const baseMs = await drain(100);
    p.latencyMs = 500;
    const slowMs = await drain(100);
    // Jobs of 5 s, longer than the lease: each is renewed 4-5 times through the delay.
    await enqueueChaos(q, 6, { ms: 5000 });
    await until("the long jobs completed", async () => (await statusCounts(q)).completed === 206, 60_000, 100);
    w.proc.kill("SIGTERM");
    await w.exited;
    const stats = ledgerOf(q, w.pid).find((e) => e.e === "stopped")?.stats;
    const reaped = ledgerOf(q, judge.pid).filter((e) => e.e === "reaped").length;
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.duplicates).toBe(0);
    expect(r.executions).toBe(206);
    expect(reaped).toBe(0);
    expect(stats?.leasesLost).toBe(0);
    expect(stats?.staleOutcomes).toBe(0);
    recordResult({
      row: "D9",
      title: "500 ms latency each way (proxy): 100 instant jobs, then 6 jobs of 5 s (longer than the lease)",
      config: "lease 4s, heartbeat 1s (RTT 1 s), poll 0.2s; reaper in a judge process on a direct connection",
      lost: r.lost,
      duplicates: r.duplicates,
      staleRejected: r.staleOutcomesRejected,
      other: `heartbeat misses: 0 (leases lost 0, reaped 0); throughput of 100 instant jobs: ${((100 / baseMs) * 1000).toFixed(0)} jobs/s without latency (${baseMs} ms), ${((100 / slowMs) * 1000).toFixed(0)} jobs/s with it (${slowMs} ms): ${((baseMs / slowMs) * 100).toFixed(0)} % of baseline`,
    });
  });

  it("D11: a storm of connection resets (10 % of forwarded chunks) loses no job and leaves none stuck", async () => {
    const q = await queue("d11");
    const jobs = 300;
    await enqueueChaos(q, jobs, { ms: 20 });
    const p = await proxy();
    p.resetP = 0.1;
    const worker = { ...CHAOS_WORKER, concurrency: 5 };
    const started = Date.now();
    const children = await Promise.all([1, 2].map(() => spawnWorker(q, { url: p.url(q.url), worker })));
    await until("every job terminal", async () => (await terminalCount(q)) === jobs, 120_000, 100);
    const drainMs = Date.now() - started;
    for (const c of children) expect(c.proc.exitCode).toBe(null);
    const resets = p.resets;
    p.resetP = 0;
    const exhausted = children
      .map(
        (c) =>
          c
            .stderr()
            .split("\n")
            .filter((l) => l.includes("could not record outcomes")).length,
      )
      .reduce((a, b) => a + b, 0);
    const warnings: Record<string, number> = {};
    for (const c of children)
      for (const [k, v] of Object.entries(ledgerOf(q, c.pid).findLast((e) => e.e === "tick")?.warnings ?? {}))
        warnings[k] = (warnings[k] ?? 0) + v;
    const r = await reconcile(q.db, q.schema, q.ledgerDir);
    expect(r.lost).toBe(0);
    expect(r.byStatus).toEqual({ completed: jobs });
    expect(r.duplicatesByReason.unexplained ?? 0).toBe(0);
    expect(resets).toBeGreaterThan(20);
    recordResult({
      row: "D11",
      title: `Reset storm: the proxy RSTs the connection on 10 % of forwarded chunks; 2 workers × concurrency 5 drain ${jobs} jobs of 20 ms`,
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      duplicatesByReason: r.duplicatesByReason,
      staleRejected: r.staleOutcomesRejected,
      other: `connections reset: ${resets}; errors survived by context: ${JSON.stringify(warnings)}; outcome-retry exhaustions: ${exhausted}; stuck jobs: 0; drain ${(drainMs / 1000).toFixed(1)} s; process exits: 0`,
    });
  });
});
