/**
 * Webhook sink: POSTs each outbox event as JSON, signed with HMAC-SHA256 over
 * `${timestamp}.${body}` so the receiver can check origin and freshness.
 * Invariants: a delivery counts only on a 2xx answer, and a redirect is never
 * followed (it would re-send the signed body and custom headers elsewhere);
 * every request has a timeout; with `allowedHosts` or
 * `allowPrivateAddresses: false` no request ever leaves for another host or a
 * private address — the address is checked where the socket connects, after
 * DNS, so a name that resolves (or re-resolves) to 10.0.0.1 is refused too.
 * It never retries itself: the relay owns retries and ordering. A URL reaches
 * an error (so last_error, the relay's log, the dashboard) only as
 * scheme://host[:port] and a redacted path: Slack, Discord and Teams keep
 * their token in the path.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import dns from "node:dns";
import http from "node:http";
import https from "node:https";
import net from "node:net";
import { ValidationError } from "../../core/errors.js";
import { describeUrl } from "../../core/secrets.js";
import { type Duration, toMs } from "../../core/validate.js";
import type { OutboxEvent, OutboxSink } from "../outbox.js";

export interface WebhookSinkOptions {
  /** Where to POST (http or https). A function picks a URL per event (e.g. by topic). */
  url: string | ((event: OutboxEvent) => string);
  /** Shared secret for the `x-skipq-signature` header. */
  secret: string;
  /** Per-request timeout (also bounded by the relay's deliveryTimeout). Default "5s". */
  timeout?: Duration;
  /** Extra request headers, e.g. an authorization token. */
  headers?: Record<string, string>;
  /**
   * Host names the sink may POST to: exact names or IP addresses
   * (case-insensitive), or `*.example.com` for any subdomain of example.com.
   * A URL on any other host fails the delivery without a request. Set it
   * whenever `url` is built from data (a customer's endpoint, a topic).
   * Default: any host.
   */
  allowedHosts?: string[];
  /**
   * Whether to POST to loopback, private (RFC 1918, unique-local), link-local
   * (169.254.0.0/16, the cloud metadata address), CGNAT, multicast or
   * unspecified addresses. Checked on every address a host name resolves to,
   * when the socket connects. Default true: receivers on an internal network
   * are common and the URL is the application's own configuration; set false
   * when URLs come from users.
   */
  allowPrivateAddresses?: boolean;
}

/** Header carrying `sha256=<hex>` of HMAC-SHA256(secret, `${timestamp}.${body}`). */
export const SIGNATURE_HEADER = "x-skipq-signature";
/** Header carrying the signing time in Unix milliseconds. */
export const TIMESTAMP_HEADER = "x-skipq-timestamp";

/** The signature skipq sends for `body` at `timestamp`. */
export function signWebhook(secret: string, timestamp: string, body: string): string {
  return `sha256=${createHmac("sha256", secret).update(`${timestamp}.${body}`).digest("hex")}`;
}

/**
 * For receivers: true when `signature` is skipq's for this body and timestamp
 * and the timestamp is within `toleranceMs` of now (default 5 minutes).
 */
export function verifyWebhook(
  secret: string,
  timestamp: string,
  body: string,
  signature: string,
  toleranceMs = 300_000,
): boolean {
  const at = Number(timestamp);
  if (!Number.isFinite(at) || Math.abs(Date.now() - at) > toleranceMs) return false;
  const expected = Buffer.from(signWebhook(secret, timestamp, body));
  const given = Buffer.from(signature);
  return expected.length === given.length && timingSafeEqual(expected, given);
}

/** A sink that POSTs `{ id, topic, key, event, headers, createdAt }` to a URL. */
export function webhookSink(options: WebhookSinkOptions): OutboxSink {
  if (typeof options?.secret !== "string" || options.secret.length < 16) {
    throw new ValidationError("webhookSink needs a secret of at least 16 characters for the HMAC signature");
  }
  if (typeof options.url !== "string" && typeof options.url !== "function") {
    throw new ValidationError("webhookSink needs a url (string or function of the event)");
  }
  const timeoutMs = toMs("timeout", options.timeout ?? "5s", { allowZero: false });
  const hostAllowed = allowedHostsMatcher(options.allowedHosts);
  const allowPrivate = options.allowPrivateAddresses ?? true;
  if (typeof allowPrivate !== "boolean") throw new ValidationError("allowPrivateAddresses must be true or false");
  const target = (text: string): URL => {
    let url: URL;
    try {
      url = new URL(text);
    } catch {
      // Never quoted: the text may hold the credential a URL would keep in its path.
      throw new ValidationError(
        `the webhook url (${typeof text === "string" ? `${text.length} characters` : typeof text}) is not a URL: return an absolute http or https URL`,
      );
    }
    if (url.protocol !== "http:" && url.protocol !== "https:")
      throw new ValidationError(`webhook url ${url.origin} must be http or https`);
    const host = bareHost(url.hostname);
    if (!hostAllowed(host))
      throw new ValidationError(`webhook host ${host} is not in allowedHosts; add it there or fix the url`);
    if (!allowPrivate && net.isIP(host) !== 0 && isPrivateAddress(host)) throw privateAddressError(host);
    return url;
  };
  if (typeof options.url === "string") target(options.url);
  // Our own agents: every pooled socket was connected through the guarded lookup.
  const lookup = allowPrivate ? undefined : guardedLookup;
  const agents = {
    "http:": new http.Agent({ keepAlive: true }),
    "https:": new https.Agent({ keepAlive: true }),
  };
  return {
    name: "webhook",
    async deliver(event, signal) {
      const url = target(typeof options.url === "function" ? options.url(event) : (options.url as string));
      const body = JSON.stringify({
        id: event.id,
        topic: event.topic,
        key: event.key,
        event: event.event,
        headers: event.headers,
        createdAt: event.createdAt,
      });
      const timestamp = String(Date.now());
      const response = await post(url, body, {
        agent: agents[url.protocol as "http:" | "https:"],
        lookup,
        signal: AbortSignal.any([signal, AbortSignal.timeout(timeoutMs)]),
        headers: {
          ...options.headers,
          "content-type": "application/json",
          "content-length": String(Buffer.byteLength(body)),
          "x-skipq-event-id": event.id,
          "x-skipq-topic": event.topic,
          "x-skipq-key": encodeURIComponent(event.key),
          "x-skipq-attempt": String(event.attempt),
          [TIMESTAMP_HEADER]: timestamp,
          [SIGNATURE_HEADER]: signWebhook(options.secret, timestamp, body),
        },
      });
      const shown = describeUrl(url);
      if (response.status >= 300 && response.status <= 399) {
        const to = response.location === undefined ? "" : ` (to ${describeLocation(response.location, url)})`;
        throw new Error(
          `webhook ${shown} answered ${response.status} ${response.statusText}${to} for outbox event ${event.id}; redirects are not followed (they would re-send the signed body and headers elsewhere): point the sink at the final URL`,
        );
      }
      if (response.status < 200 || response.status > 299) {
        throw new Error(
          `webhook ${shown} answered ${response.status} ${response.statusText} for outbox event ${event.id}`,
        );
      }
    },
    async close() {
      agents["http:"].destroy();
      agents["https:"].destroy();
    },
  };
}

/** A redirect's Location as it may be stored: resolved against the request's URL and described. */
function describeLocation(location: string, base: URL): string {
  try {
    return describeUrl(new URL(location, base));
  } catch {
    return "a location that is not a URL";
  }
}

interface PostOptions {
  agent: http.Agent;
  lookup: net.LookupFunction | undefined;
  signal: AbortSignal;
  headers: Record<string, string>;
}

/**
 * One POST with node:http(s), which never follows redirects (fetch cannot
 * take a connect-time address check without an extra dependency). Resolves
 * with the status once the response body has been read to the end, so the
 * connection can be reused.
 */
function post(
  url: URL,
  body: string,
  options: PostOptions,
): Promise<{ status: number; statusText: string; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const request = (url.protocol === "https:" ? https : http).request(url, {
      method: "POST",
      agent: options.agent,
      headers: options.headers,
      signal: options.signal,
      ...(options.lookup ? { lookup: options.lookup } : {}),
    });
    request.once("error", reject);
    request.once("response", (response) => {
      response.once("error", reject);
      response.once("end", () =>
        resolve({
          status: response.statusCode ?? 0,
          statusText: response.statusMessage ?? "",
          location: typeof response.headers.location === "string" ? response.headers.location.slice(0, 200) : undefined,
        }),
      );
      response.resume();
    });
    request.end(body);
  });
}

/** `allowedHosts` as a predicate; validated once, when the sink is built. */
function allowedHostsMatcher(hosts: string[] | undefined): (host: string) => boolean {
  if (hosts === undefined) return () => true;
  if (!Array.isArray(hosts) || hosts.length === 0)
    throw new ValidationError("allowedHosts must be a non-empty array of host names; omit it to allow any host");
  const exact = new Set<string>();
  const suffixes: string[] = [];
  for (const entry of hosts) {
    const host = typeof entry === "string" ? bareHost(entry.trim()) : "";
    const name = host.startsWith("*.") ? host.slice(2) : host;
    if (!/^[a-z0-9_-]+(\.[a-z0-9_-]+)*$/.test(name) && net.isIP(name) === 0)
      throw new ValidationError(
        `allowedHosts entry ${JSON.stringify(entry)} is not a host: use host names like "hooks.example.com" or "*.example.com", or IP addresses (no scheme, port or path)`,
      );
    if (host.startsWith("*.")) suffixes.push(`.${name}`);
    else exact.add(name);
  }
  return (host) => exact.has(host) || suffixes.some((suffix) => host.endsWith(suffix));
}

/** A URL's hostname, lowercased, without IPv6 brackets or a trailing dot. */
function bareHost(hostname: string): string {
  return hostname
    .toLowerCase()
    .replace(/^\[(.*)\]$/, "$1")
    .replace(/\.$/, "");
}

/** Addresses a webhook must not reach when private addresses are refused. */
const PRIVATE = new net.BlockList();
for (const [network, prefix] of [
  ["0.0.0.0", 8], // "this" network, unspecified
  ["10.0.0.0", 8],
  ["100.64.0.0", 10], // carrier-grade NAT
  ["127.0.0.0", 8],
  ["169.254.0.0", 16], // link-local, cloud metadata
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15], // benchmarking
  ["224.0.0.0", 4], // multicast
  ["240.0.0.0", 4], // reserved, broadcast
] as const)
  PRIVATE.addSubnet(network, prefix, "ipv4");
for (const [network, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["fc00::", 7], // unique local
  ["fe80::", 10], // link-local
  ["ff00::", 8], // multicast
] as const)
  PRIVATE.addSubnet(network, prefix, "ipv6");

/** Whether an IP address is loopback, private, link-local or otherwise not a public unicast address. */
function isPrivateAddress(address: string): boolean {
  const family = net.isIP(address);
  if (family === 4) return PRIVATE.check(address, "ipv4");
  if (family !== 6) return false;
  // IPv4 embedded in IPv6 (mapped ::ffff:a.b.c.d, NAT64 64:ff9b::a.b.c.d): judge the IPv4 address.
  const embedded = /^(?:::ffff:|64:ff9b::)(?:0:)?(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  if (embedded) return PRIVATE.check(embedded, "ipv4");
  const hex = /^(?:::ffff:|64:ff9b::)([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i.exec(address);
  if (hex) {
    const n = (Number.parseInt(hex[1] as string, 16) << 16) | Number.parseInt(hex[2] as string, 16);
    return PRIVATE.check([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join("."), "ipv4");
  }
  return PRIVATE.check(address, "ipv6");
}

function privateAddressError(address: string): ValidationError {
  return new ValidationError(
    `webhook address ${address} is a private or loopback address, refused by allowPrivateAddresses: false`,
  );
}

/** dns.lookup, refusing the connection when any address the name resolves to is private. */
const guardedLookup = ((hostname: string, options: dns.LookupOptions, callback: (...args: unknown[]) => void) => {
  dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error);
    const refused = addresses.find((a) => isPrivateAddress(a.address));
    if (refused) return callback(privateAddressError(`${refused.address} (${hostname})`));
    if (options.all) return callback(null, addresses);
    const first = addresses[0];
    if (!first) return callback(Object.assign(new Error(`no address for ${hostname}`), { code: "ENOTFOUND" }));
    callback(null, first.address, first.family);
  });
}) as unknown as net.LookupFunction;
