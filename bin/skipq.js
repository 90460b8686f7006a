#!/usr/bin/env node
// The `skipq` binary: runs the compiled CLI (npm run build creates dist/).
import { existsSync } from "node:fs";

const entry = new URL("../dist/src/cli/main.js", import.meta.url);
if (!existsSync(entry)) {
  process.stderr.write("skipq: the CLI is not built yet: run `npm run build` first (dist/ is not committed)\n");
  process.exit(1);
}
const { main } = await import(entry.href);
process.exit(await main(process.argv));
