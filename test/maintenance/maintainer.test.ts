/**
 * One maintainer per client: the workers of one Skipq client (a saga runner's
 * step worker beside the application's) share one set of leader tasks — one
 * lease holder, one reaper — and when the worker running them stops, another
 * started worker of the client takes them over.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { defineSaga, Sagas } from "../../src/index.js";
import { type TestQueue, testQueue, until } from "../helpers.js";

let t: TestQueue;
beforeAll(async () => {
  t = await testQueue("maintainer");
});
afterAll(async () => {
  await t.cleanup();
});

const noop = defineSaga<Record<string, never>>("noop", [{ name: "only", async action() {} }]);

async function leaseHolders(): Promise<string[]> {
  const { rows } = await t.db.query(
    `SELECT holder FROM "${t.schema}".leaders WHERE name = 'maintainer' AND expires_at > now()`,
  );
  return rows.map((r) => r.holder);
}

test("a process with a worker and a saga runner runs one maintainer, which moves to the other worker when its own stops", async () => {
  const worker = t.skipq.worker({ queues: ["app"], listen: false, pollInterval: 50 });
  const sagas = new Sagas(t.skipq, [noop], { worker: { listen: false, pollInterval: 50 } });
  await worker.start();
  await sagas.start();
  try {
    const [first, second] = [worker.maintainer, sagas.worker.maintainer];
    // One set of leader tasks: both workers' maintainers show the same lease and reaper, the first one's.
    expect(first?.runsLeaderTasks).toBe(true);
    expect(second?.runsLeaderTasks).toBe(false);
    expect(second?.leader).toBe(first?.leader);
    expect(second?.reaper).toBe(first?.reaper);
    await until("the first worker leads", () => first?.leader.isLeader);
    expect(await leaseHolders()).toEqual([worker.id]);

    await worker.stop();
    // The saga runner's worker now runs its own tasks and takes the lease (given up by the first at its stop).
    expect(second?.runsLeaderTasks).toBe(true);
    await until("the saga worker leads", async () => (await leaseHolders()).includes(sagas.worker.id));
    expect(second?.leader.isLeader).toBe(true);
  } finally {
    await worker.stop();
    await sagas.stop();
  }
  expect(await leaseHolders()).toEqual([]);
});

test("workers whose maintenance is off take no part: a client's one maintainer runs with the worker that has one", async () => {
  const quiet = t.skipq.worker({ queues: ["q1"], listen: false, maintenance: false });
  const main = t.skipq.worker({ queues: ["q2"], listen: false });
  await quiet.start();
  await main.start();
  try {
    expect(quiet.maintainer).toBeUndefined();
    expect(main.maintainer?.runsLeaderTasks).toBe(true);
  } finally {
    await quiet.stop();
    await main.stop();
  }
});
