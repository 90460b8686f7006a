/**
 * The layer order of src/ holds (scripts/layers.mjs, also run by `npm run
 * lint`), and the check can tell: the same function finds an import that
 * breaks the order, and a folder placed in no layer.
 */
import path from "node:path";
import { expect, test } from "vitest";
// @ts-expect-error: a plain .mjs script, no declarations
import { LAYERS, sourceModules, violations } from "../../scripts/layers.mjs";
import { ROOT } from "../cli/run.js";

test("every import in src/ goes to its own layer or one below it", () => {
  const modules: Map<string, string> = sourceModules(path.join(ROOT, "src"));
  expect(modules.size).toBeGreaterThan(100);
  expect(violations(modules)).toEqual([]);
  // Every top-level folder and file of src/ is placed.
  const placed = new Set((LAYERS as string[][]).flat());
  expect([...new Set([...modules.keys()].map((f) => f.split("/")[0] ?? f))].filter((u) => !placed.has(u))).toEqual([]);
});

test("an import against the order is found: the database layer importing the worker, the vocabulary the client", () => {
  const modules = new Map([
    ["db/store.ts", 'import { Worker } from "../worker/worker.js";\nimport type { Logger } from "../core/logger.js";'],
    ["core/errors.ts", 'export type { Skipq } from "../skipq.js";'],
    ["worker/fetcher.ts", 'import { Store } from "../db/store.js";\nconst m = await import("../shared/wakeup.js");'],
    ["ops/admin.ts", 'import { Skipq } from "../skipq.js";'],
  ]);
  expect(violations(modules)).toEqual([
    "db/store.ts imports worker/worker.js: db (layer 1) is below worker (layer 4)",
    "core/errors.ts imports skipq.js: core (layer 0) is below skipq.ts (layer 5)",
  ]);
});

test("a folder in no layer is reported, so a new part of src/ must be placed", () => {
  expect(violations(new Map([["jobs2/thing.ts", 'import { x } from "../core/job.js";']]))).toEqual([
    "jobs2/thing.ts: src/jobs2 is in no layer (add it to LAYERS in scripts/layers.mjs)",
  ]);
});
