#!/usr/bin/env node
// The `skipq` binary: loads the compiled CLI (dist/, made by `npm run build`)
// and exits with the code it returns. It holds no logic of its own; the
// commands live in src/cli/. It never runs TypeScript sources directly.
import { existsSync } from "node:fs";

const entry = new URL("../dist/src/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("skipq: the CLI is not built yet: run `npm run build` first (dist/ is not committed)\n");
  process.exit(1);
}
const { main } = await import(entry.href);
process.exit(await main(process.argv));
