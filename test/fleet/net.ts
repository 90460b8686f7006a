/**
 * "Hosts" for the fleet suite: Linux network namespaces, each joined to the
 * root namespace by a veth pair, PostgreSQL (and PgBouncer) listening on the
 * root side. A host's link can be cut (`ip link set … down`) or its packets
 * silently dropped with the link up (a blackhole route for the server's
 * replies: no RST, no ICMP), and healed.
 *
 * Invariants: addresses come from the benchmarking range 198.18.0.0/15 and are
 * used on these veths only; nothing is routed beyond them (no forwarding, no
 * default route in a namespace), so no traffic can leave the machine; every
 * namespace and link it creates is removed by destroy(), which the suite calls
 * whatever the test's outcome (and at process exit as a last resort).
 */
import { execFileSync, spawnSync } from "node:child_process";

export interface Host {
  /** 1-based index. */
  index: number;
  /** The namespace's name. */
  ns: string;
  /** The veth end in the root namespace (cut this one). */
  rootIf: string;
  /** 198.18.<n>.1: PostgreSQL's address as the host sees it. */
  serverAddress: string;
  /** 198.18.<n>.2: the host's own address. */
  address: string;
}

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

/** Why namespaces cannot be used here, or undefined when they can. */
export function namespacesUnavailable(): string | undefined {
  if (process.platform !== "linux") return "network namespaces need Linux";
  if (process.getuid?.() !== 0) return "network namespaces need root (run the fleet suite as root, as CI does)";
  const probe = spawnSync("ip", ["netns", "list"], { stdio: "ignore" });
  if (probe.error || probe.status !== 0) return "the `ip` command (iproute2) is missing or cannot list namespaces";
  // Root in a container without CAP_SYS_ADMIN lists namespaces but may not make one.
  const name = `sqprobe${process.pid}`;
  const add = spawnSync("ip", ["netns", "add", name], { encoding: "utf8" });
  spawnSync("ip", ["netns", "del", name], { stdio: "ignore" });
  if (add.status !== 0) return `this machine does not allow network namespaces (ip netns add: ${add.stderr.trim()})`;
  return undefined;
}

export class Fleet {
  readonly hosts: Host[] = [];
  private readonly tag: string;
  private readonly hung = new Set<Host>();
  private readonly onExit = () => this.destroy();

  constructor() {
    // Short and unique per run: interface names are limited to 15 characters.
    this.tag = `sq${(process.pid % 100_000).toString(36)}`;
    process.once("exit", this.onExit);
  }

  /** Creates `count` hosts (namespaces 198.18.<base+i>.0/24). */
  addHosts(count: number, base = 20): Host[] {
    for (let i = 1; i <= count; i++) {
      const n = base + this.hosts.length + 1;
      const host: Host = {
        index: this.hosts.length + 1,
        ns: `${this.tag}h${this.hosts.length + 1}`,
        rootIf: `${this.tag}h${this.hosts.length + 1}r`,
        serverAddress: `198.18.${n}.1`,
        address: `198.18.${n}.2`,
      };
      const nsIf = `${this.tag}h${host.index}n`;
      // Left over by an earlier run whose process died before destroy() (a reused pid): remove it first.
      spawnSync("ip", ["link", "del", host.rootIf], { stdio: "ignore" });
      spawnSync("ip", ["netns", "del", host.ns], { stdio: "ignore" });
      this.hosts.push(host);
      ip("netns", "add", host.ns);
      ip("link", "add", host.rootIf, "type", "veth", "peer", "name", nsIf);
      ip("link", "set", nsIf, "netns", host.ns);
      ip("addr", "add", `${host.serverAddress}/24`, "dev", host.rootIf);
      ip("link", "set", host.rootIf, "up");
      ip("-n", host.ns, "addr", "add", `${host.address}/24`, "dev", nsIf);
      ip("-n", host.ns, "link", "set", nsIf, "up");
      ip("-n", host.ns, "link", "set", "lo", "up");
    }
    return this.hosts.slice(-count);
  }

  /** Every root-side address, for PostgreSQL's listen_addresses. */
  get serverAddresses(): string[] {
    return this.hosts.map((h) => h.serverAddress);
  }

  /** The command prefix that runs a program inside `host`. */
  prefix(host: Host): string[] {
    return ["ip", "netns", "exec", host.ns];
  }

  /** Cuts the host's link: its packets and the server's to it vanish. */
  cut(host: Host): void {
    ip("link", "set", host.rootIf, "down");
  }

  /**
   * Drops every packet from the server to the host with the link up (a firewall that drops, no RST, no
   * ICMP): the host's statements and SYNs still arrive, but no answer ever comes back, so its connections
   * hang instead of closing. (A blackhole route on the host's side would fail its connects at once.)
   */
  hang(host: Host): void {
    ip("route", "add", "blackhole", `${host.address}/32`);
    this.hung.add(host);
  }

  /** Undoes cut() and hang(). */
  heal(host: Host): void {
    ip("link", "set", host.rootIf, "up");
    if (this.hung.delete(host)) {
      spawnSync("ip", ["route", "del", "blackhole", `${host.address}/32`], { stdio: "ignore" });
    }
  }

  /** Removes every route, link and namespace this fleet made. Safe twice. */
  destroy(): void {
    for (const host of this.hosts.splice(0)) {
      this.hung.delete(host);
      spawnSync("ip", ["route", "del", "blackhole", `${host.address}/32`], { stdio: "ignore" });
      // Deleting one end of a veth pair deletes both; deleting the namespace kills what is left in it.
      spawnSync("ip", ["link", "del", host.rootIf], { stdio: "ignore" });
      spawnSync("ip", ["netns", "del", host.ns], { stdio: "ignore" });
    }
    process.removeListener("exit", this.onExit);
  }
}
