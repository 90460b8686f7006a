/**
 * Real streaming replication for tests: PostgreSQL servers run from Debian's
 * binaries (/usr/lib/postgresql/15/bin, or SKIPQ_PG15_BIN), each in a temp
 * data directory on a free port, as the postgres user; a standby is made from
 * its primary with `pg_basebackup -R`, asynchronous or synchronous. A server
 * may run inside a network namespace (the fleet suite's hosts) and listen on
 * that host's address. The suites that need replication use these; they never
 * touch the machine's own PostgreSQL.
 *
 * Invariants: the server process is the postmaster itself (setpriv and
 * `ip netns exec` both exec), so kill() signals the postmaster; every server
 * started is stopped and its data directory removed by stop(), and
 * stopAllServers() (afterAll, and process exit as a last resort) leaves none.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { appendFileSync, chmodSync, chownSync, existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";

export const PG15_BIN = process.env.SKIPQ_PG15_BIN ?? "/usr/lib/postgresql/15/bin";

/** Why these servers cannot run here, or undefined when they can. */
export function replicationUnavailable(): string | undefined {
  if (!existsSync(path.join(PG15_BIN, "postgres")))
    return `no PostgreSQL server binaries at ${PG15_BIN} (Debian's postgresql-15 package; set SKIPQ_PG15_BIN to another bin folder)`;
  return undefined;
}

export async function freePort(host = "127.0.0.1"): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

interface Ids {
  uid: number;
  gid: number;
}

function postgresIds(): Ids | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
  const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
  return { uid, gid };
}

export interface ServerOptions {
  /** Shown in errors and used as the standby's application_name. */
  name: string;
  /** The address it listens on (and is reached at). Default 127.0.0.1. */
  host?: string;
  /** Default: a free port. */
  port?: number;
  /** A command the server runs under, e.g. `ip netns exec <ns>` (it must exec). */
  prefix?: string[];
  /** Extra settings (postgresql.auto.conf). */
  settings?: Record<string, string>;
  /** Addresses trusted in pg_hba.conf besides loopback, e.g. "198.18.0.0/15". */
  trust?: string[];
  /** Appended to url() as its query, e.g. "sslmode=require&uselibpqcompat=true". */
  params?: string;
}

const running = new Set<PgServer>();
process.once("exit", () => {
  for (const s of running) s.killNow();
  for (const dir of dataDirs) rmSync(dir, { recursive: true, force: true });
});
/** Data directories not removed yet (by stop(), or at exit). */
const dataDirs = new Set<string>();

/** One PostgreSQL server from Debian's binaries. */
export class PgServer {
  readonly name: string;
  readonly host: string;
  port = 0;
  dataDir = "";
  private proc: ChildProcess | undefined;
  private readonly ids = postgresIds();
  private log = "";

  constructor(private readonly options: ServerOptions) {
    this.name = options.name;
    this.host = options.host ?? "127.0.0.1";
    this.port = options.port ?? 0;
  }

  /** postgres://postgres@host:port/db */
  url(db = "postgres"): string {
    const query = this.options.params ? `?${this.options.params}` : "";
    return `postgres://postgres@${this.host.includes(":") ? `[${this.host}]` : this.host}:${this.port}/${db}${query}`;
  }

  /** The server's log so far (its stderr), for failure messages. */
  get output(): string {
    return this.log;
  }

  /** A fresh cluster (initdb), configured for replication, started. */
  async initPrimary(): Promise<this> {
    this.dataDir = this.makeDir();
    this.run(path.join(PG15_BIN, "initdb"), [
      `--pgdata=${this.dataDir}`,
      "--auth=trust",
      "--username=postgres",
      "--encoding=UTF8",
      "--no-sync",
    ]);
    await this.configure();
    await this.start();
    return this;
  }

  /**
   * A standby of `primary` (pg_basebackup -R: standby.signal and primary_conninfo written by the tool, with
   * application_name = this server's name, which synchronous_standby_names can name), started.
   */
  async initStandbyOf(primary: PgServer): Promise<this> {
    this.dataDir = this.makeDir();
    this.run(path.join(PG15_BIN, "pg_basebackup"), [
      "-d",
      `host=${primary.host} port=${primary.port} user=postgres application_name=${this.name}`,
      "-D",
      this.dataDir,
      "-R",
      "-X",
      "stream",
      "--checkpoint=fast",
      "--no-sync",
    ]);
    chmodSync(this.dataDir, 0o700);
    await this.configure();
    await this.start();
    return this;
  }

  private makeDir(): string {
    const dir = mkdtempSync(path.join(os.tmpdir(), `skipq-pg15-${this.name}-`));
    dataDirs.add(dir);
    chmodSync(dir, 0o700);
    if (this.ids) chownSync(dir, this.ids.uid, this.ids.gid);
    return dir;
  }

  private async configure(): Promise<void> {
    // A loopback server takes a free port; one on a namespace host's own address has the host to itself.
    this.port = this.options.port ?? (this.host === "127.0.0.1" ? await freePort() : 5432);
    const trust = ["127.0.0.1/32", ...(this.options.trust ?? [])];
    const hba = trust.flatMap((cidr) => [`host all all ${cidr} trust`, `host replication all ${cidr} trust`]);
    writeFileSync(path.join(this.dataDir, "pg_hba.conf"), `${hba.join("\n")}\n`);
    const settings: Record<string, string> = {
      // Inside a namespace host: every address it has, the virtual IP included once it moves there.
      listen_addresses: this.host === "127.0.0.1" ? "'127.0.0.1'" : "'*'",
      port: String(this.port),
      unix_socket_directories: "''",
      max_connections: "200",
      shared_buffers: "64MB",
      fsync: "off",
      full_page_writes: "off",
      wal_level: "replica",
      max_wal_senders: "10",
      hot_standby: "on",
      wal_keep_size: "256MB",
      logging_collector: "off",
      log_min_messages: "warning",
      ...this.options.settings,
    };
    appendFileSync(
      path.join(this.dataDir, "postgresql.auto.conf"),
      `${Object.entries(settings)
        .map(([k, v]) => `${k} = ${v}`)
        .join("\n")}\n`,
    );
    if (this.ids) execFileSync("chown", ["-R", `${this.ids.uid}:${this.ids.gid}`, this.dataDir]);
  }

  /** Appends settings to postgresql.auto.conf (the server reads them at its next start or reload). */
  setSettings(settings: Record<string, string>): void {
    appendFileSync(
      path.join(this.dataDir, "postgresql.auto.conf"),
      `${Object.entries(settings)
        .map(([k, v]) => `${k} = ${v}`)
        .join("\n")}\n`,
    );
  }

  /** Starts the postmaster on its data directory; resolves once it accepts connections. */
  async start(): Promise<void> {
    const command = [...(this.options.prefix ?? [])];
    // setpriv execs (no fork), so the process spawned is the postmaster.
    if (this.ids) command.push("setpriv", `--reuid=${this.ids.uid}`, `--regid=${this.ids.gid}`, "--clear-groups");
    command.push(path.join(PG15_BIN, "postgres"), "-D", this.dataDir);
    const proc = spawn(command[0] as string, command.slice(1), {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, LC_MESSAGES: "C", LC_ALL: "C" },
    });
    this.proc = proc;
    running.add(this);
    this.log = "";
    await new Promise<void>((resolve, reject) => {
      proc.stderr?.on("data", (chunk: Buffer) => {
        const text = chunk.toString("utf8");
        if (this.log.length < 100_000) this.log += text;
        if (/ready to accept (read-only )?connections/.test(text)) resolve();
      });
      proc.once("exit", (code, signal) => {
        running.delete(this);
        reject(new Error(`PostgreSQL ${this.name} exited during start (${code ?? signal}):\n${this.log}`));
      });
    });
    proc.stderr?.resume();
  }

  /** The postmaster's pid while it runs. */
  get pid(): number | undefined {
    return this.proc?.exitCode === null && this.proc.signalCode === null ? this.proc.pid : undefined;
  }

  /** Sends `signal` to the postmaster (SIGKILL: a crash; SIGINT: a fast shutdown); resolves once it exited. */
  async kill(signal: NodeJS.Signals = "SIGKILL"): Promise<void> {
    const proc = this.proc;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once("exit", () => resolve()));
    proc.kill(signal);
    await exited;
    running.delete(this);
  }

  /**
   * Starts the server again on its data directory (after kill()). A SIGKILLed postmaster's backends exit on
   * their own within moments, but until they have, the next start finds their shared memory still in use:
   * it is tried again a few times.
   */
  async restart(settings: Record<string, string> = {}): Promise<void> {
    if (Object.keys(settings).length > 0) this.setSettings(settings);
    for (let attempt = 1; ; attempt++) {
      try {
        await this.start();
        return;
      } catch (error) {
        if (attempt >= 20 || !/still in use|already in use/.test((error as Error).message)) throw error;
        await new Promise((resolve) => setTimeout(resolve, 250));
      }
    }
  }

  killNow(): void {
    this.proc?.kill("SIGKILL");
  }

  /** Fast shutdown and removal of the data directory. Safe twice. */
  async stop(): Promise<void> {
    await this.kill("SIGINT");
    if (this.dataDir) rmSync(this.dataDir, { recursive: true, force: true });
    dataDirs.delete(this.dataDir);
    this.dataDir = "";
  }

  private run(file: string, args: string[]): void {
    const command = [...(this.options.prefix ?? [])];
    if (this.ids) command.push("setpriv", `--reuid=${this.ids.uid}`, `--regid=${this.ids.gid}`, "--clear-groups");
    command.push(file, ...args);
    try {
      execFileSync(command[0] as string, command.slice(1), {
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, LC_ALL: "C", LC_MESSAGES: "C" },
        cwd: os.tmpdir(),
      });
    } catch (error) {
      const e = error as { stderr?: Buffer; message: string };
      throw new Error(`${path.basename(file)} for ${this.name} failed: ${e.stderr?.toString() ?? e.message}`);
    }
  }

  /** One statement on a short-lived connection to this server alone. */
  async query<R extends pg.QueryResultRow = Record<string, unknown>>(text: string, values: unknown[] = []) {
    const client = new pg.Client({ connectionString: this.url(), connectionTimeoutMillis: 5000 });
    client.on("error", () => undefined);
    await client.connect();
    try {
      return await client.query<R>(text, values);
    } finally {
      await client.end().catch(() => undefined);
    }
  }

  /** Promotes this standby and waits until it takes writes. */
  async promote(): Promise<void> {
    await this.query("SELECT pg_promote(true, 60)");
  }
}

/** Stops every server these helpers started (afterAll safety net). */
export async function stopAllServers(): Promise<void> {
  await Promise.all([...running].map((s) => s.stop()));
}

export interface ReplicaSet {
  primary: PgServer;
  standby: PgServer;
  /** Stops both and removes their data. */
  stop(): Promise<void>;
}

/**
 * A primary and its streaming standby. `sync`: the primary waits for the standby's flush on every commit
 * (synchronous_standby_names names it, synchronous_commit on).
 */
export async function replicaSet(
  o: { sync?: boolean; primary?: Partial<ServerOptions>; standby?: Partial<ServerOptions> } = {},
): Promise<ReplicaSet> {
  const primary = new PgServer({
    name: "primary",
    ...o.primary,
    settings: {
      synchronous_commit: "on",
      ...(o.sync ? { synchronous_standby_names: "'standby'" } : {}),
      ...o.primary?.settings,
    },
  });
  await primary.initPrimary();
  // The base backup copies the primary's settings; once promoted, the standby must not wait for a standby of
  // its own that does not exist (a failover manager clears synchronous_standby_names on promotion too).
  const standby = new PgServer({
    name: "standby",
    ...o.standby,
    settings: { synchronous_standby_names: "''", ...o.standby?.settings },
  });
  try {
    await standby.initStandbyOf(primary);
  } catch (error) {
    await primary.stop();
    throw error;
  }
  return {
    primary,
    standby,
    async stop() {
      await standby.stop();
      await primary.stop();
    },
  };
}

/** Waits until `standby` has replayed everything `primary` has written so far. */
export async function caughtUp(primary: PgServer, standby: PgServer, timeoutMs = 20_000): Promise<void> {
  const { rows } = await primary.query<{ lsn: string }>("SELECT pg_current_wal_insert_lsn()::text AS lsn");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await standby.query<{ ok: boolean }>("SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok", [
      rows[0]?.lsn,
    ]);
    if (r.rows[0]?.ok) return;
    if (Date.now() > deadline) throw new Error(`standby ${standby.name} did not catch up within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
