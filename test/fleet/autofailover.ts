/**
 * pg_auto_failover (Debian's postgresql-15-auto-failover and pg-auto-failover-cli)
 * as the fleet's real failover manager: a monitor on one namespace host and a
 * keeper with its PostgreSQL on each database host, all run by `pg_autoctl
 * ... --run` as the postgres user. The monitor decides and the keepers carry
 * out every promotion; the test only breaks a host.
 *
 * Invariants: each pg_autoctl runs in a mount namespace of its own where
 * /run/postgresql is a private directory (the machine's PostgreSQL keeps its
 * socket there; nothing here may touch it) and with XDG folders under its
 * temp home, so nothing is written outside that home; each is the leader of
 * its own process group, so kill() ends that node's keeper and PostgreSQL
 * together (a host that died) and nothing else; stop() removes every home.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { appendFileSync, chmodSync, chownSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { until } from "../until.js";
import type { Lan, LanHost } from "./lan.js";

const PGCTL = "/usr/lib/postgresql/15/bin/pg_ctl";

/** Why pg_auto_failover cannot run here, or undefined. */
export function autoFailoverUnavailable(): string | undefined {
  try {
    execFileSync("pg_autoctl", ["--version"], { stdio: "ignore" });
  } catch {
    return "pg_autoctl is missing (Debian's pg-auto-failover-cli and postgresql-15-auto-failover; .ci/run installs them)";
  }
  return undefined;
}

/**
 * The monitor's settings, scaled to the fleet's 2 s leases (defaults: health checks every 5 s, a node unhealthy
 * after 20 s, 30 s for an old primary to demote itself before its standby may take writes).
 */
export const MONITOR_SETTINGS = {
  health_check_period: "1000",
  health_check_timeout: "1000",
  health_check_max_retries: "1",
  health_check_retry_delay: "500",
  node_considered_unhealthy_timeout: "3000",
  primary_demote_timeout: "5000",
} as const;

function ids(): { uid: number; gid: number } {
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

class Node {
  readonly home: string;
  proc: ChildProcess | undefined;
  log = "";

  constructor(
    readonly name: string,
    readonly host: LanHost,
    private readonly lan: Lan,
  ) {
    const { uid, gid } = ids();
    this.home = mkdtempSync(path.join(os.tmpdir(), `skipq-paf-${name}-`));
    chmodSync(this.home, 0o755);
    for (const dir of ["sock", "config", "data"]) mkdirSync(path.join(this.home, dir));
    execFileSync("chown", ["-R", `${uid}:${gid}`, this.home]);
    chownSync(this.home, uid, gid);
  }

  get pgdata(): string {
    return path.join(this.home, "pgdata");
  }

  private env(): NodeJS.ProcessEnv {
    return {
      PATH: `/usr/lib/postgresql/15/bin:${process.env.PATH ?? "/usr/bin:/bin"}`,
      HOME: this.home,
      XDG_CONFIG_HOME: path.join(this.home, "config"),
      XDG_DATA_HOME: path.join(this.home, "data"),
      XDG_RUNTIME_DIR: path.join(this.home, "sock"),
      PGHOST: path.join(this.home, "sock"),
      LC_ALL: "C",
    };
  }

  /** `pg_autoctl <args>` on this node's host, as postgres, with /run/postgresql private to it. */
  private command(args: string[]): string[] {
    const { uid, gid } = ids();
    const script = `mount --bind ${path.join(this.home, "sock")} /run/postgresql && exec setpriv --reuid=${uid} --regid=${gid} --clear-groups pg_autoctl "$@"`;
    return [
      ...this.lan.prefix(this.host),
      "unshare",
      "-m",
      "--propagation",
      "private",
      "sh",
      "-c",
      script,
      "sh",
      ...args,
    ];
  }

  /** Runs `pg_autoctl <args>` in the background (its own process group). */
  run(args: string[]): void {
    const [file, ...rest] = this.command(args);
    const proc = spawn(file as string, rest, { detached: true, stdio: ["ignore", "pipe", "pipe"], env: this.env() });
    this.proc = proc;
    const keep = (chunk: Buffer) => {
      if (this.log.length < 200_000) this.log += chunk.toString("utf8");
    };
    proc.stdout?.on("data", keep);
    proc.stderr?.on("data", keep);
  }

  /** `pg_autoctl <args>` to completion; its stdout. */
  exec(args: string[]): string {
    const [file, ...rest] = this.command(args);
    return execFileSync(file as string, rest, { env: this.env(), encoding: "utf8", stdio: ["ignore", "pipe", "pipe"] });
  }

  /** SIGKILLs the node's whole process group: keeper, PostgreSQL, everything it started (the host died). */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc?.pid || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    try {
      process.kill(-proc.pid, "SIGKILL");
    } catch {
      /* already gone */
    }
    await exited;
    // The postmaster may have left the group (pg_ctl starts it in its own session): its pid is in its lock file.
    try {
      const pid = Number(readFileSync(path.join(this.pgdata, "postmaster.pid"), "utf8").split("\n")[0]);
      // Only that postmaster: a stale lock file's pid may belong to another process by now.
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, "utf8");
      if (pid > 0 && cmdline.includes(this.pgdata)) process.kill(pid, "SIGKILL");
    } catch {
      /* no lock file, or no such process */
    }
  }

  async remove(): Promise<void> {
    await this.kill();
    rmSync(this.home, { recursive: true, force: true });
  }
}

async function query<R extends pg.QueryResultRow>(url: string, text: string): Promise<R[]> {
  const client = new pg.Client({ connectionString: url, connectionTimeoutMillis: 3000 });
  client.on("error", () => undefined);
  await client.connect();
  try {
    return (await client.query<R>(text)).rows;
  } finally {
    await client.end().catch(() => undefined);
  }
}

export interface NodeState {
  nodename: string;
  reportedstate: string;
  goalstate: string;
}

/** A monitor and two data nodes; the first one created starts as the primary. */
export class AutoFailoverCluster {
  monitor: Node | undefined;
  readonly nodes: Node[] = [];

  constructor(private readonly lan: Lan) {}

  /** The monitor's URL for the keepers (pg_auto_failover's own role). */
  get monitorUrl(): string {
    return `postgres://autoctl_node@${this.monitor?.host.address}:5432/pg_auto_failover`;
  }

  /** The monitor on `host`, tuned with MONITOR_SETTINGS. */
  async startMonitor(host: LanHost): Promise<void> {
    const monitor = new Node("monitor", host, this.lan);
    this.monitor = monitor;
    monitor.run([
      "create",
      "monitor",
      "--pgdata",
      monitor.pgdata,
      "--pgport",
      "5432",
      "--hostname",
      host.address,
      "--auth",
      "trust",
      "--ssl-self-signed",
      "--pgctl",
      PGCTL,
      "--run",
    ]);
    const keeperUrl = `${this.monitorUrl}?sslmode=require&uselibpqcompat=true`;
    await until(
      "the monitor up",
      () =>
        query(keeperUrl, "SELECT 1 AS ok").then(
          () => true,
          () => false,
        ),
      60_000,
      200,
    );
    // The test's own address may change the monitor's settings (ALTER SYSTEM needs the superuser).
    appendFileSync(path.join(monitor.pgdata, "pg_hba.conf"), `hostssl all postgres ${this.lan.rootAddress}/32 trust\n`);
    const pid = Number(readFileSync(path.join(monitor.pgdata, "postmaster.pid"), "utf8").split("\n")[0]);
    process.kill(pid, "SIGHUP");
    const admin = `postgres://postgres@${host.address}:5432/pg_auto_failover?sslmode=require&uselibpqcompat=true`;
    await until(
      "the monitor's superuser",
      () =>
        query(admin, "SELECT 1").then(
          () => true,
          () => false,
        ),
      10_000,
      100,
    );
    for (const [name, value] of Object.entries(MONITOR_SETTINGS)) {
      await query(admin, `ALTER SYSTEM SET pgautofailover.${name} = ${value}`);
    }
    await query(admin, "SELECT pg_reload_conf()");
  }

  /** A keeper and its PostgreSQL on `host`; resolves once the monitor sees it in `state`. */
  async addNode(name: string, host: LanHost, state: "single" | "secondary"): Promise<void> {
    const node = new Node(name, host, this.lan);
    this.nodes.push(node);
    node.run([
      "create",
      "postgres",
      "--pgdata",
      node.pgdata,
      "--pgport",
      "5432",
      "--hostname",
      host.address,
      "--name",
      name,
      "--monitor",
      `${this.monitorUrl}?sslmode=require`,
      "--auth",
      "trust",
      "--ssl-self-signed",
      "--pg-hba-lan",
      "--pgctl",
      PGCTL,
      "--run",
    ]);
    await until(
      `${name} ${state}`,
      async () => (await this.states().catch(() => [])).some((n) => n.nodename === name && n.reportedstate === state),
      90_000,
      250,
    );
  }

  /** Every node's state as the monitor sees it. */
  states(): Promise<NodeState[]> {
    return query<NodeState>(
      `postgres://postgres@${this.monitor?.host.address}:5432/pg_auto_failover?sslmode=require&uselibpqcompat=true`,
      "SELECT nodename, reportedstate, goalstate FROM pgautofailover.node ORDER BY nodeid",
    );
  }

  /** Waits until the formation is a primary with a secondary, each in the state it was asked to reach. */
  async healthy(timeoutMs = 90_000): Promise<void> {
    await until(
      "a primary and a secondary",
      async () => {
        const states = await this.states().catch(() => []);
        return (
          states.length === this.nodes.length &&
          states.some((s) => s.reportedstate === "primary" && s.goalstate === "primary") &&
          states.some((s) => s.reportedstate === "secondary" && s.goalstate === "secondary")
        );
      },
      timeoutMs,
      250,
    );
  }

  /** The formation's connection string, as `pg_autoctl show uri` prints it for applications. */
  uri(): string {
    return (this.monitor as Node)
      .exec(["show", "uri", "--formation", "default", "--monitor", `${this.monitorUrl}?sslmode=require`])
      .trim();
  }

  /** The keeper of node `index` started again on its data (after kill()): the monitor tells it what to become. */
  restart(index: number): void {
    const node = this.nodes[index] as Node;
    node.log = "";
    node.run(["run", "--pgdata", node.pgdata]);
  }

  /** The tail of every pg_autoctl's output, for a failure message. */
  logs(): string {
    return [...this.nodes, ...(this.monitor ? [this.monitor] : [])]
      .map((n) => `── ${n.name}:\n${n.log.slice(-3000)}`)
      .join("\n");
  }

  async stop(): Promise<void> {
    for (const node of [...this.nodes, ...(this.monitor ? [this.monitor] : [])]) await node.remove();
    this.nodes.length = 0;
    this.monitor = undefined;
  }
}
