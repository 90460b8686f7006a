/** `skipq saga <id>` through the built binary: a saga's state for people and for scripts. */
import { beforeAll, expect, test } from "vitest";
import { defineSaga, Sagas } from "../../src/index.js";
import { DATABASE_URL, useTestQueue } from "../helpers.js";
import { skipq } from "./run.js";

const payment = defineSaga<{ amount: number }>("payment", [
  { name: "hold", action: ({ input }) => ({ held: input.amount }), compensate: () => undefined },
  { name: "capture", action: () => ({ captured: true }) },
]);

const t = useTestQueue("cli-saga");
let env: Record<string, string>;
beforeAll(async () => {
  env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
});

test("saga <id> shows the saga's status, its steps and the job that runs next", async () => {
  const sagas = new Sagas(t.skipq, [payment], { worker: { listen: false, maintenance: false } });
  const { id } = await sagas.startSaga(payment, { amount: 42 });
  expect(await sagas.worker.runOnce()).toBe(1);
  const json = await skipq(["saga", id, "--json"], env);
  expect(json.stderr).toBe("");
  expect(JSON.parse(json.stdout)).toMatchObject({
    id,
    name: "payment",
    status: "running",
    input: { amount: 42 },
    currentStep: 1,
    currentJobId: expect.stringMatching(/^\d+$/),
    steps: [
      { name: "hold", status: "completed", result: { held: 42 } },
      { name: "capture", status: "pending" },
    ],
  });
  const human = await skipq(["saga", id], env);
  expect(human.code).toBe(0);
  expect(human.stdout).toContain(`saga ${id} (payment): running, step 1`);
  expect(human.stdout).toMatch(/hold\s.*completed\s.*\{"held":42\}/);
  await sagas.stop();
});

test("saga <id> exits 1 for an unknown saga and 2 for an id that is not a number", async () => {
  const missing = await skipq(["saga", "999999"], env);
  expect(missing.code).toBe(1);
  expect(missing.stderr).toContain("saga 999999 does not exist");
  const bad = await skipq(["saga", "abc"], env);
  expect(bad.code).toBe(2);
  expect(bad.stderr).toContain("not a positive whole number");
});
