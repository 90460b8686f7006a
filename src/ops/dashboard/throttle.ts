/**
 * The sign-in throttle: failed credential checks in a sliding window per
 * client and per account, in memory and bounded. It only counts and answers
 * how long to wait; the Authenticator decides when to ask it.
 */
import type { Duration } from "../../core/validate.js";

/** A credential check refused without running: the client must wait `retryAfterSeconds`. */
export class ThrottledError extends Error {
  constructor(readonly retryAfterSeconds: number) {
    super(`too many failed sign-ins; wait ${retryAfterSeconds} s and try again`);
  }
}

export interface ThrottleOptions {
  /** Failed credential checks one client may make per window; past it, that client's checks answer 429. Default 10. */
  perClient?: number;
  /**
   * Failed checks against one user name (or the token) per window, across
   * all clients; past it, clients that never signed in as that name answer
   * 429 for it. Clients that did are never refused by this limit. Default 30.
   */
  perUser?: number;
  /** The sliding window. Default "1m". */
  window?: Duration;
}

/** How many keys each map of the throttle keeps; the least recently used go first. */
const THROTTLE_KEYS = 10_000;
/** How long a successful sign-in marks a client as known for that name. */
const KNOWN_FOR_MS = 30 * 86_400_000;

/**
 * Failed credential checks in a sliding window, per client and per account
 * ("token" or "user:<name>"). Nothing is global: a client is refused for its
 * own failures, and for an account under attack only while it has never
 * signed in as that account here. In memory, per process: each replica
 * throttles on its own. Bounded: at most THROTTLE_KEYS keys per map.
 */
export class CredentialThrottle {
  private readonly perClient: number;
  private readonly perUser: number;
  private readonly windowMs: number;
  private readonly byClient = new Map<string, number[]>();
  private readonly byAccount = new Map<string, number[]>();
  /** `${account}\u0000${client}` → when it last signed in. */
  private readonly known = new Map<string, number>();

  constructor(options: { perClient: number; perUser: number; windowMs: number }) {
    this.perClient = options.perClient;
    this.perUser = options.perUser;
    this.windowMs = options.windowMs;
  }

  /** Seconds (rounded up) until this client may try this account; 0 when it may now. */
  wait(client: string, account: string, now = Date.now()): number {
    const clientWait = this.waitOn(this.byClient, client, this.perClient, now);
    if (clientWait > 0) return clientWait;
    const knownAt = this.known.get(`${account}\u0000${client}`);
    if (knownAt !== undefined && knownAt > now - KNOWN_FOR_MS) return 0;
    return this.waitOn(this.byAccount, account, this.perUser, now);
  }

  /** Records a failure; true when it just made the client (or the account) refused. */
  failed(client: string, account: string, now = Date.now()): boolean {
    const a = this.record(this.byClient, client, this.perClient, now);
    const b = this.record(this.byAccount, account, this.perUser, now);
    return a || b;
  }

  succeeded(client: string, account: string, now = Date.now()): void {
    const key = `${account}\u0000${client}`;
    this.known.delete(key);
    this.known.set(key, now);
    if (this.known.size > THROTTLE_KEYS) this.known.delete(this.known.keys().next().value as string);
  }

  private recent(map: Map<string, number[]>, key: string, now: number): number[] {
    const cutoff = now - this.windowMs;
    const times = (map.get(key) ?? []).filter((t) => t > cutoff);
    if (times.length === 0) map.delete(key);
    return times;
  }

  private waitOn(map: Map<string, number[]>, key: string, limit: number, now: number): number {
    const times = this.recent(map, key, now);
    if (times.length < limit) return 0;
    const freeAt = (times[times.length - limit] as number) + this.windowMs;
    return Math.max(1, Math.ceil((freeAt - now) / 1000));
  }

  private record(map: Map<string, number[]>, key: string, limit: number, now: number): boolean {
    const times = this.recent(map, key, now);
    times.push(now);
    // Keep only what the limit needs, so one key never grows past it.
    if (times.length > limit) times.splice(0, times.length - limit);
    map.delete(key);
    map.set(key, times);
    if (map.size > THROTTLE_KEYS) map.delete(map.keys().next().value as string);
    return times.length === limit;
  }
}
