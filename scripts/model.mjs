#!/usr/bin/env node
// npm run test:model -- [--runs N] [--seed S] [--commands C] [--path P]
// Runs the model-based test (test/model/model.test.ts) longer than CI does: N runs of up to C commands from
// seed S (defaults: 40 runs, 60 commands, seed 20261201, as in CI). A failure prints its seed and path;
// pass both back to replay it. Uses DATABASE_URL, or starts a throwaway PostgreSQL like npm test.
import { spawn } from "node:child_process";
import { parseArgs } from "node:util";

const usage = "usage: npm run test:model -- [--runs N] [--seed S] [--commands C] [--path P]";
let values;
try {
  ({ values } = parseArgs({
    options: {
      runs: { type: "string" },
      seed: { type: "string" },
      commands: { type: "string" },
      path: { type: "string" },
    },
    strict: true,
  }));
} catch (error) {
  console.error(`${error.message}\n${usage}`);
  process.exit(2);
}
for (const name of ["runs", "seed", "commands"]) {
  if (values[name] !== undefined && !/^[1-9][0-9]{0,8}$/.test(values[name])) {
    console.error(`--${name} must be a positive whole number, got ${JSON.stringify(values[name])}\n${usage}`);
    process.exit(2);
  }
}
const env = { ...process.env };
if (values.runs) env.SKIPQ_MODEL_RUNS = values.runs;
if (values.seed) env.SKIPQ_MODEL_SEED = values.seed;
if (values.commands) env.SKIPQ_MODEL_COMMANDS = values.commands;
if (values.path) env.SKIPQ_MODEL_PATH = values.path;
// A long run outlives vitest's default timeout: the test sets its own from the number of runs.
const child = spawn(
  process.execPath,
  ["scripts/with-postgres.mjs", "--", "vitest", "run", "test/model/model.test.ts"],
  { stdio: "inherit", env },
);
child.on("exit", (code, signal) => process.exit(code ?? (signal ? 1 : 0)));
