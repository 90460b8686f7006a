/**
 * Connections to a host list (libpq's multi-host strings, parsed in
 * connectionString.ts): each new connection tries the hosts in order, checks
 * the server it reached against `target_session_attrs` — `pg_is_in_recovery()`
 * for primary/standby, `transaction_read_only` for read-write/read-only, a
 * standby first and then any server for prefer-standby — and keeps the first
 * that fits. Nothing is remembered between connections: every reconnect
 * chooses again, so after a failover new connections find the new primary.
 *
 * It works one level below node-postgres' Client: a `TargetConnection`
 * replaces the client's wire connection and starts over on the next host when
 * a host refuses, times out (per host), fails before authenticating, or does
 * not fit, so the Client, its pool, LISTEN and COPY see one ordinary
 * connection. After it is open, a server that reports (ParameterStatus,
 * PostgreSQL 14+) that it no longer fits — a primary turned read-only — marks
 * the client `unfit`: pools drop it at its release (pool.ts), the listener
 * reconnects at once.
 *
 * Invariants: a rejected host's socket is closed with all its listeners, so
 * nothing it does later reaches the client; a failed authentication (SQLSTATE
 * class 28) ends the attempt at once (the other hosts would refuse the same
 * credentials); when no host fits, the error lists every host and why, with
 * code 08001 (or the socket code all hosts shared), so callers retry it as
 * "database unavailable". A single host without target_session_attrs is left
 * to node-postgres untouched.
 */
import net from "node:net";
import pg from "pg";
import {
  type ConnectionTarget,
  describeHosts,
  type HostPort,
  hostText,
  parseConnectionString,
  type TargetSessionAttrs,
} from "./connectionString.js";

/** The check run on each server reached, in one simple-protocol round trip after authentication. */
export const SESSION_STATE_SQL =
  "SELECT pg_is_in_recovery() AS in_recovery, current_setting('transaction_read_only') AS read_only";

/** The server's state as the check reads it. */
export interface SessionState {
  inRecovery: boolean;
  readOnly: boolean;
}

/** Whether a server in `state` fits `attrs` (prefer-standby: on its second pass, anything fits). */
export function fits(attrs: TargetSessionAttrs, state: SessionState): boolean {
  switch (attrs) {
    case "read-write":
      return !state.readOnly;
    case "read-only":
      return state.readOnly;
    case "primary":
      return !state.inRecovery;
    case "standby":
    case "prefer-standby":
      return state.inRecovery;
    default:
      return true;
  }
}

/** Why a server that answered does not fit (libpq's wording). */
function mismatch(attrs: TargetSessionAttrs): string {
  if (attrs === "read-write") return "session is read-only";
  if (attrs === "read-only") return "session is not read-only";
  if (attrs === "primary") return "server is in hot standby mode";
  return "server is not in hot standby mode";
}

export interface TargetClientConfig extends pg.ClientConfig {
  /** The parsed connection string (pools parse once); otherwise `connectionString` is parsed here. */
  target?: ConnectionTarget;
  /**
   * The time allowed per host, ms (libpq's connect_timeout, which the URL's own connect_timeout overrides);
   * default `connectionTimeoutMillis`. The whole connect is allowed this much per host tried.
   */
  hostTimeoutMillis?: number;
}

/** Hosts a connect may try: the list once, twice for prefer-standby (standbys, then any). */
export function attemptsOf(target: ConnectionTarget): number {
  return Math.max(1, target.hosts.length) * (target.targetSessionAttrs === "prefer-standby" ? 2 : 1);
}

/**
 * A node-postgres client that reaches the first fitting host of its connection string. `server` is the host it
 * connected to; `unfit` turns true (and `onUnfit` is called) when that server later reports a state that no longer
 * fits.
 */
export class TargetClient extends pg.Client {
  server: HostPort | undefined;
  unfit = false;
  /** Called once when `unfit` turns true. */
  onUnfit: (() => void) | undefined;

  constructor(config: TargetClientConfig = {}) {
    const target =
      config.target ?? (config.connectionString ? parseConnectionString(config.connectionString) : undefined);
    const perHostMs = target?.connectTimeoutMs ?? config.hostTimeoutMillis ?? config.connectionTimeoutMillis ?? 0;
    const managed = target?.managed === true;
    const { target: _target, hostTimeoutMillis: _hostTimeout, ...rest } = config;
    super(
      managed
        ? {
            ...rest,
            connectionString: (target as ConnectionTarget).clientUrl,
            // node-postgres' own timer bounds the whole connect: every host's allowance.
            connectionTimeoutMillis: perHostMs > 0 ? perHostMs * attemptsOf(target as ConnectionTarget) : 0,
          }
        : rest,
    );
    if (!managed) return;
    const parameters = (this as unknown as { connectionParameters: ClientParameters }).connectionParameters;
    const connection = new TargetConnection(
      {
        ssl: parameters.ssl,
        sslNegotiation: parameters.sslnegotiation,
        keepAlive: config.keepAlive ?? false,
        keepAliveInitialDelayMillis: config.keepAliveInitialDelayMillis ?? 0,
        encoding: parameters.client_encoding || "utf8",
      },
      target as ConnectionTarget,
      perHostMs,
      {
        chosen: (host) => {
          this.server = host;
          this.host = host.host;
          this.port = host.port;
        },
        unfit: () => {
          if (this.unfit) return;
          this.unfit = true;
          this.onUnfit?.();
        },
      },
    );
    (this as unknown as { connection: pg.Connection }).connection = connection;
  }
}

interface ClientParameters {
  ssl: pg.ClientConfig["ssl"];
  sslnegotiation?: string;
  client_encoding?: string;
}

/** The members of node-postgres' Connection this module drives (present since pg 8, untyped in @types/pg). */
interface WireConnection {
  connect(port: number | string, host?: string): void;
  stream: net.Socket;
  _ending: boolean;
  parsedStatements: Record<string, unknown>;
}

const base = pg.Connection.prototype as unknown as WireConnection;
/** The Terminate message ('X', length 4): a rejected server sees a clean goodbye, not "unexpected EOF". */
const TERMINATE = Buffer.from([0x58, 0, 0, 0, 4]);

interface Attempt extends HostPort {
  /** What this attempt accepts: the target, or (prefer-standby's second pass) any server. */
  accepts: TargetSessionAttrs;
}

/** A socket-level failure of one host, or its server's refusal, as kept for the final error. */
interface Failure {
  host: HostPort;
  reason: string;
  code: string | undefined;
  /** The server answered (and did not fit): worth a second pass for prefer-standby. */
  answered: boolean;
}

class TargetConnection extends pg.Connection {
  private attempts: Attempt[] = [];
  private index = -1;
  private phase: "idle" | "connecting" | "checking" | "open" | "failed" = "idle";
  private raw: net.Socket | undefined;
  private timer: NodeJS.Timeout | undefined;
  private ready: unknown;
  private row: Array<string | null> | undefined;
  private readonly failures: Failure[] = [];
  /** The server's reported parameters (ParameterStatus) on the open connection. */
  private readonly reported = new Map<string, string>();

  constructor(
    config: ConstructorParameters<typeof pg.Connection>[0] & Record<string, unknown>,
    private readonly target: ConnectionTarget,
    private readonly perHostMs: number,
    private readonly notify: { chosen: (host: HostPort) => void; unfit: () => void },
  ) {
    super(config);
  }

  /** Called once by the Client (with its own host, ignored): tries the target's hosts in turn. */
  connect(): void {
    const attrs = this.target.targetSessionAttrs;
    this.attempts = this.target.hosts.map((h) => ({ ...h, accepts: attrs }));
    this.next();
  }

  override emit(event: string | symbol, ...args: unknown[]): boolean {
    if (this.phase === "open") {
      if (event === "parameterStatus") this.noteParameter(args[0] as { parameterName: string; parameterValue: string });
      return super.emit(event, ...args);
    }
    if (this.phase !== "connecting" && this.phase !== "checking") return super.emit(event, ...args);
    switch (event) {
      case "error":
        // The Client's own connect timer destroys the socket after marking the connection ending: give up.
        if ((this as unknown as WireConnection)._ending) return this.giveUp(args[0] as Error);
        this.reject(socketReason(args[0]), (args[0] as { code?: string })?.code, false);
        return true;
      case "end":
        if ((this as unknown as WireConnection)._ending) return this.giveUp(new Error("timeout expired"));
        this.reject("the server closed the connection during startup", undefined, false);
        return true;
      case "errorMessage": {
        const error = args[0] as { code?: string; message?: string };
        if (this.phase === "connecting" && error.code?.startsWith("28")) {
          // Bad credentials: every host of a cluster would refuse them too. The Client reports it.
          this.settle();
          this.phase = "open";
          return super.emit(event, ...args);
        }
        // A server that cannot take the session (starting up 57P03, full 53300, …) or fails the check.
        this.reject(`${error.message ?? "server error"}${error.code ? ` (${error.code})` : ""}`, error.code, false);
        return true;
      }
      case "readyForQuery":
        return this.onReady(args[0]);
      case "dataRow":
        if (this.phase === "checking") {
          this.row = (args[0] as { fields: Array<string | null> }).fields;
          return true;
        }
        return super.emit(event, ...args);
      case "rowDescription":
      case "commandComplete":
      case "notice":
        if (this.phase === "checking") return true;
        return super.emit(event, ...args);
      case "parameterStatus": {
        const p = args[0] as { parameterName: string; parameterValue: string };
        this.reported.set(p.parameterName, p.parameterValue);
        return super.emit(event, ...args);
      }
      default:
        return super.emit(event, ...args);
    }
  }

  private onReady(message: unknown): boolean {
    const attempt = this.attempts[this.index] as Attempt;
    if (this.phase === "connecting") {
      if (attempt.accepts === "any") return this.accept(message);
      // Authenticated: ask the server what it is before the Client sees the connection as ready.
      this.phase = "checking";
      this.ready = message;
      this.row = undefined;
      this.query(SESSION_STATE_SQL);
      return true;
    }
    const state = this.row ? { inRecovery: this.row[0] === "t", readOnly: this.row[1] === "on" } : undefined;
    if (state && fits(attempt.accepts, state)) return this.accept(this.ready);
    this.reject(state ? mismatch(attempt.accepts) : "the server did not answer the check", undefined, true);
    return true;
  }

  private accept(message: unknown): boolean {
    this.settle();
    this.phase = "open";
    const attempt = this.attempts[this.index] as Attempt;
    this.notify.chosen({ host: attempt.host, port: attempt.port });
    return super.emit("readyForQuery", message);
  }

  /** Starts on the next host, or gives up when none is left. */
  private next(): void {
    this.index++;
    const attempt = this.attempts[this.index];
    const wire = this as unknown as WireConnection;
    if (!attempt || wire._ending) {
      // Out of hosts, or the Client's connect timer fired between two attempts.
      this.giveUp(attempt ? new Error("timeout expired") : undefined);
      return;
    }
    this.phase = "connecting";
    this.reported.clear();
    const raw = new net.Socket();
    this.raw = raw;
    wire.stream = raw;
    wire.parsedStatements = {};
    if (this.perHostMs > 0) {
      this.timer = setTimeout(
        () => this.reject(`no answer within ${this.perHostMs} ms`, "ETIMEDOUT", false),
        this.perHostMs,
      );
      this.timer.unref();
    }
    if (attempt.host.startsWith("/")) base.connect.call(this, `${attempt.host}/.s.PGSQL.${attempt.port}`);
    else base.connect.call(this, attempt.port, attempt.host);
  }

  /** This host failed or does not fit: close its socket (nothing it does reaches the Client), try the next. */
  private reject(reason: string, code: string | undefined, answered: boolean): void {
    if (this.phase !== "connecting" && this.phase !== "checking") return;
    const authenticated = this.phase === "checking";
    this.settle();
    const attempt = this.attempts[this.index] as Attempt;
    this.failures.push({ host: attempt, reason, code, answered });
    this.closeSockets(authenticated);
    // prefer-standby found no standby: a second pass over the servers that answered, taking any of them.
    const endOfFirstPass = this.index === this.target.hosts.length - 1 && this.attempts.length === this.index + 1;
    if (endOfFirstPass && this.target.targetSessionAttrs === "prefer-standby") {
      for (const f of this.failures.filter((x) => x.answered))
        this.attempts.push({ host: f.host.host, port: f.host.port, accepts: "any" });
    }
    this.phase = "idle";
    process.nextTick(() => this.next());
  }

  /**
   * Closes the current attempt's sockets with every listener removed first, so nothing they do later reaches
   * the Client. An authenticated session gets a Terminate message (the server logs no "unexpected EOF").
   */
  private closeSockets(graceful: boolean): void {
    const top = (this as unknown as WireConnection).stream;
    const raw = this.raw;
    for (const socket of new Set([top, raw])) {
      socket?.removeAllListeners();
      socket?.on("error", () => undefined);
    }
    if (graceful && top?.writable) {
      // Under TLS the raw socket carries the encrypted Terminate: destroy it only once that went out.
      top.end(TERMINATE);
      top.once("close", () => raw?.destroy());
      setTimeout(() => {
        top.destroy();
        raw?.destroy();
      }, 1000).unref();
      return;
    }
    top?.destroy();
    raw?.destroy();
  }

  private settle(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  /** No host fits: one error naming each host and why, then the end of the connection. */
  private giveUp(cause: Error | undefined): boolean {
    if (this.phase === "failed") return true;
    this.settle();
    this.phase = "failed";
    const reasons = this.failures.map((f) => `${hostText(f.host.host)}:${f.host.port}: ${f.reason}`);
    const codes = new Set(this.failures.map((f) => f.code));
    const error = new Error(
      `no server of ${describeHosts(this.target)} could be used${reasons.length > 0 ? ` (${reasons.join("; ")})` : ""}${cause ? `: ${cause.message}` : ""}`,
      cause ? { cause } : undefined,
    ) as Error & { code: string; hosts: Failure[] };
    // 08001, "unable to establish a connection": the class callers retry as "database unavailable".
    const only = codes.size === 1 ? [...codes][0] : undefined;
    error.code = only && !/^\d/.test(only) ? only : "08001";
    error.hosts = [...this.failures];
    this.closeSockets(false);
    super.emit("error", error);
    process.nextTick(() => super.emit("end"));
    return true;
  }

  /** A reported parameter changed on the open connection: a server that stopped fitting is marked unfit. */
  private noteParameter(p: { parameterName: string; parameterValue: string } | undefined): void {
    if (!p) return;
    this.reported.set(p.parameterName, p.parameterValue);
    const standby = this.reported.get("in_hot_standby");
    const readOnly = this.reported.get("default_transaction_read_only");
    const attrs = this.target.targetSessionAttrs;
    const unfit =
      (attrs === "read-write" && (readOnly === "on" || standby === "on")) ||
      (attrs === "primary" && standby === "on") ||
      (attrs === "standby" && standby === "off") ||
      (attrs === "read-only" && readOnly === "off" && standby === "off");
    if (unfit) this.notify.unfit();
  }
}

function socketReason(error: unknown): string {
  const e = error as { code?: string; message?: string } | undefined;
  return e?.code ? `${e.code}` : (e?.message ?? "connection failed");
}
