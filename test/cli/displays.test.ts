/**
 * What the CLI prints of rows it did not write, as a real process: no C0/C1
 * control character from a job's error, keys, names, log lines or result
 * reaches the terminal (each is shown as an escape), --json stays valid JSON,
 * error text is redacted at display time whoever wrote it, and values of any
 * shape and depth PostgreSQL accepts are printed, never crashed on.
 */
import { beforeAll, expect, test } from "vitest";
import { DATABASE_URL, insertRawJob, useTestQueue } from "../helpers.js";
import { skipq, start } from "./run.js";

const t = useTestQueue("cli_displays");
let env: Record<string, string>;
beforeAll(async () => {
  env = { DATABASE_URL, SKIPQ_SCHEMA: t.schema };
});

/** Raw control characters a terminal acts on: C0 but newline, DEL, C1. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;
const HOSTILE = "boom\u001b]0;pwned\u0007\u001b[2J\u001b[8mhidden\u009b31m\r";
const LEAKY = "connect failed password=hunter22; Authorization: Bearer eyJhbGciOiJIUzI1NiJ9.e30.sig";

test("skipq job, jobs, dead, stats and flow print no raw control character from the database; --json stays valid JSON", async () => {
  const logs = JSON.stringify([
    {
      attempt: 1,
      worker: `w${HOSTILE}`,
      startedAt: "a",
      endedAt: "b",
      outcome: "failed",
      error: HOSTILE,
      lines: [{ at: "t", level: HOSTILE, msg: HOSTILE }],
      dropped: 0,
    },
  ]);
  const id = await insertRawJob(t, {
    queue: "ctl",
    locked_by: `w${HOSTILE}`,
    last_error: HOSTILE,
    idempotency_key: `idem${HOSTILE}`,
    concurrency_key: `conc${HOSTILE}`,
    result: JSON.stringify({ text: HOSTILE }),
    progress: JSON.stringify(HOSTILE),
    attempt_logs: logs,
  });
  await insertRawJob(
    t,
    { queue: "ctl", last_error: HOSTILE, error_fingerprint: "0123456789abcdef" },
    { history: true },
  );
  for (const args of [["job", id], ["jobs"], ["dead"], ["stats"], ["flow", id]]) {
    const r = await skipq(args, env);
    expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
    expect(r.stdout, args.join(" ")).not.toMatch(RAW_CONTROL);
    expect(r.stderr, args.join(" ")).not.toMatch(RAW_CONTROL);
    // Shown, as an escape: \x1b in text, \u001b inside JSON (a flow's result).
    if (args[0] !== "stats") expect(r.stdout, args.join(" ")).toMatch(/\\x1b|\\u001b/);
    const json = await skipq([...args, "--json"], env);
    expect(json.code, `${args.join(" ")} --json`).toBe(0);
    expect(json.stdout, `${args.join(" ")} --json`).not.toMatch(RAW_CONTROL);
    expect(() => JSON.parse(json.stdout), `${args.join(" ")} --json`).not.toThrow();
  }
  const parsed = JSON.parse((await skipq(["job", id, "--json"], env)).stdout);
  expect(parsed.idempotencyKey).toBe(`idem${HOSTILE}`);
});

test("skipq job, jobs and dead redact password= pairs and bearer tokens in error text written by plain SQL", async () => {
  const logs = JSON.stringify([
    { attempt: 1, worker: "py", startedAt: "a", endedAt: "b", outcome: "failed", error: LEAKY, lines: [], dropped: 0 },
  ]);
  const id = await insertRawJob(t, { queue: "leak", last_error: LEAKY, attempt_logs: logs });
  await insertRawJob(t, { queue: "leak", last_error: LEAKY, error_fingerprint: "fedcba9876543210" }, { history: true });
  for (const args of [
    ["job", id],
    ["job", id, "--json"],
    ["jobs", "--queue", "leak"],
    ["jobs", "--queue", "leak", "--json"],
    ["dead", "--queue", "leak"],
    ["dead", "--json"],
  ]) {
    const r = await skipq(args, env);
    expect(r.code, args.join(" ")).toBe(0);
    expect(r.stdout, args.join(" ")).not.toMatch(/hunter22|eyJhbGciOiJIUzI1NiJ9/);
    expect(r.stdout, args.join(" ")).toContain("[redacted]");
  }
});

test("skipq job prints a non-array attempt_logs, a deeply nested result and progress; --json stays valid JSON", async () => {
  const deep = (depth: number, leaf: string) => `${"[".repeat(depth)}${leaf}${"]".repeat(depth)}`;
  const ids = [
    await insertRawJob(t, { attempt_logs: '{"not": "a list"}' }),
    await insertRawJob(t, { attempt_logs: '[1, null, {"attempt": [1], "lines": {"x": 1}, "error": 5}]' }),
    await insertRawJob(t, { result: deep(5000, "1"), progress: deep(5000, "2") }, { history: true }),
    await insertRawJob(t, { payload: deep(5000, '"p"'), headers: deep(5000, '"h"') }),
  ];
  for (const id of ids) {
    for (const args of [
      ["job", id],
      ["job", id, "--json"],
      ["flow", id, "--json"],
    ]) {
      const r = await skipq(args, env);
      expect(r.code, `${args.join(" ")}: ${r.stderr}`).toBe(0);
      expect(r.stderr, args.join(" ")).toBe("");
      if (args.includes("--json")) expect(() => JSON.parse(r.stdout), args.join(" ")).not.toThrow();
    }
  }
  expect((await skipq(["job", ids[0] as string], env)).stdout).toContain("not a list");
  expect((await skipq(["job", ids[2] as string], env)).stdout).toContain("nested too deeply to show");
});

test("skipq job lays out a 120 KB key of wide characters in seconds (the table took minutes: found by the display properties)", async () => {
  const id = await insertRawJob(t, { locked_by: `\u{b3912}\u{aa42a}a${"w".repeat(120_000)}`, last_error: "x" });
  const run = start(["job", id], env);
  const timer = setTimeout(() => run.child.kill("SIGKILL"), 15_000);
  const r = await run.exited;
  clearTimeout(timer);
  expect(r.signal, "killed after 15 s").toBeNull();
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("more characters; --json has all");
});
