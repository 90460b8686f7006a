/**
 * Where the CLI points users for more: the docs shipped in the package (`docs/*.md`, listed in
 * package.json's `files`), as a path they can open from where they ran the command — e.g.
 * `node_modules/skipq/docs/cli.md` in an application, `docs/cli.md` in a checkout. The package root
 * is found from this file (src/cli/ or dist/src/cli/), never from the working directory.
 * scripts/check-pack.mjs fails if a `shippedDoc("…")` named here is not in the tarball.
 */
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

let root: string | undefined;

function packageRoot(): string {
  if (root !== undefined) return root;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  while (!existsSync(path.join(dir, "package.json")) || !existsSync(path.join(dir, "migrations"))) {
    const up = path.dirname(dir);
    if (up === dir) break;
    dir = up;
  }
  root = dir;
  return root;
}

/** The path of a shipped doc (`name` like "cli.md" or "metrics.md#health"), relative to the cwd when under it. */
export function shippedDoc(name: string): string {
  const full = path.join(packageRoot(), "docs", name);
  const relative = path.relative(process.cwd(), full);
  return relative.startsWith("..") || path.isAbsolute(relative) ? full : relative;
}
