#!/usr/bin/env node
// Runs a command with DATABASE_URL pointing at a PostgreSQL server.
//
// If DATABASE_URL is already set, the command runs against it unchanged.
// Otherwise a throwaway embedded PostgreSQL is started (fresh data directory,
// free port on 127.0.0.1), the command runs, the server is stopped and its data
// removed, and this process exits with the command's exit code, explicitly.
//
// Usage: node scripts/with-postgres.mjs -- <command> [args...]
import { spawn } from "node:child_process";
import { EmbeddedPostgres } from "../dist/src/embedded/embeddedPostgres.js";

const separator = process.argv.indexOf("--");
const command = process.argv.slice(separator === -1 ? 2 : separator + 1);
if (command.length === 0) {
  console.error("usage: node scripts/with-postgres.mjs -- <command> [args...]");
  process.exit(2);
}

function run(env) {
  return new Promise((resolve) => {
    const child = spawn(command[0], command.slice(1), { stdio: "inherit", env, shell: false });
    const forward = (signal) => child.kill(signal);
    process.on("SIGINT", forward);
    process.on("SIGTERM", forward);
    child.on("exit", (code, signal) => resolve(code ?? (signal ? 1 : 0)));
    child.on("error", (error) => {
      console.error(`could not run ${command[0]}: ${error.message}`);
      resolve(127);
    });
  });
}

const binDir = new URL("../node_modules/.bin", import.meta.url).pathname;
const env = { ...process.env, PATH: `${binDir}:${process.env.PATH ?? ""}` };
if (env.DATABASE_URL) {
  console.error(`with-postgres: using DATABASE_URL (${new URL(env.DATABASE_URL).host})`);
  process.exit(await run(env));
}

const server = new EmbeddedPostgres();
let code = 1;
try {
  const url = await server.start();
  console.error(`with-postgres: started embedded PostgreSQL ${server.version} on 127.0.0.1:${server.port}`);
  code = await run({ ...env, DATABASE_URL: url, SKIPQ_EMBEDDED: "1" });
} catch (error) {
  console.error(`with-postgres: ${error instanceof Error ? error.message : String(error)}`);
} finally {
  await server.stop().catch(() => undefined);
}
process.exit(code);
