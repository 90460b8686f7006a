/**
 * The dashboard's sign-in routes: the sign-in form and its POST (answered
 * before sign-in, throttled per client and user, audited) and the sign-out
 * POST (any role, CSRF-checked like every signed-in POST), which ends the
 * session and its live streams.
 */
import type http from "node:http";
import type { Logger } from "../../core/logger.js";
import { type Authenticator, SESSION_COOKIE, ThrottledError } from "./auth.js";
import { signInPage } from "./layout.js";
import type { LiveHub } from "./live.js";
import { readForm } from "./request.js";
import type { responders } from "./respond.js";
import { actionRoute, type DashboardRuntime, type OpenRequest, type Route } from "./routes.js";

/** What the sign-in routes use. */
export interface SignInDeps {
  base: string;
  auth: Authenticator;
  live: LiveHub | undefined;
  logger: Logger;
  /** Writes an audit row. */
  audit(
    req: http.IncomingMessage,
    who: string,
    what: string,
    target: string | null,
    detail: Record<string, unknown>,
  ): Promise<void>;
  send: DashboardRuntime["send"];
  cookie: DashboardRuntime["cookie"];
  redirect: ReturnType<typeof responders>["redirect"];
  safeBack: ReturnType<typeof responders>["safeBack"];
}

/** The sign-in form, its POST and the sign-out. */
export function signInRoutes(d: SignInDeps): Route[] {
  const { base, auth, live, logger, audit, send, cookie, redirect, safeBack } = d;
  /** A sign-in: a session cookie on the right credentials, the form again with its message otherwise. */
  async function signIn({ req, res, ctx }: OpenRequest): Promise<void> {
    const form = await readForm(req);
    const next = safeBack(form.get("next"));
    const show = (status: number, message: string) =>
      send(res, status, signInPage(ctx, { token: auth.acceptsToken, password: auth.acceptsPassword, next, message }));
    const token = form.get("token");
    let name: string | undefined;
    try {
      name = auth.check(
        req,
        "form",
        token ? { token } : { user: form.get("user") ?? "", password: form.get("password") ?? "" },
      );
    } catch (error) {
      if (!(error instanceof ThrottledError)) throw error;
      res.setHeader("retry-after", String(error.retryAfterSeconds));
      return show(429, `Too many failed sign-ins from here; wait ${error.retryAfterSeconds} s and try again.`);
    }
    if (name === undefined) return show(401, "Wrong credentials.");
    const session = await auth.startSession(req, name);
    logger.info({ by: name }, "skipq dashboard: signed in");
    await audit(req, name, "sign-in", null, {});
    return redirect(res, next, [cookie(req, SESSION_COOKIE, session, Math.floor(auth.sessionTtlSeconds))]);
  }

  /** The sign-in form: a signed-in request is sent on to the overview. */
  async function signInForm({ req, res, url, ctx }: OpenRequest): Promise<void> {
    if (await auth.authenticate(req)) return redirect(res, `${base}/`);
    const next = safeBack(url.searchParams.get("next"));
    send(res, 401, signInPage(ctx, { token: auth.acceptsToken, password: auth.acceptsPassword, next }));
  }

  return [
    { kind: "open", method: "GET", path: "/login", handle: signInForm },
    { kind: "open", method: "POST", path: "/login", handle: signIn },
    actionRoute(
      "/logout",
      async (_, { req, res, principal, record }) => {
        await auth.endSession(req);
        live?.endSession(principal.id);
        await record("sign-out", null);
        redirect(res, `${base}/login`, [cookie(req, SESSION_COOKIE, "", 0)]);
      },
      "viewer",
    ),
  ];
}
