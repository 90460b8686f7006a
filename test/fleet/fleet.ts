/**
 * The fleet suite's setup: namespace hosts (net.ts), one embedded PostgreSQL
 * listening on loopback and on each host's root-side address, worker
 * processes started inside a host, and the settings every fleet row uses.
 *
 * Invariants: the namespaces exist before the server starts (it binds their
 * addresses) and are removed after it stops, whatever the tests did; every
 * worker process is killed after each test.
 */
import { chmodSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import { afterAll, afterEach, beforeAll } from "vitest";
import type { EmbeddedPostgres } from "../../src/embedded/embeddedPostgres.js";
import {
  CHAOS_WORKER,
  type ChaosQueue,
  type ChildHandle,
  chaosQueue,
  killAllChildren,
  spawnWorker,
  startServer,
} from "../chaos/harness.js";
import type { ChildConfig } from "../chaos/ledger.js";
import { killDrainChildren } from "./children.js";
import { Fleet, type Host, namespacesUnavailable } from "./net.js";

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
