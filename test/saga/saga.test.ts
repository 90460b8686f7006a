import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { defineSaga, FailPermanently, getSaga, type SagaState, Sagas } from "../../src/index.js";
import { finishJobs, until, useTestQueue } from "../helpers.js";

interface Order {
  order: string;
  /** Step index whose action always throws (-1: none). */
  failAt: number;
  /** Step index whose compensation always throws (-1: none). */
  compensationFailsAt?: number;
  /** Step index whose action throws on its first attempt only. */
  flakyAt?: number;
}

const log: string[] = [];
const attempts = new Map<string, number>();
const names = ["reserve", "charge", "ship"];

const checkout = defineSaga<Order>(
  "checkout",
  names.map((name, index) => ({
    name,
    async action({ input, previous, sagaId }) {
      const key = `${sagaId}:${name}`;
      attempts.set(key, (attempts.get(key) ?? 0) + 1);
      if (input.failAt === index) throw new Error(`${name} failed for ${input.order}`);
      if (input.flakyAt === index && attempts.get(key) === 1) throw new Error(`${name} flaked`);
      log.push(`${input.order}:${name}`);
      // Each result carries the previous one, proving results are passed on.
      return { step: name, after: (previous as { step?: string } | undefined)?.step ?? null };
    },
    async compensate({ input, previous }) {
      if (input.compensationFailsAt === index) throw new FailPermanently(`cannot undo ${name}`);
      log.push(`${input.order}:undo-${name}:${(previous as { step: string }).step}`);
    },
  })),
);

const t = useTestQueue("saga");
let sagas: Sagas;
beforeAll(async () => {
  sagas = new Sagas(t.skipq, [checkout], {
    maxAttempts: 2,
    worker: { pollInterval: 20, backoff: { baseMs: 5, maxMs: 20, jitter: 0 }, concurrency: 4 },
  });
  await sagas.start();
});
afterAll(async () => {
  await sagas.stop();
});

const terminal = (s: SagaState | undefined) =>
  s && ["completed", "compensated", "failed"].includes(s.status) ? s : undefined;

async function settle(id: string): Promise<SagaState> {
  return until(`saga ${id} settles`, async () => terminal(await getSaga(t.skipq, id))) as Promise<SagaState>;
}

const ofOrder = (order: string) => log.filter((l) => l.startsWith(`${order}:`)).map((l) => l.slice(order.length + 1));

test("a saga whose steps all succeed completes, each step receiving the previous step's result", async () => {
  const { id } = await sagas.startSaga(checkout, { order: "ok", failAt: -1 });
  const state = await settle(id);
  expect(state.status).toBe("completed");
  expect(ofOrder("ok")).toEqual(["reserve", "charge", "ship"]);
  expect(state.steps).toEqual([
    { name: "reserve", status: "completed", result: { step: "reserve", after: null } },
    { name: "charge", status: "completed", result: { step: "charge", after: "reserve" } },
    { name: "ship", status: "completed", result: { step: "ship", after: "charge" } },
  ]);
});

describe.each([0, 1, 2])("when step %i dies", (failAt) => {
  test("the completed steps' compensations run in reverse order and the saga ends compensated", async () => {
    const order = `fail${failAt}`;
    const { id } = await sagas.startSaga(checkout, { order, failAt });
    const state = await settle(id);
    expect(state.status).toBe("compensated");
    const done = names.slice(0, failAt);
    expect(ofOrder(order)).toEqual([...done, ...[...done].reverse().map((n) => `undo-${n}:${n}`)]);
    // The failing action had both its attempts before the saga gave up on it.
    expect(attempts.get(`${id}:${names[failAt]}`)).toBe(2);
    expect(state.steps.map((s) => s.status)).toEqual(
      names.map((_, i) => (i < failAt ? "compensated" : i === failAt ? "failed" : "pending")),
    );
    expect(state.error).toContain(`${names[failAt]} failed for ${order}`);
    // Later steps never ran.
    for (const later of names.slice(failAt + 1)) expect(attempts.get(`${id}:${later}`)).toBeUndefined();
  });
});

test("a step that fails once and then succeeds is retried, not compensated", async () => {
  const { id } = await sagas.startSaga(checkout, { order: "flaky", failAt: -1, flakyAt: 1 });
  const state = await settle(id);
  expect(state.status).toBe("completed");
  expect(attempts.get(`${id}:charge`)).toBe(2);
  expect(ofOrder("flaky")).toEqual(["reserve", "charge", "ship"]);
});

test("a compensation that dies leaves the saga failed, naming the step, without running lower compensations", async () => {
  const { id } = await sagas.startSaga(checkout, { order: "stuck", failAt: 2, compensationFailsAt: 1 });
  const state = await settle(id);
  expect(state.status).toBe("failed");
  expect(state.error).toMatch(/compensation of step 1 failed: cannot undo charge/);
  expect(ofOrder("stuck")).toEqual(["reserve", "charge"]);
  expect(state.steps.map((s) => s.status)).toEqual(["completed", "compensation_failed", "failed"]);
});

test("a step job buried outside its handler (reaper, cancel) is swept into compensation of the steps before it", async () => {
  await sagas.worker.stop();
  const quiet = new Sagas(t.skipq, [checkout], {
    maxAttempts: 2,
    worker: { listen: false, maintenance: false, pollInterval: 20 },
  });
  const { id } = await quiet.startSaga(checkout, { order: "reaped", failAt: -1 });
  // Step 0 runs; then step 1's job dies with no handler to notice (the reaper buried it).
  expect(await quiet.worker.runOnce()).toBe(1);
  const before = await getSaga(t.skipq, id);
  expect(before).toMatchObject({ status: "running", currentStep: 1 });
  await finishJobs(t.db, t.schema, [before?.currentJobId as string], "dead", {
    lastError: "lease expired; attempts used up",
  });
  expect(await quiet.runOnce()).toBe(1);
  expect(await quiet.runOnce()).toBe(0);
  expect(await getSaga(t.skipq, id)).toMatchObject({ status: "compensating", currentStep: 0 });
  while ((await quiet.worker.runOnce()) > 0);
  const state = await getSaga(t.skipq, id);
  expect(state).toMatchObject({ status: "compensated", error: expect.stringContaining("attempts used up") });
  expect(state?.steps.map((s) => s.status)).toEqual(["compensated", "failed", "pending"]);
  expect(ofOrder("reaped")).toEqual(["reserve", "undo-reserve:reserve"]);
  await quiet.stop();
});

test("a saga started in a rolled-back transaction leaves no saga and no job; unknown ids read as undefined", async () => {
  const client = await t.skipq.pool.connect();
  let id = "";
  try {
    await client.query("BEGIN");
    id = (await sagas.startSagaTx(client, checkout, { order: "rb", failAt: -1 })).id;
    await client.query("ROLLBACK");
  } finally {
    client.release();
  }
  expect(await getSaga(t.skipq, id)).toBeUndefined();
  const { rows } = await t.db.query(
    `SELECT count(*)::int AS n FROM "${t.schema}".all_jobs WHERE payload->>'saga' = $1`,
    [id],
  );
  expect(rows[0].n).toBe(0);
  await expect(getSaga(t.skipq, "not-a-number")).rejects.toMatchObject({ code: "SKIPQ_INVALID_ARGUMENT" });
});

test("a duplicate step job (at-least-once) does not move the saga twice", async () => {
  const quiet = new Sagas(t.skipq, [checkout], {
    maxAttempts: 2,
    worker: { listen: false, maintenance: false, pollInterval: 20 },
  });
  const { id } = await quiet.startSaga(checkout, { order: "dup", failAt: -1 });
  // The same first-step job, twice.
  await t.skipq.enqueue(checkout.kind, { saga: id, step: 0, phase: "action" }, { queue: "sagas" });
  while ((await quiet.worker.runOnce()) > 0);
  const state = await getSaga(t.skipq, id);
  expect(state?.status).toBe("completed");
  // The action may run twice (at-least-once), but the saga recorded it once and advanced once.
  expect(ofOrder("dup").filter((s) => s === "charge")).toHaveLength(1);
  expect(ofOrder("dup").filter((s) => s === "ship")).toHaveLength(1);
  await quiet.stop();
});
