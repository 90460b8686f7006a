/**
 * Pipelined runs: the relay's use of a sink's `deliverBatch` (only the
 * confirmed prefix of a key's run is marked delivered, the first unconfirmed
 * event is retried first, the rest handed back unattempted), the confirm
 * window and prefix logic the broker sinks share (src/outbox/sinks/pipeline.ts),
 * and how a relay continues hot keys without losing sight of new ones.
 */
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type BatchOutcome, Outbox, type OutboxEvent, type OutboxSink } from "../../src/index.js";
import { ConfirmWindow, pipelineRun } from "../../src/outbox/sinks/pipeline.js";
import { type TestQueue, testQueue } from "../helpers.js";

const n = (e: OutboxEvent) => (e.event as { n: number }).n;

function event(id: number, key = "k"): OutboxEvent {
  return { id: String(id), topic: "t", key, event: { n: id }, headers: {}, attempt: 1, createdAt: new Date() };
}

/** A send whose answers the test gives by hand, in any order. */
function manualSend() {
  const sent: OutboxEvent[] = [];
  const answers = new Map<string, (error?: unknown) => void>();
  return {
    sent,
    send: (e: OutboxEvent, done: (error?: unknown) => void) => {
      sent.push(e);
      answers.set(e.id, done);
    },
    answer: (id: number, error?: unknown) => answers.get(String(id))?.(error),
  };
}

const tick = () => new Promise((r) => setImmediate(r));

describe("pipelineRun (the broker sinks' pipelined run)", () => {
  test("only a prefix confirmed without a gap counts, whatever order the confirmations arrive in", async () => {
    const m = manualSend();
    const run = pipelineRun(
      "test",
      [event(1), event(2), event(3)],
      AbortSignal.timeout(5000),
      new ConfirmWindow(10),
      m.send,
    );
    await tick();
    expect(m.sent.map((e) => e.id)).toEqual(["1", "2", "3"]);
    m.answer(3);
    m.answer(1);
    m.answer(2);
    expect(await run).toEqual({ confirmed: 3 });
  });

  test("a refusal stops the run at the refused event and names the later events the destination accepted anyway", async () => {
    const m = manualSend();
    const run = pipelineRun(
      "test",
      [event(1), event(2), event(3), event(4)],
      AbortSignal.timeout(5000),
      new ConfirmWindow(10),
      m.send,
    );
    await tick();
    m.answer(1);
    m.answer(2, new Error("nack"));
    m.answer(3);
    m.answer(4);
    const outcome = await run;
    expect(outcome.confirmed).toBe(1);
    expect(String(outcome.error)).toMatch(/refused outbox event 2 but accepted 2 later event\(s\) of key "k"/);
    expect((outcome.error as Error).cause).toEqual(new Error("nack"));
  });

  test("nothing more of a key is sent once one of its events was refused", async () => {
    const m = manualSend();
    const window = new ConfirmWindow(1);
    const run = pipelineRun("test", [event(1), event(2), event(3)], AbortSignal.timeout(5000), window, m.send);
    await tick();
    expect(m.sent.map((e) => e.id)).toEqual(["1"]);
    m.answer(1, new Error("channel closed"));
    const outcome = await run;
    expect(m.sent.map((e) => e.id)).toEqual(["1"]);
    expect(outcome).toMatchObject({ confirmed: 0 });
  });

  test("the window bounds unconfirmed sends across keys, and each key's events still leave in order", async () => {
    const m = manualSend();
    const window = new ConfirmWindow(2);
    const signal = AbortSignal.timeout(5000);
    const a = pipelineRun("test", [event(1, "a"), event(3, "a"), event(5, "a")], signal, window, m.send);
    const b = pipelineRun("test", [event(2, "b"), event(4, "b")], signal, window, m.send);
    await tick();
    expect(m.sent).toHaveLength(2);
    for (let i = 0; i < 5; i++) {
      const unanswered = m.sent[i] as OutboxEvent;
      m.answer(Number(unanswered.id));
      await tick();
      expect(m.sent.length).toBeLessThanOrEqual(i + 3);
    }
    expect(await a).toEqual({ confirmed: 3 });
    expect(await b).toEqual({ confirmed: 2 });
    expect(m.sent.filter((e) => e.key === "a").map(n)).toEqual([1, 3, 5]);
    expect(m.sent.filter((e) => e.key === "b").map(n)).toEqual([2, 4]);
  });

  test("a destination that never answers: the run ends when the signal aborts, with nothing confirmed after the gap", async () => {
    const m = manualSend();
    const controller = new AbortController();
    const run = pipelineRun("test", [event(1), event(2)], controller.signal, new ConfirmWindow(10), m.send);
    await tick();
    m.answer(2);
    controller.abort();
    const outcome = await run;
    expect(outcome.confirmed).toBe(0);
    expect(String(outcome.error)).toMatch(/did not confirm outbox event 1 but accepted 1 later event/);
    expect(String((outcome.error as Error).cause)).toMatch(/did not confirm outbox event 1 in time/);
  });
});

describe("the relay with a pipelining sink", () => {
  let t: TestQueue;
  let outbox: Outbox;
  beforeAll(async () => {
    t = await testQueue("outbox_pipeline");
    outbox = new Outbox(t.skipq);
  });
  afterAll(async () => {
    await t.cleanup();
  });

  /** A sink whose deliverBatch confirms what `outcome` says for each run, recording the runs it was given. */
  function batchSink(outcome: (events: ReadonlyArray<OutboxEvent>) => BatchOutcome | Promise<BatchOutcome>) {
    const runs: string[][] = [];
    const single: string[] = [];
    const sink: OutboxSink = {
      name: "batch",
      async deliver(e) {
        single.push(`${e.key}${n(e)}`);
      },
      async deliverBatch(events) {
        runs.push(events.map((e) => `${e.key}${n(e)}`));
        return outcome(events);
      },
    };
    return { sink, runs, single };
  }

  async function state() {
    const { rows } = await t.db.query(
      `SELECT key || (event->>'n') AS e, delivered_at IS NOT NULL AS delivered, attempts, lease IS NOT NULL AS leased,
              last_error FROM "${t.schema}".outbox ORDER BY id`,
    );
    return rows;
  }

  test("a sink that fails mid-run: the prefix before the failure is delivered, nothing after it is, and the failed event is retried first", async () => {
    await t.db.query(`TRUNCATE "${t.schema}".outbox`);
    for (let i = 1; i <= 5; i++) await outbox.publish(t.skipq.pool, "t", "k", { n: i });
    await outbox.publish(t.skipq.pool, "t", "j", { n: 1 });
    await outbox.publish(t.skipq.pool, "t", "j", { n: 2 });
    const { sink, runs } = batchSink((events) =>
      events[0]?.key === "k" ? { confirmed: 2, error: new Error("broker refused k3") } : { confirmed: events.length },
    );
    const relay = outbox.relay({ sink, backoff: { baseMs: 60_000 } });
    expect(await relay.runOnce()).toBe(7);
    expect(runs.sort()).toEqual([
      ["j1", "j2"],
      ["k1", "k2", "k3", "k4", "k5"],
    ]);
    expect(await state()).toEqual([
      { e: "k1", delivered: true, attempts: 1, leased: false, last_error: null },
      { e: "k2", delivered: true, attempts: 1, leased: false, last_error: null },
      { e: "k3", delivered: false, attempts: 1, leased: false, last_error: expect.stringMatching(/broker refused k3/) },
      { e: "k4", delivered: false, attempts: 0, leased: false, last_error: null },
      { e: "k5", delivered: false, attempts: 0, leased: false, last_error: null },
      { e: "j1", delivered: true, attempts: 1, leased: false, last_error: null },
      { e: "j2", delivered: true, attempts: 1, leased: false, last_error: null },
    ]);
    expect(relay.stats).toMatchObject({ claimed: 7, delivered: 4, failed: 1 });
    // k3 waits for its retry, and k4 must not overtake it.
    expect(await relay.runOnce()).toBe(0);
    await t.db.query(`UPDATE "${t.schema}".outbox SET run_at = now()`);
    const retry = batchSink((events) => ({ confirmed: events.length }));
    const relay2 = outbox.relay({ sink: retry.sink });
    while ((await relay2.runOnce()) > 0);
    expect(retry.runs).toEqual([["k3", "k4", "k5"]]);
  });

  test("a deliverBatch that rejects, or reports more than it was given, marks nothing delivered", async () => {
    for (const outcome of [
      () => Promise.reject(new Error("connection lost")),
      () => ({ confirmed: 9 }),
      () => ({ confirmed: 1.5 }),
    ]) {
      await t.db.query(`TRUNCATE "${t.schema}".outbox`);
      for (let i = 1; i <= 3; i++) await outbox.publish(t.skipq.pool, "t", "k", { n: i });
      const relay = outbox.relay({ sink: batchSink(outcome).sink, backoff: { baseMs: 60_000 } });
      expect(await relay.runOnce()).toBe(3);
      expect((await state()).map((r) => [r.e, r.delivered, r.attempts])).toEqual([
        ["k1", false, 1],
        ["k2", false, 0],
        ["k3", false, 0],
      ]);
    }
  });

  test("a run that comes back short without an error counts as a failure of its first unconfirmed event", async () => {
    await t.db.query(`TRUNCATE "${t.schema}".outbox`);
    for (let i = 1; i <= 3; i++) await outbox.publish(t.skipq.pool, "t", "k", { n: i });
    const relay = outbox.relay({ sink: batchSink(() => ({ confirmed: 1 })).sink });
    await relay.runOnce();
    const rows = await state();
    expect(rows.map((r) => [r.e, r.delivered, r.attempts])).toEqual([
      ["k1", true, 1],
      ["k2", false, 1],
      ["k3", false, 0],
    ]);
    expect(rows[1]?.last_error).toMatch(/confirmed 1 of 3/);
  });

  test("pipeline: false sends one event at a time through deliver, and a lone event never goes through deliverBatch", async () => {
    await t.db.query(`TRUNCATE "${t.schema}".outbox`);
    for (let i = 1; i <= 3; i++) await outbox.publish(t.skipq.pool, "t", "k", { n: i });
    await outbox.publish(t.skipq.pool, "t", "j", { n: 1 });
    const strict = batchSink((events) => ({ confirmed: events.length }));
    const relay = outbox.relay({ sink: strict.sink, pipeline: false });
    while ((await relay.runOnce()) > 0);
    expect(strict.runs).toEqual([]);
    expect(strict.single.filter((e) => e.startsWith("k"))).toEqual(["k1", "k2", "k3"]);
    const piped = batchSink((events) => ({ confirmed: events.length }));
    await t.db.query(`UPDATE "${t.schema}".outbox SET delivered_at = NULL`);
    const relay2 = outbox.relay({ sink: piped.sink });
    while ((await relay2.runOnce()) > 0);
    expect(piped.runs).toEqual([["k1", "k2", "k3"]]);
    expect(piped.single).toEqual(["j1"]);
  });

  test("a relay continuing a hot key claims a key published meanwhile at the latest when the hot key runs dry, in order", async () => {
    await t.db.query(`TRUNCATE "${t.schema}".outbox`);
    for (let i = 1; i <= 6; i++) await outbox.publish(t.skipq.pool, "t", "hot", { n: i });
    const order: string[] = [];
    const sink: OutboxSink = {
      name: "recording",
      async deliver(e) {
        order.push(`${e.key}${n(e)}`);
      },
    };
    // A long pollInterval: no time-based rescan happens during the test.
    const relay = outbox.relay({ sink, perKeyBatch: 2, pollInterval: "1h" });
    expect(await relay.runOnce()).toBe(2);
    await outbox.publish(t.skipq.pool, "t", "new", { n: 1 });
    let passes = 0;
    while ((await relay.runOnce()) > 0) passes++;
    expect(order.filter((e) => e.startsWith("hot"))).toEqual(["hot1", "hot2", "hot3", "hot4", "hot5", "hot6"]);
    expect(order).toContain("new1");
    expect(passes).toBeLessThanOrEqual(3);
    expect((await outbox.backlog()).undelivered).toBe(0);
  });
});
