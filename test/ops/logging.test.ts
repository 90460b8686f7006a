import { expect, test } from "vitest";
import { createLogger, defineJob, Skipq } from "../../src/index.js";
import { DATABASE_URL, schemaName, testQueue, until } from "../helpers.js";

test("createLogger writes one JSON line per event, and a handler's ctx.log carries job id, kind, attempt and worker", async () => {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ level: "debug", destination: { write: (s: string) => lines.push(JSON.parse(s)) } });
  const t = await testQueue("logging", { logger });
  const greet = defineJob<{ name: string }>("greet");
  const worker = t.skipq.worker({ workerId: "w-log" }).register(greet, async ({ name }, ctx) => {
    ctx.log.info({ name }, "greeting");
    if (ctx.attempt === 1) throw new Error("flaky");
  });
  try {
    const { id } = await t.skipq.enqueue(greet, { name: "ada" });
    await worker.runOnce();
    await t.db.query(`UPDATE "${t.schema}".jobs SET run_at = now() WHERE id = $1`, [id]);
    await worker.runOnce();
    const greetings = (await until("two greetings", () => {
      const found = lines.filter((l) => l.msg === "greeting");
      return found.length === 2 && found;
    })) as Array<Record<string, unknown>>;
    expect(greetings.map((l) => [l.jobId, l.kind, l.attempt, l.worker, l.name, l.level])).toEqual([
      [id, "greet", 1, "w-log", "ada", 30],
      [id, "greet", 2, "w-log", "ada", 30],
    ]);
    expect(typeof greetings[0]?.time).toBe("string");
    expect(greetings[0]?.pid).toBe(process.pid);
  } finally {
    await worker.stop();
    await t.cleanup();
  }
});

test("errors logged under err keep their message, type and stack", async () => {
  const lines: Array<Record<string, unknown>> = [];
  const logger = createLogger({ destination: { write: (s: string) => lines.push(JSON.parse(s)) } });
  logger.warn({ err: new TypeError("bad thing") }, "it failed");
  const err = lines[0]?.err as { message: string; type: string; stack: string };
  expect(err.message).toBe("bad thing");
  expect(err.type).toBe("TypeError");
  expect(err.stack).toContain("logging.test.ts");
  // A pino logger is accepted where skipq takes a Logger.
  expect(() =>
    new Skipq({ connectionString: DATABASE_URL, schema: schemaName("logtype"), logger }).close(),
  ).not.toThrow();
});
