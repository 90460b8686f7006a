/**
 * Bad input through the built binary: every case exits non-zero with one
 * line on stderr that says what is wrong and what to do, and writes nothing
 * (checked in the database, not assumed).
 */
import { writeFile } from "node:fs/promises";
import os from "node:os";
import path from "node:path";
import { beforeAll, describe, expect, test } from "vitest";
import { DATABASE_URL, schemaName, useTestQueue } from "../helpers.js";
import { type Result, skipq } from "./run.js";

const t = useTestQueue("cli-bad-input");
let env: Record<string, string>;

beforeAll(async () => {
  env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
});

async function jobCount(): Promise<number> {
  const { rows } = await t.db.query(`SELECT count(*)::int AS n FROM "${t.schema}".all_jobs`);
  return rows[0].n;
}

/** One line on stderr, prefixed, matching `pattern`; nothing on stdout; the given exit code. */
function expectOneLineError(result: Result, code: number, pattern: RegExp): void {
  expect(result.stdout).toBe("");
  const lines = result.stderr.trim().split("\n");
  expect(lines, result.stderr).toHaveLength(1);
  expect(lines[0]).toMatch(/^skipq: /);
  expect(lines[0]).toMatch(pattern);
  expect(result.code).toBe(code);
}

describe.concurrent("rejected before anything is written", () => {
  const cases: Array<[string, string[], number, RegExp]> = [
    ["invalid JSON payload", ["enqueue", "x", "--payload", "{to: ada}"], 2, /--payload is not valid JSON.*quote it/],
    ["payload JSON cannot store", ["enqueue", "x", "--payload", '{"a":"\\u0000"}'], 2, /NUL character/],
    ["negative delay", ["enqueue", "x", "--delay", "-5s"], 2, /--delay must be zero or more, got "-5s"/],
    ["negative delay with =", ["enqueue", "x", "--delay=-5s"], 2, /--delay must be zero or more/],
    [
      "nonsense delay",
      ["enqueue", "x", "--delay", "5 parsecs"],
      2,
      /--delay "5 parsecs" is not a duration: use .*"10s"/,
    ],
    [
      "delay and run-at together",
      ["enqueue", "x", "--delay", "5s", "--run-at", "2030-01-01T00:00:00Z"],
      2,
      /either --delay or --run-at/,
    ],
    [
      "unparseable run-at",
      ["enqueue", "x", "--run-at", "next tuesday"],
      2,
      /--run-at "next tuesday" is not an ISO 8601 time/,
    ],
    ["priority out of range", ["enqueue", "x", "--priority", "40000"], 2, /--priority must be from -32768 to 32767/],
    ["priority not a number", ["enqueue", "x", "--priority", "high"], 2, /--priority "high" is not a whole number/],
    ["kind with odd characters", ["enqueue", "send email; drop table"], 2, /kind name .* is not allowed/],
    ["queue with odd characters", ["enqueue", "x", "--queue", "a b"], 2, /queue name "a b" is not allowed/],
    ["unknown command", ["stast"], 2, /unknown command 'stast' \(did you mean stats\?\)/],
    ["unknown flag", ["enqueue", "x", "--prioity", "1"], 2, /unknown option '--prioity' \(did you mean --priority\?\)/],
    [
      "unknown status",
      ["jobs", "--status", "deadd"],
      2,
      /--status "deadd" is not a job status \(did you mean dead\?\)/,
    ],
    ["job id not a number", ["job", "abc"], 2, /job id "abc" is not a positive whole number/],
    ["retry with nothing to retry", ["retry"], 2, /a job id .* or --dead/],
    ["prune with a negative age", ["prune", "--older-than", "-1d"], 2, /--older-than must be zero or more/],
    ["prune of pending jobs", ["prune", "--older-than", "1d", "--status", "pending"], 2, /"pending" cannot be pruned/],
    ["bad schema name", ["stats", "--schema", "Robert'); DROP"], 2, /schema name .* is not allowed/],
  ];
  for (const [name, args, code, pattern] of cases) {
    test(`${name}: exits ${code} with one line and writes nothing`, async () => {
      expectOneLineError(await skipq(args, env), code, pattern);
      expect(await jobCount()).toBe(0);
    });
  }

  for (const command of ["job", "retry", "cancel"]) {
    test(`${command} of an unknown job id exits 1 and says it does not exist`, async () => {
      expectOneLineError(await skipq([command, "987654321"], env), 1, /job 987654321 does not exist/);
      expect(await jobCount()).toBe(0);
    });
  }

  test("an unreachable database names host and port and how to point elsewhere", async () => {
    const result = await skipq(["enqueue", "x"], { DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" });
    expectOneLineError(
      result,
      1,
      /cannot reach PostgreSQL at 127\.0\.0\.1:1 \(ECONNREFUSED\).*--database-url or set DATABASE_URL/,
    );
  });

  test("bad names are refused before connecting (exit 2 even with the database unreachable)", async () => {
    const unreachable = { DATABASE_URL: "postgres://postgres@127.0.0.1:1/none" };
    const results = await Promise.all([
      skipq(["enqueue", "a b"], unreachable),
      skipq(["queue", "pause", "x y"], unreachable),
      skipq(["worker", "--tasks", "examples/tasks.mjs", "--queue", "q w"], unreachable),
    ]);
    for (const result of results) expectOneLineError(result, 2, /name ".*" is not allowed/);
  });

  test("a malformed database URL is named and refused before connecting", async () => {
    const result = await skipq(["enqueue", "x"], { DATABASE_URL: "localhost:5432" });
    expectOneLineError(
      result,
      2,
      /the database URL "localhost:5432" is not a PostgreSQL connection string: use postgres:\/\//,
    );
  });

  test("no database configured says how to configure one", async () => {
    const result = await skipq(["stats"], {});
    expectOneLineError(result, 2, /no database configured: pass --database-url .* or set DATABASE_URL/);
  });

  test("an unmigrated schema says to run migrate, and enqueue creates nothing there", async () => {
    const schema = schemaName("cli-unmigrated");
    const result = await skipq(["enqueue", "x", "--schema", schema], { DATABASE_URL });
    expectOneLineError(result, 1, new RegExp(`schema "${schema}" has no skipq tables: run \`skipq migrate\``));
    const { rows } = await t.db.query("SELECT count(*)::int AS n FROM pg_namespace WHERE nspname = $1", [schema]);
    expect(rows[0].n).toBe(0);
  });
});

describe("worker refuses a bad tasks module without claiming anything", () => {
  let jobId: string;
  const dir = os.tmpdir();
  const file = (name: string) => path.join(dir, `skipq-cli-${process.pid}-${name}`);

  beforeAll(async () => {
    const { rows } = await t.db.query(
      `INSERT INTO "${t.schema}".jobs (kind, payload) VALUES ('send-email', '{}') RETURNING id`,
    );
    jobId = rows[0].id;
    await writeFile(file("empty.mjs"), "export default {};\n");
    await writeFile(file("nodefault.mjs"), "export const handlers = { a: async () => {} };\n");
    await writeFile(file("notfn.mjs"), 'export default { "send-email": "not a function" };\n');
    await writeFile(file("throws.mjs"), 'throw new Error("config missing");\n');
  });

  async function expectUntouched(): Promise<void> {
    const { rows } = await t.db.query(`SELECT status, attempts, locked_by FROM "${t.schema}".all_jobs WHERE id = $1`, [
      jobId,
    ]);
    expect(rows[0]).toEqual({ status: "pending", attempts: 0, locked_by: null });
  }

  const cases: Array<[string, () => string, RegExp]> = [
    [
      "a tasks module that does not exist",
      () => "./no/such/tasks.mjs",
      /tasks module ".\/no\/such\/tasks.mjs" does not exist/,
    ],
    [
      "a default export with no handlers",
      () => file("empty.mjs"),
      /has no handlers: its default export must map job kinds/,
    ],
    ["no default export", () => file("nodefault.mjs"), /has no handlers/],
    ["a handler that is not a function", () => file("notfn.mjs"), /the handler for "send-email" is not a function/],
    ["a module that throws on import", () => file("throws.mjs"), /failed to load: config missing/],
  ];
  for (const [name, tasks, pattern] of cases) {
    test(`${name}: exits 2 with one line and the queue is untouched`, async () => {
      expectOneLineError(await skipq(["worker", "--tasks", tasks()], env), 2, pattern);
      await expectUntouched();
    });
  }

  test("a bad worker duration exits 2 before connecting", async () => {
    const result = await skipq(["worker", "--tasks", "examples/tasks.mjs", "--lock-timeout", "0s"], env);
    expectOneLineError(result, 2, /--lock-timeout must be more than zero/);
    await expectUntouched();
  });
});
