#!/usr/bin/env node
/**
 * The layer order of src/ (docs/architecture.md, "Layers"), checked: a module
 * imports only modules of its own layer or of layers below it. Run by
 * `npm run lint` beside the cycle check; test/architecture/layers.test.ts
 * runs it on the tree and on an import that breaks the order.
 *
 *   node scripts/layers.mjs        # prints each import against the order, exits 1 if any
 */
import { readdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

/** Bottom first. A top-level folder of src/ (or a file directly in it) and the layer it belongs to. */
export const LAYERS = [
  ["core"], // the vocabulary: jobs, errors, validation, backoff, the logger interface
  ["db"], // statements, stores, pools, migrations, LISTEN
  ["shared", "embedded"], // primitives more than one part uses; the throwaway PostgreSQL
  ["workflow", "enqueue"], // enqueue (single, bulk, transactional, waiting) and workflows' graph
  ["worker", "maintenance"], // running jobs; the leader's loops
  ["skipq.ts"], // the client facade, Skipq
  ["cron", "outbox", "saga"], // built on the client
  ["ops"], // Admin, health, metrics, the dashboard
  ["adapters", "cli"], // other drivers; the command line
  ["index.ts"], // the public entry
];

const rank = new Map(LAYERS.flatMap((names, i) => names.map((name) => [name, i])));

/** The layer name of a path relative to src/ ("worker/fetcher.ts" → "worker", "skipq.ts" → "skipq.ts"). */
function unit(relative) {
  return relative.split("/")[0];
}

/** Relative imports and re-exports of a module's text (static and dynamic), as written. */
export function importsOf(text) {
  const specs = [];
  for (const m of text.matchAll(/(?:\bfrom|\bimport)\s*\(?\s*["'](\.{1,2}\/[^"']+)["']/g)) specs.push(m[1]);
  return specs;
}

/**
 * Every import against the order in `modules` (path relative to src/ → text): "from → to (layer a above b)".
 * A module outside every layer is reported too, so a new folder must be placed.
 */
export function violations(modules) {
  const found = [];
  for (const [file, text] of modules) {
    const from = unit(file);
    if (!rank.has(from)) {
      found.push(`${file}: src/${from} is in no layer (add it to LAYERS in scripts/layers.mjs)`);
      continue;
    }
    for (const spec of importsOf(text)) {
      const target = path.posix.normalize(path.posix.join(path.posix.dirname(file), spec));
      if (target.startsWith("..")) continue; // outside src/ (package.json)
      const to = unit(target.replace(/\.js$/, ".ts"));
      if (rank.has(to) && rank.get(to) > rank.get(from))
        found.push(
          `${file} imports ${target}: ${from} (layer ${rank.get(from)}) is below ${to} (layer ${rank.get(to)})`,
        );
    }
  }
  return found;
}

/** src/'s modules, relative path → text. */
export function sourceModules(src) {
  const out = new Map();
  const walk = (dir) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith(".ts"))
        out.set(path.relative(src, full).split(path.sep).join("/"), readFileSync(full, "utf8"));
    }
  };
  walk(src);
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../src");
  const found = violations(sourceModules(src));
  for (const line of found) console.error(`layers: ${line}`);
  if (found.length > 0) {
    console.error(`layers: ${found.length} import(s) against the order in docs/architecture.md ("Layers")`);
    process.exit(1);
  }
  console.log(`layers: ${sourceModules(src).size} modules, every import within the order`);
}
