#!/usr/bin/env node
// CI: lists what `npm pack` would publish and fails if anything outside what
// runs from the package is in it (tests, benchmarks, docs sources, examples),
// or if the entry points are missing. Prints the file count and size.
import { execFileSync } from "node:child_process";

const [pack] = JSON.parse(execFileSync("npm", ["pack", "--dry-run", "--json"], { encoding: "utf8" }));
const files = pack.files.map((f) => f.path);
const allowed = [
  /^package\.json$/,
  /^README\.md$/,
  /^LICENSE$/,
  /^CHANGELOG\.md$/,
  /^bin\//,
  /^migrations\/\d{4}_[a-z0-9_]+\.sql$/,
  /^dist\/src\//,
];
const stray = files.filter((f) => !allowed.some((re) => re.test(f)));
const required = [
  "bin/skipq.js",
  "dist/src/index.js",
  "dist/src/index.d.ts",
  "dist/src/cli/main.js",
  "migrations/0001_init.sql",
];
const missing = required.filter((f) => !files.includes(f));
console.log(`npm pack: ${files.length} files, ${(pack.unpackedSize / 1024).toFixed(0)} KiB unpacked`);
if (stray.length > 0) console.error(`not part of what runs from the package:\n  ${stray.join("\n  ")}`);
if (missing.length > 0) console.error(`missing from the package:\n  ${missing.join("\n  ")}`);
process.exit(stray.length > 0 || missing.length > 0 ? 1 : 0);
