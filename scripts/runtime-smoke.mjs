#!/usr/bin/env node
// CI: the packed library as a new user meets it, under each runtime skipq supports. It installs the
// tarball (`npm pack` of a clean copy, scripts/check-pack.mjs) into a temporary application with
// npm, type-checks a strict TypeScript consumer against the published .d.ts, then under each
// runtime (Node 22, 24 and 26, Bun, Deno; binaries from scripts/runtimes.mjs) runs:
//   esm         test/runtimes/app/smoke.mjs: transactional enqueue, bulk, a worker woken only by
//               LISTEN/NOTIFY, enqueueAndWait with a result, Admin, the dashboard over HTTP
//   cjs         test/runtimes/app/smoke.cjs: require("skipq") from a CommonJS module
//   quickstart  examples/quickstart.ts, twice on the same schema (the second run must end too)
//   cli         bin/skipq.js: --help, migrate, enqueue, worker (SIGTERM exits 0), stats, dashboard
// Each runtime gets its own schema, dropped afterwards. Every child has a deadline, so nothing hangs.
// Prints one line per check and a summary; exits 1 if any check failed.
//
//   DATABASE_URL=… node scripts/runtime-smoke.mjs [--tarball skipq-x.tgz] [--runtimes node22,bun,…]
import { execFile, execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import pg from "pg";
import { RUNTIMES, runtimeBinary } from "./runtimes.mjs";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const arg = (name) => (process.argv.includes(name) ? process.argv[process.argv.indexOf(name) + 1] : undefined);
const DATABASE_URL = process.env.DATABASE_URL;
if (!DATABASE_URL) {
  console.error("runtime-smoke: set DATABASE_URL (or run it under scripts/with-postgres.mjs)");
  process.exit(2);
}
const runtimes = (arg("--runtimes") ?? Object.keys(RUNTIMES).join(",")).split(",");
const run = promisify(execFile);
const lock = JSON.parse(execFileSync("npm", ["ls", "--json", "--depth=0"], { cwd: root, encoding: "utf8" }));
const pinned = (name) => `${name}@${lock.dependencies[name].version}`;

/** The temporary application: the tarball and what a TypeScript user adds, installed by npm. */
function makeApp(tarball) {
  const app = mkdtempSync(path.join(os.tmpdir(), "skipq-app-"));
  writeFileSync(
    path.join(app, "package.json"),
    `${JSON.stringify({ name: "skipq-smoke-app", private: true, type: "module" }, null, 2)}\n`,
  );
  for (const file of ["smoke.mjs", "smoke.cjs", "tasks.mjs", "consumer.ts", "consumer-cjs.cts", "tsconfig.json"])
    copyFileSync(path.join(root, "test/runtimes/app", file), path.join(app, file));
  copyFileSync(path.join(root, "examples/quickstart.ts"), path.join(app, "quickstart.ts"));
  // The versions this checkout locks, so npm finds them in its cache.
  const extras = ["pg", "typescript", "zod", "@types/node", "@types/pg"].map(pinned);
  execFileSync("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", tarball, ...extras], {
    cwd: app,
    stdio: ["ignore", "ignore", "inherit"],
  });
  return app;
}

/** How each runtime runs a script file (Deno needs its permissions and reads npm packages from node_modules). */
function command(runtime, file, args = []) {
  const binary = runtimeBinary(runtime);
  if (runtime === "deno") return [binary, ["run", "--allow-all", file, ...args]];
  return [binary, [file, ...args]];
}

/** Runs a script to completion (with a deadline); rejects with its output when it fails. */
async function runScript(runtime, app, env, file, args = [], timeout = 90_000) {
  const [binary, argv] = command(runtime, file, args);
  try {
    const { stdout } = await run(binary, argv, { cwd: app, env, timeout, maxBuffer: 16 * 1024 * 1024 });
    return stdout;
  } catch (error) {
    throw new Error(
      `${file} ${args.join(" ")} failed (${error.code ?? error.signal}):\n${error.stdout}${error.stderr}`,
    );
  }
}

/** Starts a long-running script; resolves once its output matches `ready`. */
function startScript(runtime, app, env, file, args, ready) {
  const [binary, argv] = command(runtime, file, args);
  const child = spawn(binary, argv, { cwd: app, env, stdio: ["ignore", "pipe", "pipe"] });
  let output = "";
  const exited = new Promise((resolve) => child.on("exit", (code, signal) => resolve({ code, signal })));
  const started = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no "${ready}" within 60 s:\n${output}`)), 60_000);
    const onData = (chunk) => {
      output += chunk;
      const match = ready.exec(output);
      if (match) {
        clearTimeout(timer);
        resolve(match);
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`exited (${code ?? signal}) before "${ready}":\n${output}`));
    });
  });
  /** Sends SIGTERM and resolves with the exit code (rejects after 20 s). */
  const stop = async () => {
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
    const { code, signal } = await exited;
    clearTimeout(timer);
    if (signal === "SIGKILL") throw new Error(`did not exit within 20 s of SIGTERM:\n${output}`);
    return { code, output };
  };
  return { started, stop, output: () => output };
}

const checks = {
  esm: async (runtime, app, env) => {
    const out = await runScript(runtime, app, env, "smoke.mjs");
    if (!out.includes("smoke ok")) throw new Error(`no "smoke ok":\n${out}`);
    return out.trim().split("\n").at(-1);
  },
  cjs: async (runtime, app, env) => {
    const out = await runScript(runtime, app, env, "smoke.cjs");
    if (!out.includes("cjs ok")) throw new Error(`no "cjs ok":\n${out}`);
    return 'require("skipq") works';
  },
  quickstart: async (runtime, app, env) => {
    const first = await runScript(runtime, app, env, "quickstart.ts");
    const second = await runScript(runtime, app, env, "quickstart.ts");
    if (!first.includes("sent 2 emails")) throw new Error(`first run:\n${first}`);
    if (!second.includes("sent 1 email")) throw new Error(`second run:\n${second}`);
    return "ran twice";
  },
  cli: async (runtime, app, env) => {
    const bin = "node_modules/skipq/bin/skipq.js";
    const help = await runScript(runtime, app, env, bin, ["--help"]);
    if (/^\s+bench\b/m.test(help)) throw new Error("`skipq --help` lists bench, which an installed package cannot run");
    // The help points to the docs shipped in the package, by a path that opens from where it ran.
    const doc = /Every command, flag and JSON format: (\S+?)\.?$/m.exec(help)?.[1];
    if (doc === undefined || !existsSync(path.resolve(app, doc)))
      throw new Error(`\`skipq --help\` points to ${doc ?? "no doc"}, which is not in the installed package`);
    await runScript(runtime, app, env, bin, ["migrate"]);
    for (const n of [1, 2, 3])
      await runScript(runtime, app, env, bin, ["enqueue", "smoke.cli", "--payload", `{"n":${n}}`]);
    const worker = startScript(runtime, app, env, bin, ["worker", "--tasks", "./tasks.mjs"], /ready/);
    await worker.started;
    const deadline = Date.now() + 30_000;
    let stats;
    do {
      stats = JSON.parse(await runScript(runtime, app, env, bin, ["stats", "--json"]));
    } while (stats.queues[0]?.completed !== 3 && Date.now() < deadline);
    const stopped = await worker.stop();
    if (stopped.code !== 0) throw new Error(`worker exited ${stopped.code} on SIGTERM:\n${stopped.output}`);
    if (stats.queues[0]?.completed !== 3) throw new Error(`stats: ${JSON.stringify(stats.queues)}`);
    const token = "smoke-cli-token-0123456789abcdef";
    const dashboard = startScript(
      runtime,
      app,
      { ...env, SKIPQ_DASHBOARD_TOKEN: token },
      bin,
      ["dashboard", "--port", "0"],
      /(http:\/\/127\.0\.0\.1:\d+\/)/,
    );
    const [, url] = await dashboard.started;
    const page = await fetch(url, { headers: { authorization: `Bearer ${token}` } });
    const html = await page.text();
    await dashboard.stop();
    if (page.status !== 200 || !html.includes('data-queue="default"'))
      throw new Error(`dashboard ${page.status}:\n${html.slice(0, 500)}`);
    return "migrate, enqueue, worker, stats, dashboard";
  },
};

let tarball = arg("--tarball");
let tarballDir;
if (!tarball) {
  tarballDir = mkdtempSync(path.join(os.tmpdir(), "skipq-tarball-"));
  const out = execFileSync("node", [path.join(root, "scripts/check-pack.mjs"), "--keep", tarballDir], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "inherit"],
  });
  tarball = out.trim().split("\n").at(-1);
}
const started = performance.now();
const app = makeApp(path.resolve(tarball));
console.log(
  `runtime-smoke: ${path.basename(tarball)} installed in ${app} (${Math.round(performance.now() - started)} ms)`,
);
const results = [];
const record = async (runtime, check, fn) => {
  const t0 = performance.now();
  try {
    const note = await fn();
    results.push({ runtime, check, ok: true });
    console.log(
      `ok    ${runtime.padEnd(7)} ${check.padEnd(10)} ${String(Math.round(performance.now() - t0)).padStart(6)} ms  ${note}`,
    );
  } catch (error) {
    results.push({ runtime, check, ok: false });
    console.log(
      `FAIL  ${runtime.padEnd(7)} ${check.padEnd(10)} ${String(Math.round(performance.now() - t0)).padStart(6)} ms`,
    );
    console.log(String(error.message ?? error).replace(/^/gm, "      "));
  }
};

await record("tsc", "types", async () => {
  try {
    await run(process.execPath, ["node_modules/typescript/bin/tsc", "-p", "tsconfig.json"], { cwd: app });
  } catch (error) {
    throw new Error(`${error.stdout}${error.stderr}`);
  }
  return "strict, exactOptionalPropertyTypes, no skipLibCheck: ESM and CommonJS consumers compile";
});

const admin = new pg.Client({ connectionString: DATABASE_URL });
await admin.connect();
try {
  for (const runtime of runtimes) {
    const schema = `smoke_${runtime}_${process.pid}`;
    const env = { ...process.env, DATABASE_URL, SKIPQ_SCHEMA: schema, NO_COLOR: "1" };
    delete env.NODE_OPTIONS;
    for (const [name, check] of Object.entries(checks)) {
      await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
      await record(runtime, name, () => check(runtime, app, env));
    }
    await admin.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  }
} finally {
  await admin.end();
  rmSync(app, { recursive: true, force: true });
  if (tarballDir) rmSync(tarballDir, { recursive: true, force: true });
}
const failed = results.filter((r) => !r.ok);
console.log(`runtime-smoke: ${results.length - failed.length} passed, ${failed.length} failed`);
process.exit(failed.length > 0 ? 1 : 0);
