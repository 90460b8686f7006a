/**
 * A plain-SQL enqueue may store run_at = '-infinity' (runnable, the oldest of
 * all): the worker claims and runs it with a usable `job.runAt`, and the
 * counts that measure pending age still answer.
 */
import { expect, test } from "vitest";
import { Admin, type Job } from "../../src/index.js";
import { useTestQueue } from "../helpers.js";

const t = useTestQueue("infinite");

test("a job with run_at '-infinity' is claimed and run, and stats and overview still answer", async () => {
  await t.db.query(`INSERT INTO "${t.schema}".jobs (kind, run_at) VALUES ('old', '-infinity'), ('old', now())`);
  const admin = new Admin(t.skipq);
  const [stats] = await admin.stats();
  expect(stats?.pending).toBe(2);
  expect(stats?.oldestPendingSeconds).toBeGreaterThan(1e9);
  expect((await admin.overview())[0]?.oldestPendingSeconds).toBeGreaterThan(1e9);
  const seen: Job[] = [];
  const w = t.skipq.worker({ maintenance: false, listen: false, priorityAging: "1s" }).register("old", (_p, ctx) => {
    seen.push(ctx.job);
  });
  expect(await w.runOnce()).toBe(2);
  expect(seen[0]?.runAt.getTime()).toBe(-8.64e15);
  expect(Number.isFinite(seen[1]?.runAt.getTime())).toBe(true);
  await w.stop();
});
