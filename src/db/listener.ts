/**
 * The listener: one dedicated connection that LISTENs on the schema's channel
 * and wakes the worker when a job arrives in one of its queues.
 *
 * It is an optimisation, never a dependency: polling goes on regardless, and a
 * lost connection (terminated backend, restarted server, network) is
 * reconnected with capped exponential backoff. A connection that goes silent
 * without an error (half-open: a NAT or firewall dropped the flow, no FIN or
 * RST ever arrives) is found by a ping every `pingIntervalMs` that must answer
 * within `pingTimeoutMs`; TCP keepalive alone takes the OS default of hours.
 * The ping also reconnects from a server that turned read-only (a primary
 * demoted by a failover), where no enqueue can commit, so no NOTIFY can come.
 * Notifications carry the queue name only.
 */

import pg from "pg";
import { retryWaitMs } from "../core/backoff.js";
import type { Logger } from "../core/logger.js";
import { type ConnectionTarget, parseConnectionString } from "./connectionString.js";
import { connectionOptions, type ResolvedSettings, SessionClient, targetOptions } from "./pool.js";

export interface ListenerOptions {
  connectionString: string;
  /** Sent with the connection (tcp_user_timeout, keepalives …). Default: none. */
  sessionSettings?: ResolvedSettings;
  channel: string;
  onNotify: (queue: string) => void;
  onConnectionChange?: (connected: boolean) => void;
  /** The connection's application_name (seen in pg_stat_activity). Default "skipq:listener". */
  applicationName?: string;
  logger: Logger;
  /** Longest wait between reconnect attempts, ms. Default 5000. */
  maxBackoffMs?: number;
  /** Time between pings of an idle connection, ms. Default 5000. */
  pingIntervalMs?: number;
  /** A ping (or the LISTEN at connect) not answered within this is a lost connection, ms. Default 5000. */
  pingTimeoutMs?: number;
}

/** The ping: answers at all (the connection is not half-open), and whether the server can still take writes. */
const READ_ONLY_PING = "SELECT pg_is_in_recovery() OR current_setting('transaction_read_only') = 'on' AS read_only";

export class Listener {
  /** The server process id of the LISTEN connection, while connected (tests terminate it). */
  backendPid: number | undefined;
  connected = false;
  private client: pg.Client | undefined;
  private running = false;
  private failures = 0;
  private retryTimer: NodeJS.Timeout | undefined;
  private pingTimer: NodeJS.Timeout | undefined;

  /** The parsed connection string: a malformed one fails here, before any connection is tried. */
  private readonly target: ConnectionTarget;

  constructor(private readonly options: ListenerOptions) {
    this.target = parseConnectionString(options.connectionString);
  }

  /** Connects and LISTENs; resolves after the first attempt, whether or not it succeeded. Idempotent. */
  async start(): Promise<void> {
    if (this.running) return;
    this.running = true;
    await this.connect();
  }

  /** Closes the connection and stops reconnecting. Safe before start and twice. */
  async stop(): Promise<void> {
    this.running = false;
    clearTimeout(this.retryTimer);
    clearInterval(this.pingTimer);
    const client = this.client;
    this.client = undefined;
    this.setConnected(false);
    if (client) await client.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (!this.running) return;
    const client = new SessionClient({
      ...targetOptions(this.target),
      ...connectionOptions(this.options.sessionSettings ?? false),
      application_name: this.options.applicationName ?? "skipq:listener",
      // A read timeout on every statement (LISTEN, the pings): without one, a half-open connection
      // leaves a query waiting forever.
      query_timeout: this.options.pingTimeoutMs ?? 5000,
    });
    client.on("notification", (message) => {
      if (message.payload) this.options.onNotify(message.payload);
    });
    const lost = (error?: Error) => {
      if (this.client !== client) return;
      this.client = undefined;
      clearInterval(this.pingTimer);
      this.setConnected(false);
      client.end().catch(() => undefined);
      if (this.running) {
        // One line when the connection is lost, then one per 20 failed attempts: an outage costs a few lines.
        if (this.failures === 0) {
          this.options.logger.warn(
            { err: error },
            "skipq: listener connection lost; polling continues while it reconnects",
          );
        } else if (this.failures % 20 === 0) {
          this.options.logger.warn(
            { err: error, failures: this.failures },
            "skipq: listener still cannot connect; polling continues while it retries with backoff",
          );
        }
        this.scheduleReconnect();
      }
    };
    client.on("error", lost);
    client.on("end", () => lost());
    // The server reported it no longer fits target_session_attrs (a primary turned read-only): move now.
    client.onUnfit = () => lost(new Error("the server no longer fits target_session_attrs; reconnecting"));
    this.client = client;
    try {
      await client.connect();
      await client.query(`LISTEN ${pg.escapeIdentifier(this.options.channel)}`);
      const { rows } = await client.query<{ pid: number }>("SELECT pg_backend_pid() AS pid");
      this.backendPid = rows[0]?.pid;
      if (!this.running || this.client !== client) {
        await client.end().catch(() => undefined);
        return;
      }
      this.failures = 0;
      this.setConnected(true);
      clearInterval(this.pingTimer);
      this.pingTimer = setInterval(() => {
        client.query(READ_ONLY_PING).then(
          ({ rows }) => {
            // A demoted primary (after a failover) answers but will never carry a NOTIFY again.
            if (rows[0]?.read_only) lost(new Error("the server is read-only (demoted or a standby); reconnecting"));
          },
          (error: Error) => lost(error),
        );
      }, this.options.pingIntervalMs ?? 5000);
      this.pingTimer.unref();
    } catch (error) {
      lost(error as Error);
    }
  }

  private scheduleReconnect(): void {
    clearTimeout(this.retryTimer);
    const delay = retryWaitMs(++this.failures, 100, this.options.maxBackoffMs ?? 5000);
    this.retryTimer = setTimeout(() => void this.connect(), delay);
    this.retryTimer.unref();
  }

  private setConnected(connected: boolean): void {
    if (this.connected === connected) return;
    this.connected = connected;
    if (!connected) this.backendPid = undefined;
    this.options.onConnectionChange?.(connected);
  }
}

/**
 * A worker's listener: one when `listen` is on and there is a connection
 * string, else undefined (logged when `listen` is on: polling covers).
 */
export function workerListener(o: {
  listen: boolean;
  url: string | undefined;
  sessionSettings: ResolvedSettings;
  channel: string;
  logger: Logger;
  onNotify: (message: string) => void;
  onConnectionChange: (connected: boolean) => void;
}): Listener | undefined {
  if (o.listen && o.url) {
    return new Listener({
      connectionString: o.url,
      sessionSettings: o.sessionSettings,
      channel: o.channel,
      logger: o.logger,
      onNotify: o.onNotify,
      onConnectionChange: o.onConnectionChange,
    });
  }
  if (o.listen) {
    o.logger.info(
      {},
      "skipq: LISTEN is off (the client was given a pool, not a connection string); pass listenConnectionString for instant wake-ups — polling covers meanwhile",
    );
  }
  return undefined;
}
