/**
 * The fleet suite's setup: namespace hosts (net.ts), one embedded PostgreSQL
 * listening on loopback and on each host's root-side address, worker
 * processes started inside a host, and the settings every fleet row uses.
 *
 * Invariants: the namespaces exist before the server starts (it binds their
 * addresses) and are removed after it stops, whatever the tests did; every
 * worker process is killed after each test.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, afterEach, beforeAll } from "vitest";
import type { EmbeddedPostgres } from "../../src/internal/embeddedPostgres.js";
import {
  CHAOS_WORKER,
  type ChaosQueue,
  type ChildHandle,
  chaosQueue,
  killAllChildren,
  killProcesses,
  spawnWorker,
  startServer,
} from "../chaos/harness.js";
import type { ChildConfig } from "../chaos/ledger.js";
import { Fleet, type Host, namespacesUnavailable } from "./net.js";

const here = path.dirname(fileURLToPath(import.meta.url));

/** The chaos suite's short leases (lease 2 s, heartbeat 0.5 s, reaper 0.2 s, leader lease 2 s), 10 handlers. */
export const FLEET_WORKER = { ...CHAOS_WORKER, concurrency: 10 } as const;

/**
 * The session settings scaled to those leases (production: the defaults, scaled to 30 s leases): the server
 * drops a peer that stopped acknowledging after 2 s, an idle one after 1 + 1 × 2 s.
 */
export const FLEET_SESSION = {
  tcp_user_timeout: 2000,
  tcp_keepalives_idle: 1,
  tcp_keepalives_interval: 1,
  tcp_keepalives_count: 2,
  idle_in_transaction_session_timeout: 2000,
} as const;

export const FLEET_CONFIG =
  "lease 2s, heartbeat 0.5s, reaper 0.2s, leader lease 2s, concurrency 10; server drops a silent peer after 2 s (tcp_user_timeout), an idle one after 3 s (keepalives), idle transactions after 2 s";

export interface FleetSuite {
  readonly fleet: Fleet;
  readonly server: EmbeddedPostgres;
  queue(label: string): Promise<ChaosQueue>;
  /** The server's URL as seen from `host`. */
  urlFor(host: Host): string;
  /** A worker process inside `host`, with the fleet's settings unless `config` overrides them. */
  spawn(q: ChaosQueue, host: Host, config?: Partial<Omit<ChildConfig, "schema" | "ledger">>): Promise<ChildHandle>;
}

export function fleetSuite(hostCount: number, settings: Record<string, string> = {}): FleetSuite {
  const fleet = new Fleet();
  let server: EmbeddedPostgres | undefined;
  let dir = "";
  const queues: ChaosQueue[] = [];
  beforeAll(async () => {
    const unavailable = hostCount > 0 ? namespacesUnavailable() : undefined;
    if (unavailable) throw new Error(`the fleet suite cannot run here: ${unavailable}`);
    if (hostCount > 0) fleet.addHosts(hostCount);
    dir = mkdtempSync(path.join(os.tmpdir(), "skipq-fleet-"));
    chmodSync(dir, 0o755);
    const hba = path.join(dir, "pg_hba.conf");
    // Trust on loopback and on the hosts' range only, as the throwaway server's own file does for loopback.
    writeFileSync(hba, "host all all 127.0.0.1/32 trust\nhost all all 198.18.0.0/15 trust\n");
    chmodSync(hba, 0o644);
    server = await startServer({
      listen_addresses: ["127.0.0.1", ...fleet.serverAddresses].join(","),
      hba_file: hba,
      ...settings,
    });
  });
  afterEach(async () => {
    await killAllChildren();
    await killDrainChildren();
  });
  afterAll(async () => {
    await killAllChildren();
    await killDrainChildren();
    for (const q of queues) await q.cleanup();
    await server?.stop();
    fleet.destroy();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  const running = (): EmbeddedPostgres => {
    if (!server) throw new Error("the fleet's server starts in beforeAll");
    return server;
  };
  const urlFor = (host: Host) => `postgres://postgres@${host.serverAddress}:${running().port}/postgres`;
  return {
    fleet,
    get server() {
      return running();
    },
    async queue(label) {
      const q = await chaosQueue(running().url, label);
      queues.push(q);
      return q;
    },
    urlFor,
    spawn(q, host, config = {}) {
      return spawnWorker(
        q,
        { url: urlFor(host), worker: { ...FLEET_WORKER }, sessionSettings: { ...FLEET_SESSION }, ...config },
        { prefix: fleet.prefix(host) },
      );
    },
  };
}

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
