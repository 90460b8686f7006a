/**
 * Lean worker processes for the fleet suite and the fleet bench
 * (drain-child.mjs: the built package, no TypeScript loader), started on this
 * machine or inside a namespace host, and what each reports. No test-runner
 * imports: bench/fleet.ts uses it too.
 *
 * Invariant: every process started here is tracked until it exits, so
 * killDrainChildren() leaves none behind.
 */
import { type ChildProcess, spawn } from "node:child_process";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { killProcesses } from "../chaos/harness.js";

const here = path.dirname(fileURLToPath(import.meta.url));

/** What a drain child (drain-child.mjs) printed at "ready" and at its stop. */
export interface DrainChildReport {
  pid: number;
  listening?: boolean;
  stats?: Record<string, number>;
  errors?: Array<{ context: string; code?: string; message: string }>;
  logged?: Array<{ level: string; msg?: string; code?: string; error?: string }>;
}

export interface DrainChild {
  pid: number;
  ready: Promise<DrainChildReport>;
  /** SIGTERM, then what it reported at its stop. */
  stop(): Promise<DrainChildReport>;
}

const drainChildren = new Set<ChildProcess>();

/**
 * A lean worker process (the built package, no TypeScript loader): `config` is drain-child.mjs's
 * FLEET_CHILD (url, schema, worker options, preparedStatements, sessionSettings); `prefix` runs it in a host.
 */
export function spawnDrainChild(config: Record<string, unknown>, prefix: string[] = []): DrainChild {
  const [command, ...args] = [...prefix, process.execPath, path.join(here, "drain-child.mjs")];
  const proc = spawn(command as string, args, {
    env: { ...process.env, FLEET_CHILD: JSON.stringify(config) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  drainChildren.add(proc);
  proc.once("exit", () => drainChildren.delete(proc));
  const lines: DrainChildReport[] = [];
  const waiting: Array<{ e: string; resolve: (r: DrainChildReport) => void; reject: (e: Error) => void }> = [];
  let buffer = "";
  proc.stdout?.on("data", (chunk: Buffer) => {
    buffer += chunk.toString("utf8");
    for (let i = buffer.indexOf("\n"); i >= 0; i = buffer.indexOf("\n")) {
      const line = JSON.parse(buffer.slice(0, i)) as DrainChildReport & { e: string };
      buffer = buffer.slice(i + 1);
      lines.push(line);
      for (const w of waiting.filter((w) => w.e === line.e)) w.resolve(line);
    }
  });
  const wait = (e: string) =>
    new Promise<DrainChildReport>((resolve, reject) => {
      const seen = lines.find((l) => (l as { e?: string }).e === e);
      if (seen) return resolve(seen);
      waiting.push({ e, resolve, reject });
      // "close", not "exit": the last line may still be in the pipe when the process has exited.
      proc.once("close", (code, signal) => reject(new Error(`drain child exited (${code ?? signal}) before "${e}"`)));
    });
  return {
    pid: proc.pid ?? -1,
    ready: wait("ready"),
    async stop() {
      const stopped = wait("stopped");
      proc.kill("SIGTERM");
      return stopped;
    },
  };
}

/** SIGKILLs every drain child still running. */
export function killDrainChildren(): Promise<void> {
  return killProcesses(drainChildren);
}
