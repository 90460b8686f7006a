/**
 * A saga step's action is a side effect that happened once it returned. An
 * action whose result cannot be stored (a Date, too large) is never run again:
 * the step fails at once, naming the value, and is compensated with the steps
 * before it. An action that returns after its step was already failed (its job
 * cancelled while it ran, and the sweeper got there first) is compensated too.
 * Either way the saga's final state says what happened: every action that ran
 * was undone once.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { Admin, defineSaga, getSaga, type SagaState, Sagas } from "../../src/index.js";
import { gate, until, useTestQueue } from "../helpers.js";

interface Order {
  order: string;
  /** Step index whose action returns `bad` instead of plain JSON (-1: none). */
  badAt: number;
  bad?: "date" | "large";
  /** Step index whose action waits for the gate of `order` before it returns. */
  holdAt?: number;
  /** Step index whose compensation waits for the gate `${order}:undo` before it returns. */
  holdUndoAt?: number;
}

const log: string[] = [];
const gates = new Map<string, ReturnType<typeof gate>>();
const names = ["reserve", "charge", "ship"];

const payment = defineSaga<Order>(
  "payment",
  names.map((name, index) => ({
    name,
    async action({ input }) {
      log.push(`${input.order}:${name}`);
      // Ignores its abort signal: a side effect, once started, finishes.
      if (input.holdAt === index) {
        await gates.get(input.order)?.promise;
        log.push(`${input.order}:${name} returned`);
      }
      if (input.badAt === index) {
        return input.bad === "large" ? { blob: "x".repeat(70_000) } : { step: name, at: new Date() };
      }
      return { step: name };
    },
    // "ship" has nothing to undo.
    ...(name === "ship"
      ? {}
      : {
          async compensate({ input }: { input: Order }) {
            log.push(`${input.order}:undo-${name}`);
            if (input.holdUndoAt === index) await gates.get(`${input.order}:undo`)?.promise;
          },
        }),
  })),
);

const t = useTestQueue("saga step outcomes", { maxPayloadBytes: 64 * 1024 });
let sagas: Sagas;
beforeAll(async () => {
  sagas = new Sagas(t.skipq, [payment], {
    maxAttempts: 3,
    worker: { pollInterval: 20, backoff: { baseMs: 5, maxMs: 20, jitter: 0 }, concurrency: 4 },
  });
  await sagas.start();
});
afterAll(async () => {
  await sagas.stop();
});

const ofOrder = (order: string) => log.filter((l) => l.startsWith(`${order}:`)).map((l) => l.slice(order.length + 1));

async function settle(id: string): Promise<SagaState> {
  return until(`saga ${id} settles`, async () => {
    const s = await getSaga(t.skipq, id);
    return s && ["completed", "compensated", "failed"].includes(s.status) ? s : undefined;
  });
}

describe.each([0, 1])("when step %i's action returns a Date", (badAt) => {
  test("the action runs once, the step fails naming the value, and it is compensated with the steps before it", async () => {
    const order = `date${badAt}`;
    const { id } = await sagas.startSaga(payment, { order, badAt, bad: "date" });
    const state = await settle(id);
    const ran = names.slice(0, badAt + 1);
    // Ran once each (never retried), undone once each, in reverse order.
    expect(ofOrder(order)).toEqual([...ran, ...[...ran].reverse().map((n) => `undo-${n}`)]);
    expect(state.status).toBe("compensated");
    expect(state.error).toMatch(new RegExp(`step ${badAt} \\(${names[badAt]}\\).*result\\.at is a Date instance`));
    expect(state.steps[badAt]).toMatchObject({ status: "compensated", ran: true, error: state.error });
    expect(state.steps.map((s) => s.status)).toEqual(names.map((_, i) => (i <= badAt ? "compensated" : "pending")));
  });
});

test("a step without a compensation whose result cannot be stored fails once, and the steps before it are undone", async () => {
  const { id } = await sagas.startSaga(payment, { order: "date2", badAt: 2, bad: "date" });
  const state = await settle(id);
  expect(ofOrder("date2")).toEqual(["reserve", "charge", "ship", "undo-charge", "undo-reserve"]);
  expect(state.status).toBe("compensated");
  // Nothing to undo for "ship": it stays failed (its action ran, as `ran` says).
  expect(state.steps.map((s) => s.status)).toEqual(["compensated", "compensated", "failed"]);
  expect(state.steps[2]).toMatchObject({ ran: true, error: expect.stringMatching(/Date instance/) });
});

test("a result larger than the client's maxPayloadBytes fails the step once, naming the limit", async () => {
  const { id } = await sagas.startSaga(payment, { order: "large", badAt: 1, bad: "large" });
  const state = await settle(id);
  expect(ofOrder("large")).toEqual(["reserve", "charge", "undo-charge", "undo-reserve"]);
  expect(state.status).toBe("compensated");
  expect(state.error).toMatch(/step 1 \(charge\).*bytes, over the client's maxPayloadBytes of 65536/);
});

describe.each([
  ["plain JSON", "after the saga ended compensated"],
  ["plain JSON", "while the steps before it are being undone"],
  ["a Date", "after the saga ended compensated"],
  ["a Date", "while the steps before it are being undone"],
])("a cancel racing the action (it returns %s, %s)", (returns, when) => {
  test("when the sweeper fails the step first, the action that then returns is compensated once, after it ran", async () => {
    const order = `race-${returns === "a Date" ? "date" : "json"}-${when.startsWith("after") ? "ended" : "undoing"}`;
    const g = gate();
    const undo = gate();
    gates.set(order, g);
    gates.set(`${order}:undo`, undo);
    const ended = when.startsWith("after");
    const { id } = await sagas.startSaga(payment, {
      order,
      holdAt: 1,
      badAt: returns === "a Date" ? 1 : -1,
      bad: "date",
      ...(ended ? {} : { holdUndoAt: 0 }),
    });
    await until("charge is running", () => ofOrder(order).includes("charge"));
    const running = await getSaga(t.skipq, id);
    expect(running).toMatchObject({ status: "running", currentStep: 1 });
    await new Admin(t.skipq).cancelJob(running?.currentJobId as string);
    // The sweeper sees the cancelled job and starts compensating the steps before it.
    await until("swept", async () => {
      await sagas.runOnce();
      return (await getSaga(t.skipq, id))?.steps[1]?.status === "failed";
    });
    if (ended) {
      expect(await settle(id)).toMatchObject({ status: "compensated" });
    } else {
      await until("reserve being undone", () => ofOrder(order).includes("undo-reserve"));
    }
    g.open();
    await until("charge marked as run", async () => (await getSaga(t.skipq, id))?.steps[1]?.ran === true);
    undo.open();
    const state = await until("charge undone", async () => {
      const s = await settle(id);
      return s.steps[1]?.status === "compensated" ? s : undefined;
    });
    expect(state.status).toBe("compensated");
    expect(state.steps.map((s) => s.status)).toEqual(["compensated", "compensated", "pending"]);
    const events = ofOrder(order);
    expect(events.filter((e) => e === "charge")).toHaveLength(1);
    expect(events.filter((e) => e === "undo-charge")).toHaveLength(1);
    expect(events.filter((e) => e === "undo-reserve")).toHaveLength(1);
    expect(events.indexOf("undo-charge")).toBeGreaterThan(events.indexOf("charge returned"));
    expect(events).not.toContain("ship");
  });
});
