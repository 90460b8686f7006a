/**
 * A throwaway PgBouncer (Debian's pgbouncer) in front of a test's own
 * PostgreSQL: a generated ini in a temporary directory, a free port on
 * 127.0.0.1, transaction pooling unless told otherwise. The chaos suite's B1
 * row and the fleet suite use it.
 *
 * Invariants: it never touches the machine's PostgreSQL or PgBouncer; stop()
 * ends the process and removes its directory, and is safe twice.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import pg from "pg";
import { until } from "../until.js";

const PGBOUNCER = ["/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"].find((p) => existsSync(p));

export async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const address = s.address();
      s.close(() => resolve(typeof address === "object" && address ? address.port : 0));
    });
  });
}

export interface Bouncer {
  /** postgres://postgres@127.0.0.1:<port>/<database>: the database line that points at the server. */
  url: string;
  /** PgBouncer's log so far. */
  log(): string;
  stop(): Promise<void>;
}

/**
 * Starts PgBouncer for database `database` on the server at `serverPort`; `settings` go to its
 * [pgbouncer] section (e.g. default_pool_size, max_client_conn, tcp_user_timeout).
 */
export async function startBouncer(
  serverPort: number,
  settings: Record<string, string | number> = {},
  database = "chaos",
): Promise<Bouncer> {
  if (!PGBOUNCER) throw new Error("pgbouncer is not installed: apt-get install -y pgbouncer (.ci/run does)");
  const port = await freePort();
  const dir = mkdtempSync(path.join(os.tmpdir(), "skipq-pgbouncer-"));
  chmodSync(dir, 0o777);
  const ini = path.join(dir, "pgbouncer.ini");
  const logfile = path.join(dir, "pgbouncer.log");
  const all: Record<string, string | number> = {
    listen_addr: "127.0.0.1",
    listen_port: port,
    unix_socket_dir: "",
    // No passwords in this throwaway setup: every client logs in as the database line's user.
    auth_type: "any",
    pool_mode: "transaction",
    default_pool_size: 6,
    max_client_conn: 200,
    logfile,
    ignore_startup_parameters: "extra_float_digits",
    ...settings,
  };
  writeFileSync(
    ini,
    [
      "[databases]",
      `${database} = host=127.0.0.1 port=${serverPort} dbname=postgres user=postgres`,
      "[pgbouncer]",
      ...Object.entries(all).map(([k, v]) => `${k} = ${v}`),
    ].join("\n"),
  );
  // PgBouncer refuses to run as root; -u switches to an unprivileged user.
  const asRoot = process.getuid?.() === 0;
  if (asRoot) execFileSync("chown", ["-R", "postgres", dir]);
  const proc: ChildProcess = spawn(PGBOUNCER, asRoot ? ["-u", "postgres", ini] : [ini], { stdio: "ignore" });
  const url = `postgres://postgres@127.0.0.1:${port}/${database}`;
  const stop = async () => {
    if (proc.exitCode === null && proc.signalCode === null) {
      const exited = new Promise((r) => proc.once("exit", r));
      proc.kill("SIGINT");
      await exited;
    }
    rmSync(dir, { recursive: true, force: true });
  };
  try {
    await until(
      "pgbouncer accepts connections",
      async () => {
        const c = new pg.Client({ connectionString: url });
        c.on("error", () => undefined);
        return c.connect().then(
          () => c.end().then(() => true),
          () => false,
        );
      },
      15_000,
      100,
    );
  } catch (error) {
    await stop();
    throw error;
  }
  return { url, log: () => (existsSync(logfile) ? readFileSync(logfile, "utf8") : ""), stop };
}
