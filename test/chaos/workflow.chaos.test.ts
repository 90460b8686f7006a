/**
 * Workflows under process faults (issue 15): worker processes SIGKILLed in
 * the middle of a 1,000-node DAG. Every node ends completed, each completion
 * recorded once; every re-execution is explained by a lease expiry (the
 * reconciler names it); and no node started before all its parents had
 * finished a successful run — readiness is decided by the parents' committed
 * outcomes, which a killed worker never wrote.
 */
import { describe, expect, it } from "vitest";
import { CHAOS_WORKER, ledgerOf, recordResult, spawnWorker, terminalCount, until } from "./harness.js";
import { type Fault, reconcile } from "./ledger.js";
import { CHAOS_CONFIG, chaosSuite } from "./suite.js";

const suite = chaosSuite();

/** A layered DAG: `layers` × `width` nodes, each node past the first layer depending on 1-3 of the layer before. */
function dag(layers: number, width: number) {
  const items: Array<{ job: string; payload: object; dependsOn?: Array<{ item: number }> }> = [];
  const parents: number[][] = [];
  for (let l = 0; l < layers; l++) {
    for (let w = 0; w < width; w++) {
      const mine =
        l === 0
          ? []
          : [
              ...new Set(
                Array.from({ length: 1 + ((w * 7 + l) % 3) }, (_, k) => (l - 1) * width + ((w + k * 37) % width)),
              ),
            ];
      parents.push(mine);
      items.push({
        job: "chaos",
        payload: { ms: 30 },
        ...(mine.length > 0 ? { dependsOn: mine.map((item) => ({ item })) } : {}),
      });
    }
  }
  return { items, parents };
}

describe("workflow faults", () => {
  it("W1: SIGKILLing workers in the middle of a 1,000-node DAG completes every node once, never before its parents", async () => {
    const q = await suite.queue("w1");
    const { items, parents } = dag(10, 100);
    const nodes = items.length;
    const ids = (await q.skipq.enqueueMany(items)).map((r) => r.id);
    const worker = { ...CHAOS_WORKER, concurrency: 10 };
    const live = await Promise.all([1, 2, 3].map(() => spawnWorker(q, { worker })));
    const faults: Fault[] = [];
    for (let k = 0; k < 4; k++) {
      await until(
        "progress before the next kill",
        async () => (await terminalCount(q)) >= (nodes * (k + 1)) / 6,
        120_000,
      );
      const { rows: busy } = await q.db.query(
        `SELECT split_part(locked_by, ':', 2)::int AS pid FROM "${q.schema}".jobs WHERE status = 'running' GROUP BY 1`,
      );
      const victim = live.find((w) => busy.some((b) => b.pid === w.pid));
      if (!victim) continue;
      faults.push({ t: Date.now(), pid: victim.pid, what: "SIGKILL" });
      victim.proc.kill("SIGKILL");
      await victim.exited;
      live[live.indexOf(victim)] = await spawnWorker(q, { worker }, { waitReady: false });
    }
    await until("every node terminal", async () => (await terminalCount(q)) === nodes, 170_000, 100);

    const r = await reconcile(q.db, q.schema, q.ledgerDir, faults);
    expect(r.lost).toBe(0);
    expect(r.byStatus).toEqual({ completed: nodes });
    expect(r.duplicatesByReason.unexplained ?? 0).toBe(0);
    for (const reason of Object.keys(r.duplicatesByReason)) expect(reason).toMatch(/^lease_expired:/);
    expect(faults.length).toBeGreaterThanOrEqual(3);
    // One history row per node: its completion was recorded once.
    const { rows: once } = await q.db.query(
      `SELECT count(*)::int AS rows, count(DISTINCT id)::int AS ids FROM "${q.schema}".job_history WHERE kind = 'chaos'`,
    );
    expect(once[0]).toEqual({ rows: nodes, ids: nodes });
    // Every edge counted, no node left waiting.
    const { rows: edges } = await q.db.query(
      `SELECT count(*) FILTER (WHERE NOT counted)::int AS open, count(*)::int AS all FROM "${q.schema}".job_dependencies`,
    );
    expect(edges[0]).toEqual({ open: 0, all: parents.flat().length });
    // No node started before each of its parents had ended a successful run.
    const entries = ledgerOf(q);
    const firstStart = new Map<string, number>();
    const firstOk = new Map<string, number>();
    for (const e of entries) {
      if (e.e === "start" && e.id && !firstStart.has(e.id)) firstStart.set(e.id, e.t);
      if (e.e === "end" && e.ok && e.id && !firstOk.has(e.id)) firstOk.set(e.id, e.t);
    }
    let early = 0;
    for (const [i, mine] of parents.entries()) {
      const started = firstStart.get(ids[i] as string) as number;
      for (const p of mine) if ((firstOk.get(ids[p] as string) ?? Number.POSITIVE_INFINITY) > started) early++;
    }
    expect(early).toBe(0);
    recordResult({
      row: "W1",
      title: "SIGKILL a worker 4 times in the middle of a 1,000-node DAG (10 layers × 100, 1-3 parents each)",
      config: CHAOS_CONFIG,
      lost: r.lost,
      duplicates: r.duplicates,
      duplicatesByReason: r.duplicatesByReason,
      staleRejected: r.staleOutcomesRejected,
      other: `kills: ${faults.length}; edges: ${parents.flat().length}; nodes started before a parent finished: ${early}`,
    });
  });
});
