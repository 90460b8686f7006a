/**
 * Per-attempt logs (docs/jobs.md): ctx.log lines are kept per attempt, capped
 * per attempt and per job, stored with the attempt's worker, start, end,
 * outcome and error, redacted like errors, shown by getJob and the CLI, and
 * moved to history with the job.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, type AttemptLog, defineJob, type Worker, type WorkerOptions } from "../../src/index.js";
import { skipq as cli } from "../cli/run.js";
import { DATABASE_URL, untilFinished, useTestQueue } from "../helpers.js";

const t = useTestQueue("logs");
let admin: Admin;
const workers: Worker[] = [];
beforeAll(async () => {
  admin = new Admin(t.skipq);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

function worker(queue: string, options: WorkerOptions = {}): Worker {
  const w = t.skipq.worker({ queues: [queue], pollInterval: 20, workerId: `w-${queue}`, ...options });
  workers.push(w);
  return w;
}

const finished = (id: string) => untilFinished(t.skipq, id);

const importCsv = defineJob<{ file: string; apiKey?: string; lines?: number; fail?: number }>("import-csv");

test("each attempt's lines are kept with its worker, start, end, outcome and error, and move to history", async () => {
  const w = worker("l1", { backoff: { baseMs: 1, jitter: 0 } }).register(importCsv, async (payload, ctx) => {
    ctx.log.info({ file: payload.file, attempt: ctx.attempt }, "starting import");
    ctx.log.debug({}, "debug lines are not kept");
    if (ctx.attempt === 1) {
      ctx.log.warn({ row: 17 }, "bad row");
      throw new Error("row 17 is malformed");
    }
    ctx.log.info({ rows: 120 }, "imported");
  });
  await w.start();
  const { id } = await t.skipq.enqueue(importCsv, { file: "a.csv" }, { queue: "l1" });
  const job = await finished(id);
  expect(job.status).toBe("completed");
  const logs = job.attempt_logs as AttemptLog[];
  expect(logs).toHaveLength(2);
  const [first, second] = logs as [AttemptLog, AttemptLog];
  expect(first).toMatchObject({ attempt: 1, worker: "w-l1", outcome: "failed", dropped: 0 });
  expect(first.error).toMatch(/row 17 is malformed/);
  expect(first.lines.map((l) => [l.level, l.msg])).toEqual([
    ["info", "starting import"],
    ["warn", "bad row"],
  ]);
  expect(first.lines[0]).toMatchObject({ file: "a.csv", attempt: 1 });
  expect(second).toMatchObject({ attempt: 2, outcome: "completed", error: null });
  expect(second.lines.map((l) => l.msg)).toEqual(["starting import", "imported"]);
  for (const log of logs) expect(Date.parse(log.endedAt)).toBeGreaterThanOrEqual(Date.parse(log.startedAt as string));
  const { rows } = await t.db.query(
    `SELECT jsonb_array_length(attempt_logs) AS n FROM "${t.schema}".job_history WHERE id = $1`,
    [id],
  );
  expect(rows[0].n).toBe(2);
});

test("lines are capped per attempt (the rest counted as dropped) and a job keeps the lines of its 10 most recent attempts", async () => {
  const w = worker("l2", { attemptLogLines: 5, backoff: { baseMs: 1, jitter: 0 } }).register(
    importCsv,
    (payload, ctx) => {
      for (let i = 0; i < (payload.lines ?? 0); i++) ctx.log.info({ i }, `line ${i}`);
      if (ctx.attempt <= (payload.fail ?? 0)) throw new Error(`attempt ${ctx.attempt} failed`);
    },
  );
  await w.start();
  const { id } = await t.skipq.enqueue(importCsv, { file: "b", lines: 8, fail: 11 }, { queue: "l2", maxAttempts: 12 });
  const job = await finished(id);
  expect(job.status).toBe("completed");
  const logs = job.attempt_logs as AttemptLog[];
  // Every attempt is kept (up to 25); the two oldest keep who, when, outcome and error, their lines counted.
  expect(logs.map((l) => l.attempt)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  for (const log of logs.slice(0, 2)) {
    expect(log).toMatchObject({ lines: [], dropped: 8, outcome: "failed" });
    expect(log.error).toMatch(/attempt \d+ failed/);
  }
  for (const log of logs.slice(2)) {
    expect(log.lines.map((l) => l.msg)).toEqual(["line 0", "line 1", "line 2", "line 3", "line 4"]);
    expect(log.dropped).toBe(3);
  }
});

test("secrets are redacted from kept lines like from errors", async () => {
  const w = worker("l3").register(importCsv, (payload, ctx) => {
    ctx.log.info({ token: "tok-123456", nested: { password: "hunter22" } }, `calling with ${payload.apiKey}`);
    ctx.log.error({ err: new Error(`refused key ${payload.apiKey}`) }, "upstream said no");
  });
  await w.start();
  const { id } = await t.skipq.enqueue(importCsv, { file: "c", apiKey: "sk-live-abcdef" }, { queue: "l3" });
  const job = await finished(id);
  const text = JSON.stringify(job.attempt_logs);
  expect(text).not.toContain("sk-live-abcdef");
  expect(text).not.toContain("tok-123456");
  expect(text).not.toContain("hunter22");
  expect(text).toContain("calling with [redacted]");
});

test("a job that writes no lines stores no log, and attemptLogLines: 0 keeps none", async () => {
  const quiet = worker("l4").register(importCsv, (_payload, ctx) => {
    void ctx.log; // read but unused
  });
  await quiet.start();
  const off = worker("l5", { attemptLogLines: 0 }).register(importCsv, (_payload, ctx) => {
    ctx.log.info({}, "to the worker's logger only");
  });
  await off.start();
  const a = await t.skipq.enqueue(importCsv, { file: "d" }, { queue: "l4" });
  const b = await t.skipq.enqueue(importCsv, { file: "e" }, { queue: "l5" });
  expect((await finished(a.id)).attempt_logs).toBeNull();
  expect((await finished(b.id)).attempt_logs).toBeNull();
});

test("skipq job <id> prints each attempt's lines under its worker, times and outcome; --json has attemptLogs", async () => {
  const w = worker("l6", { backoff: { baseMs: 1, jitter: 0 } }).register(importCsv, (_payload, ctx) => {
    ctx.log.info({ step: 1 }, "fetching");
    if (ctx.attempt === 1) throw new Error("timeout talking to bucket");
  });
  await w.start();
  const { id } = await t.skipq.enqueue(importCsv, { file: "f" }, { queue: "l6" });
  await finished(id);
  const env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  const text = await cli(["job", id], env);
  expect(text.code).toBe(0);
  expect(text.stdout).toMatch(
    /attempt logs:\nattempt 1 on w-l6, \S+ → \S+: failed\n {2}\S+ info {2}fetching \{"step":1\}/,
  );
  expect(text.stdout).toMatch(/ {2}error: Error: timeout talking to bucket/);
  expect(text.stdout).toMatch(/attempt 2 on w-l6, \S+ → \S+: completed/);
  // The attempts table, newest first, before the logs.
  const attempts = text.stdout.slice(
    text.stdout.indexOf("attempts (newest first):"),
    text.stdout.indexOf("attempt logs:"),
  );
  expect(attempts).toMatch(
    /│ 2 +│ \S+ +│ \S+ +│ w-l6 +│ completed +│ - +│\n[^\n]*│ 1 +│ \S+ +│ \S+ +│ w-l6 +│ failed +│ Error: timeout talking to bucket/,
  );
  const json = JSON.parse((await cli(["job", id, "--json"], env)).stdout);
  expect(json.attemptLogs.map((l: AttemptLog) => l.outcome)).toEqual(["failed", "completed"]);
});

test("an operator's retry keeps the logs of the attempts before it", async () => {
  const w = worker("l7").register(importCsv, (_payload, ctx) => {
    ctx.log.info({}, `attempt ${ctx.attempt}`);
    throw new Error("always");
  });
  await w.start();
  const { id } = await t.skipq.enqueue(importCsv, { file: "g" }, { queue: "l7", maxAttempts: 1 });
  expect((await finished(id)).status).toBe("dead");
  await w.stop();
  await admin.retryJob(id);
  const logs = ((await admin.getJob(id))?.attempt_logs ?? []) as AttemptLog[];
  expect(logs.map((l) => l.outcome)).toEqual(["failed"]);
});

test("every attempt that did not simply succeed is recorded without ctx.log lines; a plain success adds none", async () => {
  const w = worker("l8", { backoff: { baseMs: 1, jitter: 0 } }).register(importCsv, (_payload, ctx) => {
    if (ctx.attempt <= 2) throw new Error(`upstream 503 on attempt ${ctx.attempt}`);
  });
  await w.start();
  const { id } = await t.skipq.enqueue(importCsv, { file: "h" }, { queue: "l8" });
  const job = await finished(id);
  expect(job.status).toBe("completed");
  const logs = job.attempt_logs as AttemptLog[];
  expect(logs.map((l) => [l.attempt, l.worker, l.outcome, l.lines.length])).toEqual([
    [1, "w-l8", "failed", 0],
    [2, "w-l8", "failed", 0],
  ]);
  expect(logs[0]?.error).toMatch(/^Error: upstream 503 on attempt 1/);
  expect(logs[1]?.error).toMatch(/^Error: upstream 503 on attempt 2/);
  for (const log of logs) expect(Date.parse(log.endedAt)).toBeGreaterThanOrEqual(Date.parse(log.startedAt as string));
});

test("a job keeps its 25 most recent attempts, the last one that died included", async () => {
  const w = worker("l9", { backoff: { baseMs: 1, maxMs: 1, jitter: 0 } }).register(importCsv, (_payload, ctx) => {
    throw new Error(`attempt ${ctx.attempt} failed`);
  });
  await w.start();
  const { id } = await t.skipq.enqueue(importCsv, { file: "i" }, { queue: "l9", maxAttempts: 30 });
  const job = await finished(id);
  expect(job.status).toBe("dead");
  const logs = job.attempt_logs as AttemptLog[];
  expect(logs.map((l) => l.attempt)).toEqual(Array.from({ length: 25 }, (_, i) => i + 6));
  expect(logs.at(-1)).toMatchObject({ attempt: 30, outcome: "failed" });
  expect(logs.at(-1)?.error).toMatch(/attempt 30 failed/);
});

test("an attempt's outcome is never refused for the attempt_logs plain SQL stored: any shape is kept, the entry appended", async () => {
  const stored = ['"as text"', '{"not":"a list"}', "[]", JSON.stringify(Array.from({ length: 30 }, (_, i) => i))];
  const ids: string[] = [];
  for (const value of stored) {
    const { id } = await t.skipq.enqueue(importCsv, { file: "j" }, { queue: "l10", maxAttempts: 1 });
    await t.db.query(`UPDATE "${t.schema}".jobs SET attempt_logs = $2::jsonb WHERE id = $1`, [id, value]);
    ids.push(id);
  }
  const w = worker("l10").register(importCsv, () => {
    throw new Error("refused");
  });
  await w.start();
  const logs = await Promise.all(ids.map(async (id) => (await finished(id)).attempt_logs as unknown[]));
  for (const list of logs) expect(list.at(-1)).toMatchObject({ attempt: 1, worker: "w-l10", outcome: "failed" });
  expect(logs[0]?.slice(0, -1)).toEqual(["as text"]);
  expect(logs[1]?.slice(0, -1)).toEqual([{ not: "a list" }]);
  expect(logs[2]).toHaveLength(1);
  // 30 stored + 1, cut to the 25 most recent.
  expect(logs[3]?.slice(0, -1)).toEqual(Array.from({ length: 24 }, (_, i) => i + 6));
});
