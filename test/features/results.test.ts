/**
 * Results (docs/jobs.md): a handler's return value is stored with the job,
 * capped by maxResultBytes; an oversized or non-JSON result fails the attempt
 * with a clear error; a handler that returns nothing writes no result; the
 * CLI and Admin show it; the SQL protocol can store one too.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import { Admin, defineJob, type Worker, type WorkerOptions } from "../../src/index.js";
import { skipq as cli } from "../cli/run.js";
import { DATABASE_URL, until, untilFinished, useTestQueue } from "../helpers.js";

const t = useTestQueue("results");
let admin: Admin;
const workers: Worker[] = [];
beforeAll(async () => {
  admin = new Admin(t.skipq);
});
afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop()));
});

function worker(queue: string, options: WorkerOptions = {}): Worker {
  const w = t.skipq.worker({ queues: [queue], pollInterval: 50, ...options });
  workers.push(w);
  return w;
}

const finished = (id: string) => untilFinished(t.skipq, id);

/** The stored result column as SQL sees it: null for SQL NULL, else its JSON text. */
async function storedResult(id: string): Promise<string | null> {
  const { rows } = await t.db.query(`SELECT result::text AS r FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  return rows[0].r;
}

test("a handler's return value is stored with the job and shown by getJob", async () => {
  const w = worker("r1").register(defineJob<{ url: string }>("thumbnail"), async (payload) => ({
    url: `${payload.url}.thumb.png`,
    sizes: [64, 128],
    nested: { ok: true, none: null },
  }));
  await w.start();
  const { id } = await t.skipq.enqueue("thumbnail", { url: "cat" }, { queue: "r1" });
  const job = await finished(id);
  expect(job.status).toBe("completed");
  expect(job.result).toEqual({ url: "cat.thumb.png", sizes: [64, 128], nested: { ok: true, none: null } });
});

test("returning nothing writes no result; returning null stores JSON null; scalars are kept", async () => {
  const values: Record<string, unknown> = { none: undefined, nul: null, num: 42, str: "done", bool: false };
  const w = worker("r2").register(defineJob<{ key: string }>("value"), (payload) => values[payload.key]);
  await w.start();
  const ids: Record<string, string> = {};
  for (const key of Object.keys(values)) ids[key] = (await t.skipq.enqueue("value", { key }, { queue: "r2" })).id;
  for (const id of Object.values(ids)) await finished(id);
  expect(await storedResult(ids.none as string)).toBeNull();
  expect(await storedResult(ids.nul as string)).toBe("null");
  expect(await storedResult(ids.num as string)).toBe("42");
  expect(await storedResult(ids.str as string)).toBe('"done"');
  expect(await storedResult(ids.bool as string)).toBe("false");
});

test("successes with and without results recorded in one flush each keep their own", async () => {
  const w = worker("r3", { concurrency: 50 }).register(defineJob<{ i: number }>("mixed"), (payload) =>
    payload.i % 2 === 0 ? { i: payload.i } : undefined,
  );
  const results = await t.skipq.enqueueMany(
    Array.from({ length: 200 }, (_, i) => ({ job: "mixed", payload: { i }, queue: "r3" })),
  );
  await w.start();
  await until("all completed", async () => {
    const { rows } = await t.db.query(
      `SELECT count(*)::int AS n FROM "${t.schema}".job_history WHERE queue = 'r3' AND status = 'completed'`,
    );
    return rows[0].n === 200;
  });
  const { rows } = await t.db.query(`SELECT id, result FROM "${t.schema}".job_history WHERE queue = 'r3' ORDER BY id`);
  for (const [i, r] of rows.entries()) {
    expect(r.id).toBe(results[i]?.id);
    expect(r.result).toEqual(i % 2 === 0 ? { i } : null);
  }
});

test("a result over maxResultBytes fails the attempt with ResultTooLargeError and is retried", async () => {
  let calls = 0;
  const w = worker("r4", { maxResultBytes: 100, backoff: { baseMs: 1, jitter: 0 } }).register("big", () => {
    calls++;
    return calls === 1 ? { blob: "x".repeat(200) } : { blob: "small" };
  });
  await w.start();
  const { id } = await t.skipq.enqueue("big", {}, { queue: "r4" });
  const job = await finished(id);
  expect(job.status).toBe("completed");
  expect(job.attempts).toBe(2);
  expect(job.result).toEqual({ blob: "small" });
  expect(job.last_error).toMatch(
    /ResultTooLargeError: the handler's result is 211 bytes, over the worker's maxResultBytes of 100/,
  );
});

test("a result JSON cannot store unchanged fails the attempt with ResultNotJsonError naming the path", async () => {
  const w = worker("r5").register(defineJob<{ kind: string }>("odd"), (payload) => {
    if (payload.kind === "date") return { at: new Date(0) };
    if (payload.kind === "bigint") return { n: 1n };
    if (payload.kind === "nan") return [1, Number.NaN];
    return { kept: 1, omitted: undefined };
  });
  await w.start();
  const enqueue = (kind: string) => t.skipq.enqueue("odd", { kind }, { queue: "r5", maxAttempts: 1 });
  const date = await finished((await enqueue("date")).id);
  expect(date.status).toBe("dead");
  expect(date.last_error).toMatch(/ResultNotJsonError: the handler's result\.at is a Date instance/);
  expect((await finished((await enqueue("bigint")).id)).last_error).toMatch(/result\.n is a BigInt/);
  expect((await finished((await enqueue("nan")).id)).last_error).toMatch(/result\[1\] is NaN/);
  // An undefined property is left out, as JSON.stringify does.
  const omitted = await finished((await enqueue("omitted")).id);
  expect(omitted.status).toBe("completed");
  expect(omitted.result).toEqual({ kept: 1 });
});

test("a failed or dead job has no result", async () => {
  const w = worker("r6").register("fails", () => {
    throw new Error("nope");
  });
  await w.start();
  const { id } = await t.skipq.enqueue("fails", {}, { queue: "r6", maxAttempts: 1 });
  const job = await finished(id);
  expect(job.status).toBe("dead");
  expect(job.result).toBeNull();
});

test("skipq job <id> prints the result (text and --json)", async () => {
  const w = worker("r7").register("answer", () => ({ answer: 42 }));
  await w.start();
  const { id } = await t.skipq.enqueue("answer", {}, { queue: "r7" });
  await finished(id);
  const env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
  const json = await cli(["job", id, "--json"], env);
  expect(json.code).toBe(0);
  expect(JSON.parse(json.stdout)).toMatchObject({ id, status: "completed", result: { answer: 42 }, progress: null });
  const text = await cli(["job", id], env);
  expect(text.stdout).toMatch(/result:\n\{\n {2}"answer": 42\n\}/);
});

test("the SQL protocol stores a result with skipq_complete(id, lease, result)", async () => {
  const { id } = await t.skipq.enqueue("polyglot", {}, { queue: "r8" });
  const s = `"${t.schema}"`;
  const { rows } = await t.db.query(`SELECT id, lease FROM ${s}.skipq_claim(ARRAY['r8'], 1, 'psql', 30000)`);
  expect(rows[0].id).toBe(id);
  const stale = await t.db.query(`SELECT ${s}.skipq_complete($1, $2, '{"x":1}') AS ok`, [id, "1"]);
  expect(stale.rows[0].ok).toBe(false);
  const done = await t.db.query(`SELECT ${s}.skipq_complete($1, $2, '{"from":"sql"}') AS ok`, [id, rows[0].lease]);
  expect(done.rows[0].ok).toBe(true);
  expect((await admin.getJob(id))?.result).toEqual({ from: "sql" });
});
