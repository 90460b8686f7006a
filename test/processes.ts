/**
 * Test helper: real worker processes (test/fixtures/worker-process.mjs, which
 * runs the built package from dist/). Each prints "ready" when started; tests
 * wait for that, send commands on stdin, and stop them with SIGTERM.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { existsSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { DATABASE_URL } from "./helpers.js";

const here = path.dirname(fileURLToPath(import.meta.url));
const fixture = path.join(here, "fixtures", "worker-process.mjs");

export interface WorkerProcess {
  child: ChildProcess;
  /** Every line it printed (stdout), parsed as JSON where possible. */
  lines: unknown[];
  ready: Promise<void>;
  send(command: string): void;
  /** Resolves with the first printed object for which `match` is true. */
  waitFor(match: (line: unknown) => boolean, timeoutMs?: number): Promise<unknown>;
  stop(): Promise<number | null>;
}

export function startWorkerProcesses(count: number, env: Record<string, string>): WorkerProcess[] {
  if (!existsSync(path.join(here, "..", "dist", "src", "index.js")))
    throw new Error("dist/ is missing: run `npm run build` (npm test does) before the multi-process tests");
  return Array.from({ length: count }, (_, index) => {
    const child = spawn(process.execPath, [fixture], {
      env: { ...process.env, DATABASE_URL, INDEX: String(index), ...env },
      stdio: ["pipe", "pipe", "inherit"],
    });
    const lines: unknown[] = [];
    const waiters: Array<{ match: (line: unknown) => boolean; resolve: (line: unknown) => void }> = [];
    let buffer = "";
    child.stdout?.setEncoding("utf8");
    child.stdout?.on("data", (chunk: string) => {
      buffer += chunk;
      let nl = buffer.indexOf("\n");
      while (nl >= 0) {
        const text = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        nl = buffer.indexOf("\n");
        if (!text) continue;
        let line: unknown = text;
        try {
          line = JSON.parse(text);
        } catch {}
        lines.push(line);
        for (const w of [...waiters])
          if (w.match(line)) {
            waiters.splice(waiters.indexOf(w), 1);
            w.resolve(line);
          }
      }
    });
    const exited = new Promise<number | null>((resolve) => child.on("exit", (code) => resolve(code)));
    const waitFor = (match: (line: unknown) => boolean, timeoutMs = 30_000) => {
      const found = lines.find(match);
      if (found !== undefined) return Promise.resolve(found);
      return new Promise<unknown>((resolve, reject) => {
        const timer = setTimeout(
          () =>
            reject(
              new Error(
                `worker process ${index} printed nothing matching in ${timeoutMs} ms: ${JSON.stringify(lines)}`,
              ),
            ),
          timeoutMs,
        );
        waiters.push({
          match,
          resolve: (line) => {
            clearTimeout(timer);
            resolve(line);
          },
        });
        exited.then((code) => reject(new Error(`worker process ${index} exited (${code}): ${JSON.stringify(lines)}`)));
      });
    };
    return {
      child,
      lines,
      ready: waitFor((l) => l === "ready").then(() => undefined),
      send: (command) => child.stdin?.write(`${command}\n`),
      waitFor,
      async stop() {
        if (child.exitCode === null) child.kill("SIGTERM");
        return exited;
      },
    };
  });
}

/** The ledger the fixture's handlers write to. */
export async function createLedger(db: { query(sql: string): Promise<unknown> }, schema: string): Promise<void> {
  await db.query(`CREATE TABLE "${schema}".ledger (job_id text PRIMARY KEY, queue text, key text, pid int,
                    started timestamptz NOT NULL, ended timestamptz, note text)`);
}
