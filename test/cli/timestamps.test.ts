/**
 * Timestamps JavaScript cannot hold: node-postgres turns 'infinity' into the
 * number Infinity and a year past +275760 into an Invalid Date. A job inserted
 * by plain SQL with either must not break `skipq jobs`, `job` or `stats`.
 */
import { beforeAll, expect, test } from "vitest";
import { DATABASE_URL, useTestQueue } from "../helpers.js";
import { skipq } from "./run.js";

const t = useTestQueue("cli-timestamps");
let env: Record<string, string>;
let forever: string;
let farFuture: string;

beforeAll(async () => {
  env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  const insert = async (runAt: string) =>
    (
      await t.db.query(`INSERT INTO "${t.schema}".jobs (kind, queue, run_at) VALUES ('k', 'q2', $1) RETURNING id`, [
        runAt,
      ])
    ).rows[0].id as string;
  forever = await insert("infinity");
  farFuture = await insert("294276-12-31 00:00:00+00");
});

test("skipq jobs lists a job with run_at 'infinity' or beyond the JavaScript Date range", async () => {
  const human = await skipq(["jobs"], env);
  expect(human.stderr).toBe("");
  expect(human.code).toBe(0);
  expect(human.stdout).toContain("infinity");
  expect(human.stdout).toContain("after +275760-09-13T00:00:00.000Z");
  const json = await skipq(["jobs", "--json"], env);
  expect(json.code).toBe(0);
  const runAt = Object.fromEntries(
    (JSON.parse(json.stdout).jobs as Array<{ id: string; runAt: string }>).map((j) => [j.id, j.runAt]),
  );
  expect(runAt).toEqual({ [forever]: "infinity", [farFuture]: "after +275760-09-13T00:00:00.000Z" });
});

test("skipq job shows such a job, and skipq stats counts it as scheduled", async () => {
  for (const id of [forever, farFuture]) {
    const result = await skipq(["job", id], env);
    expect(result.stderr).toBe("");
    expect(result.code).toBe(0);
  }
  expect(JSON.parse((await skipq(["job", forever, "--json"], env)).stdout).runAt).toBe("infinity");
  const stats = await skipq(["stats", "--json"], env);
  expect(stats.code).toBe(0);
  expect(JSON.parse(stats.stdout).queues).toEqual([expect.objectContaining({ queue: "q2", pending: 0, scheduled: 2 })]);
});
