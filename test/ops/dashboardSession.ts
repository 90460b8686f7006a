/**
 * Dashboard tests' browser: requests against a running dashboard (GET, and
 * POST of a form whose fields may repeat), no redirect followed, and a
 * sign-in that returns the session cookie and the CSRF token every signed-in
 * page carries in its sign-out form.
 */
import { expect } from "vitest";

type Form = Record<string, string | string[]>;

export interface DashboardSession {
  /** The session cookie ("name=value"), "" before sign-in. */
  cookie: string;
  /** The CSRF token forms must echo, "" before sign-in. */
  csrf: string;
  get(path: string, headers?: Record<string, string>): Promise<Response>;
  post(path: string, form: Form, headers?: Record<string, string>): Promise<Response>;
}

/**
 * Requests to the dashboard at `base()` (its URL, read at each request: the dashboard starts in a hook),
 * sending `headers` with each, and the session's cookie once signed in.
 */
export function dashboardSession(base: () => string | URL, headers: Record<string, string> = {}): DashboardSession {
  const session: DashboardSession = {
    cookie: "",
    csrf: "",
    get: (path, more = {}) =>
      fetch(new URL(path, base()), {
        headers: { ...headers, ...(session.cookie ? { cookie: session.cookie } : {}), ...more },
        redirect: "manual",
      }),
    post: (path, form, more = {}) => {
      const body = new URLSearchParams();
      for (const [k, v] of Object.entries(form)) for (const x of Array.isArray(v) ? v : [v]) body.append(k, x);
      return fetch(new URL(path, base()), {
        method: "POST",
        headers: {
          "content-type": "application/x-www-form-urlencoded",
          ...headers,
          ...(session.cookie ? { cookie: session.cookie } : {}),
          ...more,
        },
        body: body.toString(),
        redirect: "manual",
      });
    },
  };
  return session;
}

/**
 * Signs `session` in with `credentials` (`{ token }` or `{ user, password }`) and keeps its cookie and CSRF
 * token; `next` is where the sign-in redirects (the dashboard's root by default). Fails the test when the
 * dashboard refuses.
 */
export async function signIn(
  session: DashboardSession,
  credentials: Record<string, string>,
  next = "/",
): Promise<DashboardSession> {
  session.cookie = "";
  const res = await session.post("login", { ...credentials, next });
  expect(res.status, "sign-in").toBe(303);
  session.cookie = (res.headers.get("set-cookie") ?? "").split(";")[0] as string;
  const page = await (await session.get("")).text();
  session.csrf = /name="_csrf" value="([^"]+)"/.exec(page)?.[1] ?? "";
  expect(session.csrf, "the CSRF token of a signed-in page").not.toBe("");
  return session;
}
