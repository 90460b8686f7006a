#!/usr/bin/env node
// CI: packs skipq as a clean clone would (the tracked and new files, no dist/, no node_modules but a
// link to this checkout's for the build) and fails unless the tarball is what a user can run:
//   - the entry points are in it (dist/ is built by `prepack`, so a clean clone ships it);
//   - nothing outside what runs from the package (tests, benchmarks, examples, images, source maps);
//   - LICENSE is in it;
//   - every module the shipped .js and .d.ts files import is a dependency, a peer dependency or a
//     Node.js builtin (a devDependency's types would leave users with `any` or TS2307);
//   - every doc the shipped code points users to (`docs/….md`) is in it.
// Prints the file count and size. With --keep DIR it leaves the tarball there and prints its path
// last (the runtime smoke tests install it).
import { execFileSync } from "node:child_process";
import { cpSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync } from "node:fs";
import { builtinModules } from "node:module";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const keepAt = process.argv.includes("--keep") ? path.resolve(process.argv[process.argv.indexOf("--keep") + 1]) : null;

/** A copy of the checkout as a clean clone has it: tracked files and new unignored ones, as they are now. */
function cleanCopy() {
  const dir = mkdtempSync(path.join(os.tmpdir(), "skipq-pack-"));
  const listed = execFileSync("git", ["ls-files", "-z", "--cached", "--others", "--exclude-standard"], {
    cwd: root,
    encoding: "utf8",
  });
  // A worktree's node_modules may be a symlink, which a trailing-slash ignore rule does not match: it is
  // linked below, never copied.
  for (const file of listed.split("\0").filter((f) => f && f !== "node_modules")) {
    const from = path.join(root, file);
    try {
      mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
      cpSync(from, path.join(dir, file));
    } catch (error) {
      // A tracked file deleted in the work tree is not in the clone-to-be either.
      if (error.code !== "ENOENT") throw error;
    }
  }
  symlinkSync(path.join(root, "node_modules"), path.join(dir, "node_modules"), "dir");
  return dir;
}

const work = cleanCopy();
const out = keepAt ?? mkdtempSync(path.join(os.tmpdir(), "skipq-tarball-"));
mkdirSync(out, { recursive: true });
let failed = false;
const fail = (title, items) => {
  if (items.length === 0) return;
  failed = true;
  console.error(`${title}:\n  ${items.join("\n  ")}`);
};
try {
  // `npm pack` runs `prepack` (the build) in the clean copy, as `npm publish` would.
  const [pack] = JSON.parse(
    execFileSync("npm", ["pack", "--json", "--pack-destination", out], {
      cwd: work,
      encoding: "utf8",
      stdio: ["ignore", "pipe", "inherit"],
    }),
  );
  const files = pack.files.map((f) => f.path);
  const allowed = [
    /^package\.json$/,
    /^README\.md$/,
    /^LICENSE$/,
    /^CHANGELOG\.md$/,
    /^bin\/[a-z-]+\.js$/,
    /^migrations\/\d{4}_[a-z0-9_]+\.sql$/,
    /^docs\/[a-z0-9-]+\.md$/,
    /^dist\/src\/.+\.(js|d\.ts)$/,
  ];
  fail(
    "not part of what runs from the package",
    files.filter((f) => !allowed.some((re) => re.test(f))),
  );
  const required = [
    "LICENSE",
    "bin/skipq.js",
    "dist/src/index.js",
    "dist/src/index.d.ts",
    "dist/src/cli/main.js",
    "migrations/0001_init.sql",
  ];
  fail(
    "missing from the package",
    required.filter((f) => !files.includes(f)),
  );

  const manifest = JSON.parse(readFileSync(path.join(work, "package.json"), "utf8"));
  const installed = new Set([
    manifest.name,
    ...Object.keys(manifest.dependencies ?? {}),
    ...Object.keys(manifest.peerDependencies ?? {}),
  ]);
  const builtins = new Set(builtinModules);
  const packageOf = (spec) =>
    spec
      .split("/")
      .slice(0, spec.startsWith("@") ? 2 : 1)
      .join("/");
  const unresolvable = [];
  const unshippedDocs = new Set();
  for (const file of files.filter((f) => /^dist\/src\/.+\.(js|d\.ts)$/.test(f))) {
    const text = readFileSync(path.join(work, file), "utf8");
    // Static imports and exports, `import("x")` (types and dynamic loads) and `require("x")`.
    const specs = [
      ...text.matchAll(/(?:^|\s)(?:import|export)\s[^;]*?\sfrom\s+["']([^"']+)["']/gm),
      ...text.matchAll(/(?:^|[^\w.])import\s*\(\s*["']([^"']+)["']\s*\)/g),
      ...text.matchAll(/(?:^|\s)import\s+["']([^"']+)["']/gm),
      ...text.matchAll(/(?:^|[^\w.])require\(\s*["']([^"']+)["']\s*\)/g),
    ].map((m) => m[1]);
    for (const spec of specs) {
      if (spec.startsWith(".") || spec.startsWith("node:") || builtins.has(spec)) continue;
      if (!installed.has(packageOf(spec))) unresolvable.push(`${file} imports "${spec}"`);
    }
    for (const m of text.matchAll(/\bdocs\/([a-z0-9-]+\.md)|shippedDoc\(\s*["'`]([a-z0-9-]+\.md)/g))
      if (!files.includes(`docs/${m[1] ?? m[2]}`)) unshippedDocs.add(`${file} points to docs/${m[1] ?? m[2]}`);
  }
  fail("imports of packages a user does not install (not in dependencies or peerDependencies)", unresolvable);
  fail("docs the shipped code points to that are not in the package", [...unshippedDocs]);

  console.log(`npm pack: ${files.length} files, ${(pack.unpackedSize / 1024).toFixed(0)} KiB unpacked`);
  if (keepAt) console.log(path.join(out, pack.filename));
} finally {
  rmSync(work, { recursive: true, force: true });
  if (!keepAt) rmSync(out, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
