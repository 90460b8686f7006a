/**
 * One shared network segment for the fleet's failover rows: a switch (a
 * bridge inside a namespace of its own) and hosts (namespaces) plugged into
 * it by veth pairs, all on 198.18.100.0/24, so database hosts replicate to
 * each other, a virtual IP can move from one host to another (announced by a
 * gratuitous ARP, as vip-manager does), and the test process reaches every
 * host through its own port on the switch. Hosts are cut off by taking their
 * port down.
 *
 * Invariants: addresses come from the benchmarking range 198.18.0.0/15 and
 * exist on these links only; nothing routes off the segment (no default
 * route, no forwarding anywhere), so no packet can leave the machine; the
 * bridge lives in its own namespace, so the root namespace only gains one
 * veth end; destroy() removes every namespace and link it made (also at
 * process exit), whatever the test did.
 */
import { execFileSync, spawn, spawnSync } from "node:child_process";

export const LAN_PREFIX = "198.18.100";

export interface LanHost {
  name: string;
  /** The namespace. */
  ns: string;
  /** Its address on the segment. */
  address: string;
  /** Its interface inside the namespace. */
  iface: string;
  /** Its port on the switch (in the switch's namespace). */
  port: string;
}

function ip(...args: string[]): void {
  execFileSync("ip", args, { stdio: ["ignore", "ignore", "pipe"] });
}

export class Lan {
  readonly hosts: LanHost[] = [];
  /** The test process's own address on the segment. */
  readonly rootAddress = `${LAN_PREFIX}.254`;
  private readonly tag: string;
  private readonly switchNs: string;
  private readonly rootIf: string;
  private readonly onExit = () => this.destroy();
  private built = false;

  constructor() {
    // Interface names are limited to 15 characters: short and unique per run.
    this.tag = `sl${(process.pid % 100_000).toString(36)}`;
    this.switchNs = `${this.tag}sw`;
    this.rootIf = `${this.tag}r`;
    process.once("exit", this.onExit);
  }

  /** The switch, and the test process's port on it. */
  build(): void {
    if (this.built) return;
    spawnSync("ip", ["link", "del", this.rootIf], { stdio: "ignore" });
    spawnSync("ip", ["netns", "del", this.switchNs], { stdio: "ignore" });
    ip("netns", "add", this.switchNs);
    this.built = true;
    ip("-n", this.switchNs, "link", "add", "br0", "type", "bridge");
    ip("-n", this.switchNs, "link", "set", "br0", "up");
    ip("-n", this.switchNs, "link", "set", "lo", "up");
    ip("link", "add", this.rootIf, "type", "veth", "peer", "name", "rootp");
    ip("link", "set", "rootp", "netns", this.switchNs);
    ip("-n", this.switchNs, "link", "set", "rootp", "master", "br0");
    ip("-n", this.switchNs, "link", "set", "rootp", "up");
    ip("addr", "add", `${this.rootAddress}/24`, "dev", this.rootIf);
    ip("link", "set", this.rootIf, "up");
  }

  /** A host on the segment at 198.18.100.<n>. */
  addHost(name: string, n: number): LanHost {
    this.build();
    const host: LanHost = {
      name,
      ns: `${this.tag}${name}`,
      address: `${LAN_PREFIX}.${n}`,
      iface: "eth0",
      port: `p${name}`,
    };
    spawnSync("ip", ["netns", "del", host.ns], { stdio: "ignore" });
    ip("netns", "add", host.ns);
    this.hosts.push(host);
    ip("-n", this.switchNs, "link", "add", host.port, "type", "veth", "peer", "name", host.iface, "netns", host.ns);
    ip("-n", this.switchNs, "link", "set", host.port, "master", "br0");
    ip("-n", this.switchNs, "link", "set", host.port, "up");
    ip("-n", host.ns, "addr", "add", `${host.address}/24`, "dev", host.iface);
    ip("-n", host.ns, "link", "set", host.iface, "up");
    ip("-n", host.ns, "link", "set", "lo", "up");
    return host;
  }

  /** The command prefix that runs a program inside `host`. */
  prefix(host: LanHost): string[] {
    return ["ip", "netns", "exec", host.ns];
  }

  /**
   * Gives `host` the virtual IP `address` (removed from whichever host had it) and announces it with
   * gratuitous ARP, so every host's ARP cache points at its new owner at once (vip-manager's step).
   */
  moveAddress(address: string, to: LanHost): void {
    for (const h of this.hosts) {
      if (h !== to) spawnSync("ip", ["-n", h.ns, "addr", "del", `${address}/24`, "dev", h.iface], { stdio: "ignore" });
    }
    spawnSync("ip", ["-n", to.ns, "addr", "add", `${address}/24`, "dev", to.iface], { stdio: "ignore" });
    // An unsolicited ARP request and a reply (-U, -A): hosts update the entry they have for the address. Each
    // arping goes out at once and then waits a second for answers nobody sends: not waited for here.
    for (const mode of ["-U", "-A"]) {
      spawn("ip", ["netns", "exec", to.ns, "arping", "-q", mode, "-c", "1", "-I", to.iface, address], {
        stdio: "ignore",
      }).unref();
    }
  }

  /** Cuts the host off the segment (its switch port down): its packets and those to it vanish. */
  cut(host: LanHost): void {
    ip("-n", this.switchNs, "link", "set", host.port, "down");
  }

  heal(host: LanHost): void {
    ip("-n", this.switchNs, "link", "set", host.port, "up");
  }

  /** Removes every host, the switch and the root port. Safe twice. */
  destroy(): void {
    for (const host of this.hosts.splice(0)) spawnSync("ip", ["netns", "del", host.ns], { stdio: "ignore" });
    if (this.built) {
      spawnSync("ip", ["link", "del", this.rootIf], { stdio: "ignore" });
      spawnSync("ip", ["netns", "del", this.switchNs], { stdio: "ignore" });
      this.built = false;
    }
    process.removeListener("exit", this.onExit);
  }
}

/** Why arping (iputils-arping, for the virtual IP rows) cannot run here, or undefined. */
export function arpingUnavailable(): string | undefined {
  const probe = spawnSync("arping", ["-V"], { stdio: "ignore" });
  return probe.error ? "arping is missing (Debian's iputils-arping; .ci/run installs it)" : undefined;
}
