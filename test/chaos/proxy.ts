/**
 * A TCP proxy between workers and PostgreSQL that injects network faults
 * (matrix 7.2): latency each way, a partition that holds traffic and delivers
 * it late (as TCP retransmission does after a partition heals), a blackhole
 * that silently drops a connection's bytes without FIN or RST (half-open),
 * resets (RST) of a fraction of the traffic, the server's reply to one chosen
 * statement swallowed (an ambiguous commit), a switchable target
 * (failover), and an outage (the port refusing connections, then back).
 *
 * Invariants: it listens on 127.0.0.1 and only ever connects to 127.0.0.1;
 * faults apply to the bytes it forwards, never to the server itself; close()
 * destroys every socket it opened, whatever the fault in force.
 */
import net from "node:net";

interface Conn {
  id: number;
  client: net.Socket;
  upstream: net.Socket | undefined;
  /** Half-open: bytes in both directions are dropped, the sockets stay open. */
  blackholed: boolean;
  /** Held while partitioned, delivered in order on heal. */
  held: Array<{ to: "client" | "upstream"; chunk: Buffer }>;
  /** Protocol parsing state, for dropReplyTo. */
  fromClient: Buffer;
  fromServer: Buffer;
  startupSeen: boolean;
  /** Named prepared statements whose text matched the armed pattern. */
  matching: Set<string>;
  unnamedMatches: boolean;
  /** Swallowing the server's reply until its ReadyForQuery. */
  swallowing: boolean;
  swallowedRows: Array<Array<string | null>>;
}

/** One swallowed reply: when the server's ReadyForQuery was dropped and the client reset, and the rows it held. */
export interface SwallowedReply {
  t: number;
  conn: number;
  /** The reply's data rows, every column as text (null for NULL). */
  rows: Array<Array<string | null>>;
}

export class ChaosProxy {
  port = 0;
  /** Added to every chunk in each direction, ms. */
  latencyMs = 0;
  /** Probability that a forwarded chunk resets its connection instead (RST to the client). */
  resetP = 0;
  /** Connections reset by resetP or resetAll(). */
  resets = 0;
  readonly swallowed: SwallowedReply[] = [];
  private partitioned = false;
  private readonly conns = new Set<Conn>();
  private server: net.Server | undefined;
  private nextId = 1;
  private armed: { pattern: RegExp; remaining: number } | undefined;

  /**
   * `inspect` parses the PostgreSQL protocol of every connection from its first byte, which
   * dropReplyTo needs (a parser that starts mid-stream cannot find message boundaries).
   */
  constructor(
    private targetPort: number,
    private readonly options: { inspect?: boolean } = {},
  ) {}

  async start(): Promise<number> {
    this.server = net.createServer((client) => this.accept(client));
    await new Promise<void>((resolve) => this.server?.listen(0, "127.0.0.1", resolve));
    const address = this.server.address();
    this.port = typeof address === "object" && address ? address.port : 0;
    return this.port;
  }

  /** `url` (a postgres:// connection string) with its host and port replaced by the proxy's. */
  url(url: string): string {
    const u = new URL(url);
    u.hostname = "127.0.0.1";
    u.port = String(this.port);
    return u.toString();
  }

  /** New connections go to this port (failover); existing ones keep their server. */
  retarget(port: number): void {
    this.targetPort = port;
  }

  /** Open connections (each a client socket and its upstream). */
  get connectionCount(): number {
    return this.conns.size;
  }

  /**
   * Every connection open now becomes half-open: its bytes are dropped in both directions and
   * neither side sees FIN or RST (a NAT or firewall that forgot the flow). New connections work.
   */
  blackholeExisting(): number {
    for (const conn of this.conns) conn.blackholed = true;
    return this.conns.size;
  }

  /** Holds all traffic, of open and new connections, until heal(); nothing is dropped or closed. */
  partition(): void {
    this.partitioned = true;
  }

  /** Delivers what the partition held, in order, and forwards again. */
  heal(): void {
    this.partitioned = false;
    for (const conn of this.conns) {
      if (!conn.upstream) this.connectUpstream(conn);
      for (const { to, chunk } of conn.held.splice(0)) this.deliver(conn, to, chunk);
    }
  }

  /**
   * The server's reply to the next `times` statements whose SQL text matches `pattern` is dropped
   * up to and including its ReadyForQuery (so the statement ran and committed), then the client's
   * connection is reset: the client cannot tell whether its statement committed.
   */
  dropReplyTo(pattern: RegExp, times = 1): void {
    if (!this.options.inspect) throw new Error("dropReplyTo needs a proxy created with { inspect: true }");
    this.armed = { pattern, remaining: times };
  }

  /**
   * An outage: the port stops listening (new connections get ECONNREFUSED) and every open connection is
   * reset, until reopen() listens again on the same port.
   */
  async refuse(): Promise<void> {
    const server = this.server;
    this.server = undefined;
    this.resetAll();
    await new Promise<void>((resolve) => (server ? server.close(() => resolve()) : resolve()));
  }

  /** Ends refuse(): listens again on the same port. */
  async reopen(): Promise<void> {
    if (this.server) return;
    const server = net.createServer((client) => this.accept(client));
    this.server = server;
    await new Promise<void>((resolve) => server.listen(this.port, "127.0.0.1", resolve));
  }

  /** Resets every open connection (RST to the client, upstream destroyed). */
  resetAll(): void {
    for (const conn of [...this.conns]) this.reset(conn);
  }

  async close(): Promise<void> {
    for (const conn of [...this.conns]) this.drop(conn);
    await new Promise<void>((resolve) => (this.server ? this.server.close(() => resolve()) : resolve()));
  }

  private accept(client: net.Socket): void {
    const conn: Conn = {
      id: this.nextId++,
      client,
      upstream: undefined,
      blackholed: false,
      held: [],
      fromClient: Buffer.alloc(0),
      fromServer: Buffer.alloc(0),
      startupSeen: false,
      matching: new Set(),
      unnamedMatches: false,
      swallowing: false,
      swallowedRows: [],
    };
    this.conns.add(conn);
    client.setNoDelay(true);
    client.on("data", (chunk) => this.forward(conn, "upstream", chunk));
    client.on("error", () => this.drop(conn));
    client.on("close", () => {
      // A client that goes away during a blackhole or partition: its FIN never reaches the server.
      if (conn.blackholed || this.partitioned) return;
      this.drop(conn);
    });
    // During a partition the SYN "reaches" the proxy but not the server: connect on heal.
    if (!this.partitioned) this.connectUpstream(conn);
  }

  private connectUpstream(conn: Conn): void {
    const upstream = net.connect(this.targetPort, "127.0.0.1");
    upstream.setNoDelay(true);
    conn.upstream = upstream;
    upstream.on("data", (chunk) => this.forward(conn, "client", chunk));
    upstream.on("error", () => this.drop(conn));
    upstream.on("close", () => {
      if (conn.blackholed || this.partitioned) return;
      this.drop(conn);
    });
  }

  private forward(conn: Conn, to: "client" | "upstream", chunk: Buffer): void {
    if (conn.blackholed) return;
    if (this.partitioned || (to === "upstream" && !conn.upstream)) {
      conn.held.push({ to, chunk });
      return;
    }
    if (this.resetP > 0 && Math.random() < this.resetP) {
      this.reset(conn);
      return;
    }
    if (this.options.inspect) {
      if (to === "upstream") this.inspectClient(conn, chunk);
      else if (this.inspectServer(conn, chunk)) return;
    }
    if (this.latencyMs > 0) setTimeout(() => this.deliver(conn, to, chunk), this.latencyMs);
    else this.deliver(conn, to, chunk);
  }

  private deliver(conn: Conn, to: "client" | "upstream", chunk: Buffer): void {
    const socket = to === "client" ? conn.client : conn.upstream;
    if (socket && !socket.destroyed && !conn.blackholed) socket.write(chunk);
  }

  /** Parses frontend messages; arms the connection's reply swallowing at a matching statement's Bind or Query. */
  private inspectClient(conn: Conn, chunk: Buffer): void {
    conn.fromClient = Buffer.concat([conn.fromClient, chunk]);
    for (;;) {
      const buf = conn.fromClient;
      if (!conn.startupSeen) {
        // The startup message has no type byte: int32 length, then the body.
        if (buf.length < 4) return;
        const len = buf.readInt32BE(0);
        if (buf.length < len) return;
        conn.startupSeen = true;
        conn.fromClient = buf.subarray(len);
        continue;
      }
      if (buf.length < 5) return;
      const type = String.fromCharCode(buf[0] as number);
      const len = buf.readInt32BE(1);
      if (buf.length < 1 + len) return;
      const body = buf.subarray(5, 1 + len);
      conn.fromClient = buf.subarray(1 + len);
      const armed = this.armed;
      if (type === "P") {
        const [name, text] = cstrings(body, 2);
        const matches = armed?.pattern.test(text ?? "") ?? false;
        if (name) {
          if (matches) conn.matching.add(name);
        } else conn.unnamedMatches = matches;
      } else if (type === "B") {
        const [, statement] = cstrings(body, 2);
        const matches = statement ? conn.matching.has(statement) : conn.unnamedMatches;
        if (matches && armed && armed.remaining > 0) {
          armed.remaining--;
          conn.swallowing = true;
        }
      } else if (type === "Q") {
        const [text] = cstrings(body, 1);
        if (armed && armed.remaining > 0 && armed.pattern.test(text ?? "")) {
          armed.remaining--;
          conn.swallowing = true;
        }
      }
      if (armed && armed.remaining === 0 && !conn.swallowing) this.armed = undefined;
    }
  }

  /** Parses backend messages while swallowing; returns true when the chunk must not be forwarded. */
  private inspectServer(conn: Conn, chunk: Buffer): boolean {
    if (!conn.swallowing) return false;
    conn.fromServer = Buffer.concat([conn.fromServer, chunk]);
    for (;;) {
      const buf = conn.fromServer;
      if (buf.length < 5) return true;
      const type = String.fromCharCode(buf[0] as number);
      const len = buf.readInt32BE(1);
      if (buf.length < 1 + len) return true;
      const body = buf.subarray(5, 1 + len);
      conn.fromServer = buf.subarray(1 + len);
      if (type === "D") conn.swallowedRows.push(dataRow(body));
      if (type === "Z") {
        // The statement's transaction is over (committed, for an autocommit claim): the reply is gone.
        this.swallowed.push({ t: Date.now(), conn: conn.id, rows: conn.swallowedRows.splice(0) });
        conn.swallowing = false;
        if (this.armed && this.armed.remaining === 0) this.armed = undefined;
        this.reset(conn);
        return true;
      }
    }
  }

  private reset(conn: Conn): void {
    this.resets++;
    this.conns.delete(conn);
    if (!conn.client.destroyed) conn.client.resetAndDestroy();
    if (conn.upstream && !conn.upstream.destroyed) conn.upstream.resetAndDestroy();
  }

  private drop(conn: Conn): void {
    this.conns.delete(conn);
    conn.client.destroy();
    conn.upstream?.destroy();
  }
}

/** The first `n` NUL-terminated strings of a message body. */
function cstrings(body: Buffer, n: number): string[] {
  const out: string[] = [];
  let at = 0;
  for (let i = 0; i < n; i++) {
    const end = body.indexOf(0, at);
    if (end < 0) break;
    out.push(body.toString("utf8", at, end));
    at = end + 1;
  }
  return out;
}

/** A DataRow message's columns (text format), null for SQL NULL. */
function dataRow(body: Buffer): Array<string | null> {
  const columns: Array<string | null> = [];
  let at = 2;
  for (let i = 0; i < body.readInt16BE(0); i++) {
    const len = body.readInt32BE(at);
    at += 4;
    if (len < 0) columns.push(null);
    else {
      columns.push(body.toString("utf8", at, at + len));
      at += len;
    }
  }
  return columns;
}
