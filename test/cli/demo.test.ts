/**
 * `skipq demo` end to end through the built binary: on the configured
 * database in a schema of its own (counts checked in the database), on a
 * throwaway embedded PostgreSQL (data directory gone afterwards), and
 * interrupted with Ctrl-C (exit 130, data directory gone, server stopped).
 */
import { existsSync } from "node:fs";
import net from "node:net";
import { afterAll, expect, test } from "vitest";
import { sampleJobs } from "../../src/cli/demo/sample.js";
import { DATABASE_URL, schemaName, until, useTestQueue } from "../helpers.js";
import { skipq, start } from "./run.js";

const t = useTestQueue("cli-demo-other");
const demoSchema = schemaName("cli-demo");

afterAll(async () => {
  await t.db.query(`DROP SCHEMA IF EXISTS "${demoSchema}" CASCADE`);
});

async function counts(schema: string): Promise<Record<string, number>> {
  const { rows } = await t.db.query(`SELECT status, count(*)::int AS n FROM "${schema}".all_jobs GROUP BY status`);
  return Object.fromEntries(rows.map((r) => [r.status, r.n]));
}

function dataDir(output: string): string {
  const match = /data in (\S+),/.exec(output);
  if (!match?.[1]) throw new Error(`no data directory in the demo's output:\n${output}`);
  return match[1];
}

test("demo on a configured database finishes every sample job in its own schema, and a rerun starts afresh", async () => {
  const result = await skipq(["demo", "--jobs", "300", "--schema", demoSchema], { DATABASE_URL });
  expect(result.code, result.stderr + result.stdout).toBe(0);
  expect(result.stdout).toContain(`in schema "${demoSchema}" only`);
  expect(result.stdout).toMatch(/pickup latency p50 \/ p99\s+│ [\d,.]+ m?s \/ [\d,.]+ m?s/);
  expect(result.stdout).toMatch(/the enqueue call itself p50 \/ p99\s+│ [\d,.]+ m?s \/ [\d,.]+ m?s/);
  expect(result.stdout).toContain("What to try next");
  const expected = sampleJobs(300);
  const probes = 20;
  const first = await counts(demoSchema);
  expect(first).toEqual({ completed: 300 + probes - expected.expectedDead, dead: expected.expectedDead });

  const rerun = await skipq(["demo", "--jobs", "40", "--schema", demoSchema], { DATABASE_URL });
  expect(rerun.code, rerun.stderr).toBe(0);
  const second = await counts(demoSchema);
  expect((second.completed ?? 0) + (second.dead ?? 0)).toBe(40 + probes);
});

test("demo refuses a schema it did not create and leaves it untouched", async () => {
  const { id } = await t.skipq.enqueue("keep-me", {});
  const result = await skipq(["demo", "--jobs", "10", "--schema", t.schema], { DATABASE_URL });
  expect(result.code).toBe(1);
  expect(result.stderr).toMatch(/already exists and was not created by `skipq demo`.*--schema/);
  const { rows } = await t.db.query(`SELECT status FROM "${t.schema}".all_jobs WHERE id = $1`, [id]);
  expect(rows).toEqual([{ status: "pending" }]);
});

test("demo with no DATABASE_URL runs on a throwaway PostgreSQL and removes its data", async () => {
  const result = await skipq(["demo", "--jobs", "200"], {});
  expect(result.code, result.stderr + result.stdout).toBe(0);
  expect(result.stdout).toMatch(/PostgreSQL \d+ is up on 127\.0\.0\.1:\d+/);
  expect(result.stdout).toContain("200 of 200");
  expect(result.stdout).toContain("Stopped the temporary PostgreSQL and removed its data.");
  expect(existsSync(dataDir(result.stdout))).toBe(false);
});

test("Ctrl-C during the demo exits 130, stops the temporary server and removes its data", async () => {
  const demo = start(["demo", "--jobs", "20000"], {});
  await until("the worker is running", () => demo.stdout().includes("Running a worker"), 50_000);
  const dir = dataDir(demo.stdout());
  const port = Number(/127\.0\.0\.1:(\d+)/.exec(demo.stdout())?.[1]);
  expect(existsSync(dir)).toBe(true);
  demo.child.kill("SIGINT");
  const result = await demo.exited;
  expect(result.code, result.stderr).toBe(130);
  expect(result.stderr).toContain("interrupted; the worker stopped and the temporary database was removed");
  expect(existsSync(dir)).toBe(false);
  const refused = await new Promise<boolean>((resolve) => {
    const socket = net.connect(port, "127.0.0.1");
    socket.once("connect", () => {
      socket.destroy();
      resolve(false);
    });
    socket.once("error", () => resolve(true));
  });
  expect(refused).toBe(true);
});
