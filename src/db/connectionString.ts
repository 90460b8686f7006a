/**
 * Connection strings in libpq's URL syntax, as skipq reads them before any
 * connection is tried: a host list (`postgres://u@h1:5432,h2:5433/db`, or
 * `?host=h1,h2&port=5432,5433`), `target_session_attrs` (any, read-write,
 * read-only, primary, standby, prefer-standby) and `connect_timeout` (seconds,
 * per host). node-postgres cannot parse a host list (`Invalid URL`), so skipq
 * hands it a URL with the first host only, from which it reads every other
 * parameter exactly as for a single-host URL; src/db/connect.ts then connects
 * to each host in turn.
 *
 * Invariants: malformed input (an empty host, a port outside 1–65535, an
 * unknown target_session_attrs, as many ports as neither 1 nor the hosts) is a
 * ValidationError that names the fault and the fix; a single-host URL without
 * target_session_attrs is handed on unchanged; a message never shows the
 * password.
 */
import { closest, ValidationError } from "../core/errors.js";

/** libpq's values (PostgreSQL 14+). */
export const TARGET_SESSION_ATTRS = ["any", "read-write", "read-only", "primary", "standby", "prefer-standby"] as const;
export type TargetSessionAttrs = (typeof TARGET_SESSION_ATTRS)[number];

export interface HostPort {
  /** A name, an address (IPv6 without brackets), or a Unix socket directory (starts with "/"). */
  host: string;
  port: number;
}

export interface ConnectionTarget {
  /** The string as given. */
  readonly text: string;
  /** The hosts in the order given (empty: node-postgres' defaults, PGHOST or the local socket). */
  readonly hosts: readonly HostPort[];
  readonly targetSessionAttrs: TargetSessionAttrs;
  /** libpq's connect_timeout, per host, ms (at least 2 s, as libpq); undefined when not given. */
  readonly connectTimeoutMs: number | undefined;
  /** What node-postgres parses: the same URL with the first host only and no target_session_attrs. */
  readonly clientUrl: string;
  /** True when skipq must choose the host itself: several hosts, or a target_session_attrs other than any. */
  readonly managed: boolean;
}

const URL_SCHEME = /^postgres(?:ql)?:\/\//i;
const DEFAULT_PORT = 5432;

/**
 * Parses and validates `text`. A string that is not a postgres:// URL (a `socket:` string, a path) is handed on
 * unchanged, unmanaged.
 */
export function parseConnectionString(text: string): ConnectionTarget {
  if (typeof text !== "string" || !URL_SCHEME.test(text)) {
    return { text, hosts: [], targetSessionAttrs: "any", connectTimeoutMs: undefined, clientUrl: text, managed: false };
  }
  const scheme = (URL_SCHEME.exec(text) as RegExpExecArray)[0];
  const rest = text.slice(scheme.length);
  // The authority ends at the first "/", "?" or "#" (as a URL parser reads it); its userinfo at the last "@".
  const authorityEnd = rest.search(/[/?#]/);
  const authority = authorityEnd < 0 ? rest : rest.slice(0, authorityEnd);
  const tail = authorityEnd < 0 ? "" : rest.slice(authorityEnd);
  const at = authority.lastIndexOf("@");
  const userinfo = at < 0 ? "" : authority.slice(0, at + 1);
  const hostList = at < 0 ? authority : authority.slice(at + 1);

  const queryStart = tail.indexOf("?");
  const fragmentStart = tail.indexOf("#", Math.max(queryStart, 0));
  const path = queryStart < 0 ? (fragmentStart < 0 ? tail : tail.slice(0, fragmentStart)) : tail.slice(0, queryStart);
  const query =
    queryStart < 0 ? "" : fragmentStart < 0 ? tail.slice(queryStart + 1) : tail.slice(queryStart + 1, fragmentStart);
  const params = query === "" ? [] : query.split("&").map(splitParam);
  const param = (name: string) => params.find((p) => p.name === name)?.value;

  const targetSessionAttrs = targetAttrs(param("target_session_attrs"));
  const connectTimeoutMs = connectTimeout(param("connect_timeout"));
  const queryHost = param("host");
  const queryPort = param("port");
  const listed = hostList.includes(",") || queryHost?.includes(",") === true;
  if (listed && hostList !== "" && queryHost !== undefined) {
    throw new ValidationError(
      `the connection string names its hosts twice (in the address "${hostList}" and in ?host=): give the host list in one place, e.g. postgres://user@h1:5432,h2:5432/db`,
    );
  }
  let hosts: HostPort[];
  if (queryHost !== undefined) hosts = queryHostList(queryHost, queryPort);
  else if (hostList !== "") {
    // ?port= is the default of the hosts whose entry names none (libpq's per-host defaults).
    const defaultPort = portOf(queryPort, "every host (?port=)", DEFAULT_PORT);
    hosts = hostList.split(",").map((entry, i, all) => hostEntry(entry, i, all.length, defaultPort));
  } else hosts = [];

  const managed = hosts.length > 1 || targetSessionAttrs !== "any";
  if (!managed) return { text, hosts, targetSessionAttrs, connectTimeoutMs, clientUrl: text, managed };
  // node-postgres reads user, password, database, ssl and every other parameter from this URL as it always did;
  // only the host and port are chosen per connection (a socket directory goes in ?host=, as it must in a URL).
  const first = hosts[0] as HostPort;
  const socket = first.host.startsWith("/");
  const kept = params
    .filter((p) => p.name !== "target_session_attrs" && p.name !== "host" && p.name !== "port")
    .map((p) => p.raw);
  if (socket) kept.push(`host=${encodeURIComponent(first.host)}`, `port=${first.port}`);
  const address = socket ? "" : `${hostText(first.host)}:${first.port}`;
  const clientUrl = `${scheme}${userinfo}${address}${path}${kept.length > 0 ? `?${kept.join("&")}` : ""}`;
  return { text, hosts, targetSessionAttrs, connectTimeoutMs, clientUrl, managed };
}

/** "h1:5432, h2:5432 (target_session_attrs=read-write)": for messages (no user, no password). */
export function describeHosts(target: ConnectionTarget): string {
  const hosts = target.hosts.map((h) => `${hostText(h.host)}:${h.port}`).join(", ") || "the default host";
  return target.targetSessionAttrs === "any" ? hosts : `${hosts} (target_session_attrs=${target.targetSessionAttrs})`;
}

/** `host:port` as written in a URL: IPv6 addresses in brackets. */
export function hostText(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

function splitParam(raw: string): { name: string; value: string; raw: string } {
  const eq = raw.indexOf("=");
  const decode = (s: string) => {
    try {
      return decodeURIComponent(s.replace(/\+/g, " "));
    } catch {
      throw new ValidationError(`the connection string's parameter "${raw}" is not valid percent-encoding`);
    }
  };
  return eq < 0
    ? { name: decode(raw), value: "", raw }
    : { name: decode(raw.slice(0, eq)), value: decode(raw.slice(eq + 1)), raw };
}

function targetAttrs(value: string | undefined): TargetSessionAttrs {
  if (value === undefined) return "any";
  if ((TARGET_SESSION_ATTRS as readonly string[]).includes(value)) return value as TargetSessionAttrs;
  const hint = closest(value, TARGET_SESSION_ATTRS);
  throw new ValidationError(
    `target_session_attrs=${JSON.stringify(value)} is not one of ${TARGET_SESSION_ATTRS.join(", ")}${hint ? ` (did you mean "${hint}"?)` : ""}: use read-write (or primary) for workers and writes, prefer-standby for reads`,
  );
}

function connectTimeout(value: string | undefined): number | undefined {
  if (value === undefined || value === "") return undefined;
  if (!/^\d+$/.test(value)) {
    throw new ValidationError(
      `connect_timeout=${JSON.stringify(value)} is not a whole number of seconds: use e.g. connect_timeout=5 (per host)`,
    );
  }
  const seconds = Number(value);
  // libpq: 0 means wait forever, and anything shorter than 2 s counts as 2 s.
  return seconds === 0 ? undefined : Math.max(2, seconds) * 1000;
}

/** One entry of the address's host list: `host`, `host:port`, `[v6]`, `[v6]:port`. */
function hostEntry(entry: string, index: number, count: number, defaultPort: number): HostPort {
  const which = count > 1 ? `host ${index + 1} of ${count}` : "the host";
  let host: string;
  let portText: string | undefined;
  if (entry.startsWith("[")) {
    const close = entry.indexOf("]");
    if (close < 0) {
      throw new ValidationError(
        `${which} ("${entry}") opens an IPv6 address with "[" but never closes it: write [::1]:5432`,
      );
    }
    host = entry.slice(1, close);
    const after = entry.slice(close + 1);
    if (after !== "" && !after.startsWith(":")) {
      throw new ValidationError(`${which} ("${entry}") has "${after}" after its address: write [::1]:5432`);
    }
    portText = after === "" ? undefined : after.slice(1);
  } else {
    const colon = entry.lastIndexOf(":");
    host = colon < 0 ? entry : entry.slice(0, colon);
    portText = colon < 0 ? undefined : entry.slice(colon + 1);
  }
  if (host === "") {
    throw new ValidationError(
      `${which} in the connection string is empty${entry ? ` ("${entry}")` : ""}: write every host, e.g. postgres://user@h1:5432,h2:5432/db`,
    );
  }
  return { host: decodeHost(host), port: portOf(portText, `${which} (${host})`, defaultPort) };
}

/** `?host=h1,h2&port=5432,5433`: one port for all, or one per host. */
function queryHostList(hostsText: string, portsText: string | undefined): HostPort[] {
  const names = hostsText.split(",");
  const ports = portsText === undefined || portsText === "" ? [] : portsText.split(",");
  if (ports.length > 1 && ports.length !== names.length) {
    throw new ValidationError(
      `the connection string lists ${names.length} hosts but ${ports.length} ports: give one port for all hosts, or one per host`,
    );
  }
  return names.map((name, i) => {
    const which = `host ${i + 1} of ${names.length}`;
    if (name.trim() === "") {
      throw new ValidationError(
        `${which} in ?host= is empty: write every host, e.g. ?host=h1,h2&port=5432 (or postgres://user@h1:5432,h2:5432/db)`,
      );
    }
    return { host: name, port: portOf(ports.length > 1 ? ports[i] : ports[0], `${which} (${name})`, DEFAULT_PORT) };
  });
}

function portOf(text: string | undefined, which: string, fallback: number): number {
  if (text === undefined || text === "") return fallback;
  const port = /^\d+$/.test(text) ? Number(text) : Number.NaN;
  if (!Number.isInteger(port) || port < 1 || port > 65535) {
    throw new ValidationError(
      `the port of ${which} is ${JSON.stringify(text)}, not a port number: use 1-65535 (PostgreSQL's default is 5432)`,
    );
  }
  return port;
}

function decodeHost(host: string): string {
  try {
    return decodeURIComponent(host);
  } catch {
    throw new ValidationError(`the host "${host}" in the connection string is not valid percent-encoding`);
  }
}
