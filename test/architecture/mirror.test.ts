/**
 * test/ mirrors src/: each folder of src/ (and the facade, src/skipq.ts) has a
 * test folder of the same name, and every other test folder is one of the
 * suites that cut across the parts, each named here with what it tests. A new
 * folder on either side fails until it has its twin or its reason.
 */
import { readdirSync } from "node:fs";
import path from "node:path";
import { expect, test } from "vitest";
import { ROOT } from "../cli/run.js";

/** Test folders with no twin in src/, and what they test instead. */
const ACROSS: Record<string, string> = {
  architecture: "the source tree itself: layers, this mirror",
  browser: "the dashboard in a real Chromium",
  chaos: "crashes, kills and faults across every part (its own config: npm run test:chaos)",
  docs: "every example in docs/ and examples/ runs as printed",
  features: "the job options of docs/jobs.md, each through enqueue, worker and outcome",
  fixtures: "files the tests read (not tests)",
  fleet: "many worker processes against one database (its own config: npm run test:fleet)",
  flow: "queue limits and fairness: the claim statements, the worker and Admin together",
  model: "a model of every feature checked against the real queue",
  protocol: "the SQL functions other languages call, against the TypeScript statements",
  runtimes: "the packed library under Node 22/24/26, Bun and Deno",
};

/** src/ folders whose twin is elsewhere, and where. */
const TESTED_ELSEWHERE: Record<string, string> = {
  embedded: "npm test itself starts it without DATABASE_URL (scripts/with-postgres.mjs); test/cli/demo.test.ts",
};

const folders = (dir: string) =>
  readdirSync(path.join(ROOT, dir), { withFileTypes: true })
    .filter((e) => e.isDirectory())
    .map((e) => e.name)
    .sort();

test("every src/ folder and the facade have a test folder of the same name, or a named place elsewhere", () => {
  const tests = new Set(folders("test"));
  const untested = [...folders("src"), "skipq"].filter((f) => !tests.has(f) && !(f in TESTED_ELSEWHERE));
  expect(untested).toEqual([]);
});

test("every test folder without a src/ twin is a suite that cuts across the parts, named with what it tests", () => {
  const src = new Set([...folders("src"), "skipq"]);
  expect(folders("test").filter((f) => !src.has(f) && !(f in ACROSS))).toEqual([]);
  // And the list names no folder that is gone.
  expect(Object.keys(ACROSS).filter((f) => !folders("test").includes(f))).toEqual([]);
});
