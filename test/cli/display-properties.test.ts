/**
 * Display properties of the CLI (fast-check, fixed seed): rows written by
 * plain SQL with arbitrary JSON and text (deep, wide, non-array attempt logs,
 * control characters, the escape text of lone surrogates, huge strings) in
 * result, progress, attempt_logs, last_error, payload, headers and the keys,
 * shown by `skipq job`, `jobs`, `dead`, `flow` and `stats`, with and without
 * --json. The commands run in this process (main(), the same code as the
 * binary) so a few hundred runs fit the budget. No command crashes, no raw
 * control character reaches the terminal, --json is valid JSON, and no secret
 * of the error or log text is printed.
 */
import fc from "fast-check";
import { expect, test } from "vitest";
import { main } from "../../src/cli/main.js";
import { rowCase, TEXT_SECRET, writeCase } from "../displayRows.js";
import { useTestQueue } from "../helpers.js";

const t = useTestQueue("cli_display_properties");

/** Raw control characters a terminal acts on: C0 but newline, DEL, C1. */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is the point.
const RAW_CONTROL = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

/** Runs the CLI in this process; what it wrote to stdout and stderr, and its exit code. */
async function cli(args: string[]): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = "";
  let stderr = "";
  const out = process.stdout.write;
  const err = process.stderr.write;
  process.stdout.write = ((chunk: string | Uint8Array) => {
    stdout += String(chunk);
    return true;
  }) as typeof process.stdout.write;
  process.stderr.write = ((chunk: string | Uint8Array) => {
    stderr += String(chunk);
    return true;
  }) as typeof process.stderr.write;
  try {
    const code = await main([
      "node",
      "skipq",
      "--database-url",
      String(process.env.DATABASE_URL),
      "--schema",
      t.schema,
      ...args,
    ]);
    return { code, stdout, stderr };
  } finally {
    process.stdout.write = out;
    process.stderr.write = err;
  }
}

test("skipq job, jobs, dead, flow and stats print any row PostgreSQL accepts: no crash, no raw control character, valid --json, no secret (property)", async () => {
  let n = 0;
  await fc.assert(
    fc.asyncProperty(rowCase, async (c) => {
      n++;
      const queue = `cprop${n}`;
      const { live, dead } = await writeCase(t, queue, n, c);
      const commands = [
        ["job", live],
        ["job", dead],
        ["jobs", "--queue", queue],
        ["dead", "--queue", queue],
        ["flow", live],
        ...(n % 10 === 1 ? [["stats"]] : []),
      ];
      for (const command of commands) {
        for (const args of [command, [...command, "--json"]]) {
          const what = args.join(" ");
          const r = await cli(args);
          expect(r.code, `${what}: ${r.stderr.slice(0, 300)}`).toBe(0);
          expect(r.stderr, what).toBe("");
          expect(RAW_CONTROL.test(r.stdout), what).toBe(false);
          expect(r.stdout.includes(TEXT_SECRET), what).toBe(false);
          if (args.includes("--json")) expect(() => JSON.parse(r.stdout), what).not.toThrow();
        }
      }
    }),
    { seed: 20_212, numRuns: 25, endOnFailure: true },
  );
}, 120_000);
