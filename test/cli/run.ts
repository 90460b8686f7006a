/**
 * Runs the BUILT `skipq` binary (bin/skipq.js → dist/) as a subprocess, the
 * way a user does. `npm test` builds first; the dev loop runs `tsc -p
 * tsconfig.build.json` before vitest. The environment is explicit per call so
 * a test controls DATABASE_URL and SKIPQ_SCHEMA exactly.
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const BIN = path.join(ROOT, "bin/skipq.js");

export interface Result {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface Running {
  child: ChildProcess;
  /** Everything written so far. */
  stdout(): string;
  stderr(): string;
  exited: Promise<Result>;
}

/** Environment for the CLI: no inherited DATABASE_URL/SKIPQ_SCHEMA unless given. */
export function cliEnv(env: Record<string, string | undefined> = {}): NodeJS.ProcessEnv {
  const base: NodeJS.ProcessEnv = { ...process.env };
  delete base.DATABASE_URL;
  delete base.SKIPQ_SCHEMA;
  for (const [key, value] of Object.entries(env)) {
    if (value === undefined) delete base[key];
    else base[key] = value;
  }
  return base;
}

export function start(args: string[], env: Record<string, string | undefined> = {}): Running {
  const child = spawn(process.execPath, [BIN, ...args], {
    cwd: ROOT,
    env: cliEnv(env),
    stdio: ["ignore", "pipe", "pipe"],
  });
  let stdout = "";
  let stderr = "";
  child.stdout?.on("data", (chunk: Buffer) => {
    stdout += chunk.toString("utf8");
  });
  child.stderr?.on("data", (chunk: Buffer) => {
    stderr += chunk.toString("utf8");
  });
  const exited = new Promise<Result>((resolve) => {
    child.on("close", (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  return { child, stdout: () => stdout, stderr: () => stderr, exited };
}

/** Runs the CLI to completion. */
export function skipq(args: string[], env: Record<string, string | undefined> = {}): Promise<Result> {
  return start(args, env).exited;
}
