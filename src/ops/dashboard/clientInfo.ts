/**
 * What a request says about its client: its cookies, whether an address is
 * loopback, whether its Host header names this server on loopback, and the
 * address the sign-in throttle counts it under (behind a trusted proxy, the
 * last X-Forwarded-For hop; IPv6 per /64). Pure reads of a request; it never
 * decides whether the client is signed in.
 */
import type http from "node:http";

/** A Cookie header's values by name (the first of a repeated name; undecodable values kept as sent). */
export function parseCookies(header: string | undefined): Record<string, string> {
  const out: Record<string, string> = {};
  if (!header) return out;
  for (const part of header.split(";")) {
    const eq = part.indexOf("=");
    if (eq < 0) continue;
    const name = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (name && !(name in out)) {
      try {
        out[name] = decodeURIComponent(value);
      } catch {
        out[name] = value;
      }
    }
  }
  return out;
}

/** Whether an address is loopback (127.0.0.0/8, ::1, or "localhost"). */
export function isLoopback(host: string | undefined): boolean {
  if (!host) return false;
  const h = host.replace(/^\[|\]$/g, "").replace(/^::ffff:/, "");
  return h === "localhost" || h === "::1" || /^127(\.\d{1,3}){3}$/.test(h);
}

/** A Host header as [name, port]: the name lowercased, without IPv6 brackets or a trailing dot; undefined when malformed. */
export function hostParts(host: string): [name: string, port: string | undefined] | undefined {
  const m = /^(\[[0-9a-f:.]+\]|[a-z0-9._-]+)(?::([0-9]{1,5}))?$/i.exec(host.trim());
  if (!m) return undefined;
  return [
    (m[1] as string)
      .toLowerCase()
      .replace(/^\[|\]$/g, "")
      .replace(/\.$/, ""),
    m[2],
  ];
}

/**
 * Whether a request's Host header is one a dashboard without authentication answers: a loopback name or
 * address (localhost, 127.0.0.0/8, ::1) with this server's port, or an entry of `allowed` ("name" on this
 * port, or "name:port" as the Host header says it, e.g. a local proxy's port). A DNS-rebinding page reaches loopback under its own name, so its Host never
 * passes. Unknown port (a fetch mount that did not pass localPort): nothing passes.
 */
export function hostAnswered(
  host: string | undefined,
  port: number | undefined,
  tls: boolean,
  allowed: readonly string[],
): boolean {
  const parts = host === undefined ? undefined : hostParts(host);
  if (!parts || port === undefined) return false;
  const [name, given] = parts;
  const hostPort = Number(given ?? (tls ? 443 : 80));
  if (isLoopback(name) && hostPort === port) return true;
  return allowed.some((entry) => {
    const want = hostParts(entry);
    return want !== undefined && want[0] === name && hostPort === (want[1] === undefined ? port : Number(want[1]));
  });
}

/**
 * The client a request comes from, for throttling: the socket's address, or,
 * behind a trusted proxy, the last address in X-Forwarded-For (the one that
 * proxy saw). IPv6 clients count per /64, the block one host usually holds.
 */
export function clientAddress(req: http.IncomingMessage, trustProxy: boolean): string {
  let address = req.socket.remoteAddress ?? "unknown";
  if (trustProxy) {
    const forwarded = req.headers["x-forwarded-for"];
    const last = (Array.isArray(forwarded) ? forwarded.join(",") : (forwarded ?? "")).split(",").at(-1)?.trim();
    if (last) address = last;
  }
  address = address.replace(/^::ffff:(?=\d+\.\d+\.\d+\.\d+$)/i, "");
  if (!address.includes(":")) return address;
  const groups = address.toLowerCase().split("::");
  const head = (groups[0] ?? "").split(":").filter(Boolean);
  const tail = groups.length > 1 ? (groups[1] ?? "").split(":").filter(Boolean) : [];
  const full = [...head, ...Array(Math.max(0, 8 - head.length - tail.length)).fill("0"), ...tail];
  return `${full.slice(0, 4).join(":")}::/64`;
}
