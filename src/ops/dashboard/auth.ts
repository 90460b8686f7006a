/**
 * Dashboard authentication and CSRF protection.
 *
 * Credentials: a token and/or a user and password, from options or from
 * SKIPQ_DASHBOARD_TOKEN / SKIPQ_DASHBOARD_USER + SKIPQ_DASHBOARD_PASSWORD.
 * A request is signed in by a session cookie (set by the sign-in form:
 * HttpOnly, SameSite=Strict, a random value whose keyed hash is a row of
 * dashboard_sessions, so sign-out revokes it and an idle one expires), by
 * `Authorization: Bearer <token>` or by HTTP Basic. Comparisons are
 * constant-time over SHA-256 digests. A state-changing POST from a cookie or
 * Basic session (which browsers attach on their own) must carry a CSRF token
 * derived from that session. Secrets are never logged, rendered or stored.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type http from "node:http";
import type pg from "pg";
import { SkipqError, ValidationError } from "../../core/errors.js";
import { dashboardStatements } from "../../db/sql/dashboard.js";

export interface DashboardAuth {
  /** A bearer token, also accepted by the sign-in form. Default: `SKIPQ_DASHBOARD_TOKEN`. At least 16 characters. */
  token?: string;
  /** Basic-auth / sign-in user. Default: `SKIPQ_DASHBOARD_USER`. */
  user?: string;
  /** Basic-auth / sign-in password. Default: `SKIPQ_DASHBOARD_PASSWORD`. At least 8 characters. */
  password?: string;
}

export interface Credentials {
  token: string | undefined;
  user: string | undefined;
  password: string | undefined;
}

/** Credentials from options, then the environment; undefined when none are configured. */
export function resolveCredentials(
  auth: DashboardAuth | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Credentials | undefined {
  const token = auth?.token ?? (env.SKIPQ_DASHBOARD_TOKEN || undefined);
  const user = auth?.user ?? (env.SKIPQ_DASHBOARD_USER || undefined);
  const password = auth?.password ?? (env.SKIPQ_DASHBOARD_PASSWORD || undefined);
  if ((user === undefined) !== (password === undefined))
    throw new ValidationError(
      "dashboard auth needs both a user and a password (SKIPQ_DASHBOARD_USER and SKIPQ_DASHBOARD_PASSWORD), or neither",
    );
  if (token !== undefined && (typeof token !== "string" || token.length < 16))
    throw new ValidationError(
      "the dashboard token must be at least 16 characters; generate one with `openssl rand -hex 24`",
    );
  if (password !== undefined && (typeof password !== "string" || password.length < 8))
    throw new ValidationError("the dashboard password must be at least 8 characters");
  if (user !== undefined && (typeof user !== "string" || user.includes(":") || user.length === 0))
    throw new ValidationError("the dashboard user must be a non-empty string without ':'");
  if (token === undefined && user === undefined) return undefined;
  return { token, user, password };
}

/** A fresh random token (for a loopback dashboard started without credentials). */
export function generateToken(): string {
  return randomBytes(24).toString("base64url");
}

const digest = (text: string): Buffer => createHash("sha256").update(text).digest();
const same = (a: string, b: string): boolean => timingSafeEqual(digest(a), digest(b));

/** Who a request is: `kind` decides whether a CSRF token is needed; `id` binds the token; `name` is logged. */
export interface Principal {
  kind: "session" | "bearer" | "basic" | "open";
  id: string;
  /** "token", "user:<name>" or "open": who signed in, for the logs. */
  name: string;
}

export const SESSION_COOKIE = "skipq_session";

export interface SessionOptions {
  /** Absolute lifetime of a session, from sign-in. */
  ttlMs: number;
  /** A session unused this long is refused. */
  idleMs: number;
  /** Keys session hashes and CSRF tokens; the same on every replica and across restarts keeps sessions valid. Default: random per process. */
  secret?: string | undefined;
}

export class Authenticator {
  private readonly key: Buffer;
  private readonly sql: ReturnType<typeof dashboardStatements>;
  constructor(
    private readonly credentials: Credentials | undefined,
    private readonly pool: pg.Pool,
    schemaSql: string,
    private readonly sessions: SessionOptions,
  ) {
    // The key mixes the secret with the credentials, so changing the token or
    // password changes every session's hash and CSRF token: everyone is signed out.
    this.key = createHmac("sha256", sessions.secret ?? randomBytes(32))
      .update(`${credentials?.token ?? ""}\u0000${credentials?.user ?? ""}\u0000${credentials?.password ?? ""}`)
      .digest();
    this.sql = dashboardStatements(schemaSql);
  }

  get sessionTtlSeconds(): number {
    return this.sessions.ttlMs / 1000;
  }

  get enabled(): boolean {
    return this.credentials !== undefined;
  }

  get acceptsToken(): boolean {
    return this.credentials?.token !== undefined;
  }

  get acceptsPassword(): boolean {
    return this.credentials?.user !== undefined;
  }

  /** The principal behind a request, or undefined when it is not signed in. */
  async authenticate(req: http.IncomingMessage): Promise<Principal | undefined> {
    if (!this.credentials) return { kind: "open", id: "open", name: "open" };
    const header = req.headers.authorization;
    if (header?.startsWith("Bearer ") && this.checkToken(header.slice(7).trim()))
      return { kind: "bearer", id: "bearer", name: "token" };
    if (header?.startsWith("Basic ")) {
      const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      if (colon > 0 && this.checkPassword(decoded.slice(0, colon), decoded.slice(colon + 1)))
        return { kind: "basic", id: `basic:${decoded.slice(0, colon)}`, name: `user:${decoded.slice(0, colon)}` };
    }
    const id = this.sessionId(req);
    if (id === undefined) return undefined;
    const { rows } = await this.query(this.sql.sessionTouch, [id, this.sessions.idleMs]);
    const name = rows[0]?.principal as string | undefined;
    return name === undefined ? undefined : { kind: "session", id: `session:${id}`, name };
  }

  checkToken(token: string): boolean {
    return this.credentials?.token !== undefined && same(token, this.credentials.token);
  }

  checkPassword(user: string, password: string): boolean {
    const c = this.credentials;
    if (c?.user === undefined || c.password === undefined) return false;
    // Both compared, always, so timing does not tell which one was wrong.
    const userOk = same(user, c.user);
    const passwordOk = same(password, c.password);
    return userOk && passwordOk;
  }

  /**
   * Starts a session for `name` ("token" or "user:<name>") and returns the
   * cookie value: 256 random bits, of which the database keeps only a keyed
   * hash. The session presented with the request, if any, is revoked in the
   * same statement, so every sign-in rotates the session.
   */
  async startSession(req: http.IncomingMessage, name: string): Promise<string> {
    const value = randomBytes(32).toString("base64url");
    await this.query(this.sql.sessionCreate, [
      this.hash(value),
      name,
      this.sessions.ttlMs,
      this.sessionId(req) ?? null,
      this.sessions.idleMs,
    ]);
    return value;
  }

  /** Revokes the request's session (sign-out); the cookie is worthless from then on, on every replica. */
  async endSession(req: http.IncomingMessage): Promise<void> {
    const id = this.sessionId(req);
    if (id !== undefined) await this.query(this.sql.sessionRevoke, [id]);
  }

  /** The CSRF token for a principal: forms carry it, POSTs must echo it. */
  csrfToken(principal: Principal): string {
    return this.sign(`csrf\u0000${principal.id}`);
  }

  /** Whether a POST from this principal carries a valid CSRF token (bearer clients need none: browsers never attach that header themselves). */
  checkCsrf(principal: Principal, token: string | undefined): boolean {
    if (principal.kind === "bearer") return true;
    return typeof token === "string" && same(token, this.csrfToken(principal));
  }

  /** The stored id of the request's session cookie (its keyed hash), or undefined when it carries none. */
  private sessionId(req: http.IncomingMessage): string | undefined {
    const value = parseCookies(req.headers.cookie)[SESSION_COOKIE];
    return value === undefined || value.length === 0 || value.length > 100 ? undefined : this.hash(value);
  }

  private hash(value: string): string {
    return this.sign(`session\u0000${value}`);
  }

  private sign(text: string): string {
    return createHmac("sha256", this.key).update(text).digest("base64url");
  }

  private async query(text: string, values: unknown[]): Promise<pg.QueryResult> {
    try {
      return await this.pool.query(text, values);
    } catch (error) {
      if ((error as { code?: string }).code === "42P01")
        throw new SkipqError(
          "SKIPQ_SCHEMA_NOT_MIGRATED",
          "the dashboard keeps sessions in the dashboard_sessions table, which this schema lacks; run `skipq migrate` or call migrate() first",
        );
      throw error;
    }
  }
}

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

/**
 * Counts failed sign-ins in a sliding minute; past the limit, sign-in answers
 * 429 until the window moves on. Per process, not per client: an attacker
 * cannot make it faster, only slower for everyone (which is the point).
 */
export class SignInThrottle {
  private failures: number[] = [];
  constructor(private readonly perMinute = 20) {}
  blocked(): boolean {
    const cutoff = Date.now() - 60_000;
    this.failures = this.failures.filter((t) => t > cutoff);
    return this.failures.length >= this.perMinute;
  }
  fail(): void {
    this.failures.push(Date.now());
  }
}
