/**
 * Dashboard authentication and CSRF protection.
 *
 * Credentials: a token and/or a user and password, from options or from
 * SKIPQ_DASHBOARD_TOKEN / SKIPQ_DASHBOARD_USER + SKIPQ_DASHBOARD_PASSWORD.
 * A request is signed in by a session cookie (set by the sign-in form:
 * HttpOnly, SameSite=Strict, HMAC-signed, expiring), by
 * `Authorization: Bearer <token>` or by HTTP Basic. Comparisons are
 * constant-time over SHA-256 digests. A state-changing POST from a cookie or
 * Basic session (which browsers attach on their own) must carry a CSRF token
 * derived from that session. Secrets are never logged or rendered.
 */
import { createHash, createHmac, randomBytes, timingSafeEqual } from "node:crypto";
import type http from "node:http";
import { ValidationError } from "../../core/errors.js";

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

/** Who a request is: `kind` decides whether a CSRF token is needed; `id` binds the token. */
export interface Principal {
  kind: "session" | "bearer" | "basic" | "open";
  id: string;
}

export const SESSION_COOKIE = "skipq_session";

export class Authenticator {
  private readonly key: Buffer;
  constructor(
    private readonly credentials: Credentials | undefined,
    private readonly sessionTtlMs: number,
    secret?: string,
  ) {
    // Sessions are signed with a per-process secret mixed with the credentials,
    // so changing the token or password signs everyone out.
    this.key = createHmac("sha256", secret ?? randomBytes(32))
      .update(`${credentials?.token ?? ""}\u0000${credentials?.user ?? ""}\u0000${credentials?.password ?? ""}`)
      .digest();
  }

  get sessionTtlSeconds(): number {
    return this.sessionTtlMs / 1000;
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
  authenticate(req: http.IncomingMessage): Principal | undefined {
    if (!this.credentials) return { kind: "open", id: "open" };
    const header = req.headers.authorization;
    if (header?.startsWith("Bearer ") && this.checkToken(header.slice(7).trim()))
      return { kind: "bearer", id: "bearer" };
    if (header?.startsWith("Basic ")) {
      const decoded = Buffer.from(header.slice(6).trim(), "base64").toString("utf8");
      const colon = decoded.indexOf(":");
      if (colon > 0 && this.checkPassword(decoded.slice(0, colon), decoded.slice(colon + 1)))
        return { kind: "basic", id: `basic:${decoded.slice(0, colon)}` };
    }
    const cookie = parseCookies(req.headers.cookie)[SESSION_COOKIE];
    const session = cookie === undefined ? undefined : this.verifySession(cookie);
    if (session) return { kind: "session", id: `session:${session}` };
    return undefined;
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

  /** A new signed session value: `expiry.nonce.signature`. */
  newSession(): string {
    const expires = Date.now() + this.sessionTtlMs;
    const body = `${expires}.${randomBytes(16).toString("base64url")}`;
    return `${body}.${this.sign(body)}`;
  }

  /** The session's nonce when the value is authentic and unexpired. */
  private verifySession(value: string): string | undefined {
    const parts = value.split(".");
    if (parts.length !== 3) return undefined;
    const [expires, nonce, signature] = parts as [string, string, string];
    if (!same(this.sign(`${expires}.${nonce}`), signature)) return undefined;
    if (!/^\d+$/.test(expires) || Number(expires) < Date.now()) return undefined;
    return nonce;
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

  private sign(text: string): string {
    return createHmac("sha256", this.key).update(text).digest("base64url");
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
