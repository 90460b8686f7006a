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
 *
 * Every credential check (form, Basic, Bearer) goes through one throttle, per
 * client and per user name, and every failure is logged; no limit is global,
 * so a stranger's guessing can never lock the admin's own client out. The
 * throttle itself is in throttle.ts and the request readers (cookies, client
 * address, loopback) in clientInfo.ts; their names are re-exported here.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type http from "node:http";
import { SkipqError, ValidationError } from "../../core/errors.js";
import type { Logger } from "../../core/logger.js";
import type { DashboardStore } from "../../db/dashboardStore.js";
import { parseCookies } from "./clientInfo.js";
import { type CredentialThrottle, ThrottledError } from "./throttle.js";

export { clientAddress, hostAnswered, hostParts, isLoopback, parseCookies } from "./clientInfo.js";
export { CredentialThrottle, ThrottledError, type ThrottleOptions } from "./throttle.js";

export interface DashboardAuth {
  /** A bearer token, also accepted by the sign-in form. Default: `SKIPQ_DASHBOARD_TOKEN`. At least 16 characters. */
  token?: string;
  /** Basic-auth / sign-in user. Default: `SKIPQ_DASHBOARD_USER`. */
  user?: string;
  /** Basic-auth / sign-in password. Default: `SKIPQ_DASHBOARD_PASSWORD`. At least 8 characters. */
  password?: string;
  /**
   * A read-only credential beside the admin one: it signs in the same ways, sees every page and acts on
   * nothing (every action answers 403). Default: `SKIPQ_DASHBOARD_VIEWER_TOKEN`, `SKIPQ_DASHBOARD_VIEWER_USER`
   * and `SKIPQ_DASHBOARD_VIEWER_PASSWORD`.
   */
  viewer?: { token?: string; user?: string; password?: string };
}

/** What a principal may do: "admin" acts, "viewer" only reads. */
export type Role = "admin" | "viewer";

/** A principal's role, from its name ("viewer:…" names are read-only). */
export function roleOf(name: string): Role {
  return name.startsWith("viewer:") ? "viewer" : "admin";
}

export interface Credentials {
  token: string | undefined;
  user: string | undefined;
  password: string | undefined;
  /** The read-only credential, if any. */
  viewer?: { token: string | undefined; user: string | undefined; password: string | undefined } | undefined;
}

/** Credentials from options, then the environment; undefined when none are configured. */
export function resolveCredentials(
  auth: DashboardAuth | undefined,
  env: NodeJS.ProcessEnv = process.env,
): Credentials | undefined {
  const admin = checkedCredentials(
    "",
    auth?.token ?? (env.SKIPQ_DASHBOARD_TOKEN || undefined),
    auth?.user ?? (env.SKIPQ_DASHBOARD_USER || undefined),
    auth?.password ?? (env.SKIPQ_DASHBOARD_PASSWORD || undefined),
  );
  const viewer = checkedCredentials(
    "viewer ",
    auth?.viewer?.token ?? (env.SKIPQ_DASHBOARD_VIEWER_TOKEN || undefined),
    auth?.viewer?.user ?? (env.SKIPQ_DASHBOARD_VIEWER_USER || undefined),
    auth?.viewer?.password ?? (env.SKIPQ_DASHBOARD_VIEWER_PASSWORD || undefined),
  );
  if (!admin) {
    if (viewer)
      throw new ValidationError(
        "a read-only (viewer) dashboard credential needs an admin one beside it: set SKIPQ_DASHBOARD_TOKEN (or SKIPQ_DASHBOARD_USER and SKIPQ_DASHBOARD_PASSWORD) too",
      );
    return undefined;
  }
  if (viewer?.token !== undefined && viewer.token === admin.token)
    throw new ValidationError("the viewer token must differ from the admin token");
  if (viewer?.user !== undefined && viewer.user === admin.user)
    throw new ValidationError("the viewer user must differ from the admin user");
  return { ...admin, viewer };
}

function checkedCredentials(
  role: "" | "viewer ",
  token: string | undefined,
  user: string | undefined,
  password: string | undefined,
): { token: string | undefined; user: string | undefined; password: string | undefined } | undefined {
  const env = role === "" ? "SKIPQ_DASHBOARD" : "SKIPQ_DASHBOARD_VIEWER";
  if ((user === undefined) !== (password === undefined))
    throw new ValidationError(
      `dashboard ${role}auth needs both a user and a password (${env}_USER and ${env}_PASSWORD), or neither`,
    );
  if (token !== undefined && (typeof token !== "string" || token.length < 16))
    throw new ValidationError(
      `the dashboard ${role}token must be at least 16 characters; generate one with \`openssl rand -hex 24\``,
    );
  if (password !== undefined && (typeof password !== "string" || password.length < 8))
    throw new ValidationError(`the dashboard ${role}password must be at least 8 characters`);
  if (user !== undefined && (typeof user !== "string" || user.includes(":") || user.length === 0))
    throw new ValidationError(`the dashboard ${role}user must be a non-empty string without ':'`);
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
  constructor(
    private readonly credentials: Credentials | undefined,
    private readonly store: DashboardStore,
    private readonly sessions: SessionOptions,
    private readonly guard: {
      throttle: CredentialThrottle;
      clientOf: (req: http.IncomingMessage) => string;
      logger: Logger;
    },
  ) {
    // The key mixes the secret with the credentials, so changing the token or
    // password changes every session's hash and CSRF token: everyone is signed out.
    this.key = createHmac("sha256", sessions.secret ?? randomBytes(32))
      .update(
        [credentials, credentials?.viewer]
          .map((c) => `${c?.token ?? ""}\u0000${c?.user ?? ""}\u0000${c?.password ?? ""}`)
          .join("\u0000"),
      )
      .digest();
  }

  get sessionTtlSeconds(): number {
    return this.sessions.ttlMs / 1000;
  }

  get enabled(): boolean {
    return this.credentials !== undefined;
  }

  get acceptsToken(): boolean {
    return this.credentials?.token !== undefined || this.credentials?.viewer?.token !== undefined;
  }

  get acceptsPassword(): boolean {
    return this.credentials?.user !== undefined || this.credentials?.viewer?.user !== undefined;
  }

  /**
   * The principal behind a request, or undefined when it is not signed in.
   * Throws `ThrottledError` when the request carries Bearer or Basic
   * credentials its client (or, for an unknown client, its user name) may not
   * try yet; the credentials are then not checked at all.
   */
  async authenticate(req: http.IncomingMessage): Promise<Principal | undefined> {
    if (!this.credentials) return { kind: "open", id: "open", name: "open" };
    const header = req.headers.authorization;
    if (header?.startsWith("Bearer ")) {
      const name = this.check(req, "bearer", { token: header.slice(7).trim() });
      if (name) return { kind: "bearer", id: `bearer:${name}`, name };
    } else if (header?.startsWith("Basic ")) {
      const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      const user = colon < 0 ? decoded : decoded.slice(0, colon);
      const name = this.check(req, "basic", { user, password: colon < 0 ? "" : decoded.slice(colon + 1) });
      if (name) return { kind: "basic", id: `basic:${user}`, name };
    }
    const id = this.sessionId(req);
    if (id === undefined) return undefined;
    const name = await this.sessionTable(() => this.store.sessionTouch({ id, idleMs: this.sessions.idleMs }));
    return name === undefined ? undefined : { kind: "session", id: `session:${id}`, name };
  }

  /**
   * One throttled credential check: a token, or a user and password. Returns
   * who signed in ("token" or "user:<name>"), or undefined after logging the
   * failure. Throws `ThrottledError`, without checking, when the client has
   * failed too often, or when its user name is under attack and this client
   * never signed in as it.
   */
  check(
    req: http.IncomingMessage,
    via: "form" | "basic" | "bearer",
    given: { token?: string; user?: string; password?: string },
  ): string | undefined {
    const client = this.guard.clientOf(req);
    const account = given.token !== undefined ? "token" : `user:${given.user ?? ""}`;
    const wait = this.guard.throttle.wait(client, account);
    if (wait > 0) throw new ThrottledError(wait);
    const who =
      given.token !== undefined
        ? this.tokenOwner(given.token)
        : this.passwordOwner(given.user ?? "", given.password ?? "");
    if (who !== undefined) {
      this.guard.throttle.succeeded(client, account);
      return who === "admin" ? account : `viewer:${account}`;
    }
    const nowBlocked = this.guard.throttle.failed(client, account);
    // The user name is logged only when it is the configured one: a password typed into the user field must not reach the logs.
    const user =
      given.token !== undefined
        ? undefined
        : given.user === this.credentials?.user || given.user === this.credentials?.viewer?.user
          ? given.user
          : "(another name)";
    this.guard.logger.warn(
      { client, via, ...(user === undefined ? { credential: "token" } : { user }) },
      "skipq dashboard: failed credential check",
    );
    if (nowBlocked)
      this.guard.logger.warn(
        { client, account: user === undefined ? "token" : `user:${user}` },
        "skipq dashboard: throttled after repeated failures; this client (or this name, from clients that never signed in as it) gets 429 for a while",
      );
    return undefined;
  }

  /** Whose token this is: the admin's, the viewer's, or nobody's. Both are compared, always. */
  private tokenOwner(token: string): Role | undefined {
    const admin = this.credentials?.token !== undefined && same(token, this.credentials.token);
    const viewer = this.credentials?.viewer?.token !== undefined && same(token, this.credentials.viewer.token);
    return admin ? "admin" : viewer ? "viewer" : undefined;
  }

  private passwordOwner(user: string, password: string): Role | undefined {
    const matches = (c: { user: string | undefined; password: string | undefined } | undefined) => {
      if (c?.user === undefined || c.password === undefined) return false;
      // Both compared, always, so timing does not tell which one was wrong.
      const userOk = same(user, c.user);
      const passwordOk = same(password, c.password);
      return userOk && passwordOk;
    };
    const admin = matches(this.credentials);
    const viewer = matches(this.credentials?.viewer);
    return admin ? "admin" : viewer ? "viewer" : undefined;
  }

  checkToken(token: string): boolean {
    return this.tokenOwner(token) === "admin";
  }

  checkPassword(user: string, password: string): boolean {
    return this.passwordOwner(user, password) === "admin";
  }

  /**
   * Starts a session for `name` ("token" or "user:<name>") and returns the
   * cookie value: 256 random bits, of which the database keeps only a keyed
   * hash. The session presented with the request, if any, is revoked in the
   * same statement, so every sign-in rotates the session.
   */
  async startSession(req: http.IncomingMessage, name: string): Promise<string> {
    const value = randomBytes(32).toString("base64url");
    await this.sessionTable(() =>
      this.store.sessionCreate({
        id: this.hash(value),
        principal: name,
        ttlMs: this.sessions.ttlMs,
        presented: this.sessionId(req) ?? null,
        idleMs: this.sessions.idleMs,
      }),
    );
    return value;
  }

  /** Revokes the request's session (sign-out); the cookie is worthless from then on, on every replica. */
  async endSession(req: http.IncomingMessage): Promise<void> {
    const id = this.sessionId(req);
    if (id !== undefined) await this.sessionTable(() => this.store.sessionRevoke({ id }));
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

  /** Runs a call on the sessions table, naming the table when the schema lacks it. */
  private async sessionTable<T>(call: () => Promise<T>): Promise<T> {
    try {
      return await call();
    } catch (error) {
      // Store.query turns a missing table (42P01) into SKIPQ_SCHEMA_NOT_MIGRATED; say which table.
      if ((error as { code?: string }).code === "SKIPQ_SCHEMA_NOT_MIGRATED")
        throw new SkipqError(
          "SKIPQ_SCHEMA_NOT_MIGRATED",
          "the dashboard keeps sessions in the dashboard_sessions table, which this schema lacks; run `skipq migrate` or call migrate() first",
        );
      throw error;
    }
  }
}
